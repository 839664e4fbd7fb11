"""Big programs made of the gallery's transformer block: ``stack_source(n)`` is the model file of
``n`` layers of it, each with its own weights (``benchmarks/scaling.py`` measures these; tests
use small ones). Not a gallery entry (the leading underscore); no JAX imported here."""

from __future__ import annotations

from pathlib import Path


def stack_source(n: int) -> str:
    """The model file of an ``n``-layer stack of the gallery's transformer block."""
    block = (Path(__file__).resolve().parent / "transformer_block.py").read_text()
    block = block.replace("def model(x, params):", "def block(x, params):")
    return block + f'''

N_LAYERS = {n}


def model(x, layers):
    for i, p in enumerate(layers):
        with jax.named_scope(f"layer{{i}}"):
            x = block(x, p)
    return x


_block_inputs = example_inputs


def example_inputs():
    k = jax.random.split(jax.random.key(1), N_LAYERS)
    x, p = _block_inputs()
    # each layer its own weights (the same values would let XLA share them)
    return (x, [jax.tree_util.tree_map(lambda w, i=i: w + 0.001 * i, p) for i in range(N_LAYERS)])
'''
