"""Shape specialization: every new input shape is a new compile.

A small sequence model whose input length varies. XLA compiles for exact shapes, so calling
it with 100, 101, 102, ... tokens compiles again each time; padding to a few bucket sizes
bounds the number of compiles. Compile it here for one length; the shape sweep view compiles
it for many.
"""

import jax
import jax.numpy as jnp

D = 128


def model(x, w):
    h = jax.nn.relu(x @ w)
    return jnp.mean(h, axis=0)


def example_inputs(seq_len: int = 100):
    k1, k2 = jax.random.split(jax.random.key(0))
    return (jax.random.normal(k1, (seq_len, D)), jax.random.normal(k2, (D, D)) * 0.1)
