"""MLP: matmul, bias add and ReLU — the classic fusion example.

Two dense layers. Before optimization every `add`, `max` and `dot` is its own op; after
optimization look for the bias add and the ReLU riding in the same kernel as (or right after)
the matmul, so the [batch, hidden] intermediate never makes a round trip through memory.
"""

import jax
import jax.numpy as jnp


def model(x, w1, b1, w2, b2):
    with jax.named_scope("dense1"):
        h = jax.nn.relu(x @ w1 + b1)
    with jax.named_scope("dense2"):
        return h @ w2 + b2


def example_inputs():
    k = jax.random.split(jax.random.key(0), 5)
    batch, d_in, hidden, d_out = 128, 256, 512, 128
    return (
        jax.random.normal(k[0], (batch, d_in), jnp.float32),
        jax.random.normal(k[1], (d_in, hidden), jnp.float32) * 0.05,
        jax.random.normal(k[2], (hidden,), jnp.float32) * 0.05,
        jax.random.normal(k[3], (hidden, d_out), jnp.float32) * 0.05,
        jax.random.normal(k[4], (d_out,), jnp.float32) * 0.05,
    )
