"""Layer norm: two reductions and the elementwise ops around them.

mean, variance, normalize, scale and shift. Before optimization that is a dozen ops, each
reading and writing a [rows, features] array; look for how few kernels remain and where the
reductions (mean and variance) ended up.
"""

import jax
import jax.numpy as jnp


def model(x, scale, bias):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    var = jnp.mean(centered * centered, axis=-1, keepdims=True)
    return centered * jax.lax.rsqrt(var + 1e-5) * scale + bias


def example_inputs():
    rows, features = 1024, 512
    return (jax.random.normal(jax.random.key(0), (rows, features)), jnp.ones((features,)), jnp.zeros((features,)))
