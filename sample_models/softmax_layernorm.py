"""Softmax and layer norm: reductions and the elementwise work around them.

A row softmax followed by a layer norm. Each needs reductions over the last axis (max and sum
for softmax, mean and variance for the norm). Look for how many kernels the reductions become
and how the elementwise ops (exp, subtract, divide, scale, shift) are fused into them instead
of writing every intermediate [rows, cols] array back to memory.
"""

import jax
import jax.numpy as jnp


def model(x, scale, bias):
    with jax.named_scope("softmax"):
        p = jax.nn.softmax(x, axis=-1)
    with jax.named_scope("layernorm"):
        mean = jnp.mean(p, axis=-1, keepdims=True)
        var = jnp.var(p, axis=-1, keepdims=True)
        return (p - mean) / jnp.sqrt(var + 1e-5) * scale + bias


def example_inputs():
    k = jax.random.key(0)
    rows, cols = 512, 1024
    return (jax.random.normal(k, (rows, cols)), jnp.ones((cols,)), jnp.zeros((cols,)))
