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


def shared_stack_source(n: int) -> str:
    """The model file of an ``n``-layer decoder stack whose layers share kernels, as a real
    transformer's do: a causal mask and a rotary position table computed once, before the
    loop, and read by every layer's attention (XLA computes each once and every layer's
    kernels read it). Each layer its own weights; a Python loop, not a scan."""
    block = (Path(__file__).resolve().parent / "transformer_block.py").read_text()
    block = block.replace("def model(x, params):", "def block(x, params):")
    return block + f'''

N_LAYERS = {n}


def rotate(t, cos, sin):
    half = t.shape[-1] // 2
    t1, t2 = t[..., :half], t[..., half:]
    return jnp.concatenate([t1 * cos - t2 * sin, t1 * sin + t2 * cos], axis=-1)


def masked_attention(x, wqkv, wo, mask, cos, sin):
    seq, d = x.shape
    hd = d // HEADS
    q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
    q, k, v = (t.reshape(seq, HEADS, hd).transpose(1, 0, 2) for t in (q, k, v))
    q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    scores = q @ k.transpose(0, 2, 1) / jnp.sqrt(jnp.float32(hd))
    probs = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
    return (probs @ v).transpose(1, 0, 2).reshape(seq, d) @ wo


def decoder_block(x, params, mask, cos, sin):
    with jax.named_scope("ln1"):
        h = layer_norm(x, params["ln1_scale"], params["ln1_bias"])
    with jax.named_scope("attention"):
        x = x + masked_attention(h, params["wqkv"], params["wo"], mask, cos, sin)
    with jax.named_scope("ln2"):
        h = layer_norm(x, params["ln2_scale"], params["ln2_bias"])
    with jax.named_scope("mlp"):
        h = jax.nn.gelu(h @ params["w1"] + params["b1"])
        return x + h @ params["w2"] + params["b2"]


def model(x, layers):
    seq, d = x.shape
    hd = d // HEADS
    # computed once, read by every layer
    mask = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    angle = jnp.arange(seq)[:, None] / (10000.0 ** (jnp.arange(hd // 2) / (hd // 2)))
    cos, sin = jnp.cos(angle), jnp.sin(angle)
    for i, p in enumerate(layers):
        with jax.named_scope(f"layer{{i}}"):
            x = decoder_block(x, p, mask, cos, sin)
    return x


_block_inputs = example_inputs


def example_inputs():
    x, p = _block_inputs()
    # each layer its own weights (the same values would let XLA share them)
    return (x, [jax.tree_util.tree_map(lambda w, i=i: w + 0.001 * i, p) for i in range(N_LAYERS)])
'''
