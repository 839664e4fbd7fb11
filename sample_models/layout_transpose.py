"""Layouts and transposes: when data has to move to change its order in memory.

A transpose feeding a matmul, and a transpose whose result is returned. XLA can often absorb a
transpose into the consumer's layout (a dot reads either order for free), but a transpose
that must materialize becomes a copy/transpose kernel. Look for the layout kernels and the
edges marked with a non-default layout such as {0,1}.
"""

import jax
import jax.numpy as jnp


def model(x, w):
    with jax.named_scope("absorbed"):
        y = x.T @ w  # transpose feeding a dot
    with jax.named_scope("materialized"):
        z = jnp.transpose(y.reshape(32, 16, 64), (2, 0, 1)) * 2.0  # must exist in the new order
    return z


def example_inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    return (jax.random.normal(k1, (256, 512)), jax.random.normal(k2, (256, 64)))
