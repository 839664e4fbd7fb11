"""RNN with lax.scan: a loop the compiler keeps as a loop.

A tanh RNN cell applied over 64 time steps with `lax.scan`. XLA keeps it as a `while` whose
body holds the per-step kernels: look for the control-flow op and the kernels inside its body,
which run once per step.
"""

import jax
import jax.numpy as jnp

STEPS, BATCH, HIDDEN = 64, 32, 128


def model(xs, h0, w_x, w_h, b):
    def cell(h, x):
        h = jnp.tanh(x @ w_x + h @ w_h + b)
        return h, h

    with jax.named_scope("rnn"):
        h_last, hs = jax.lax.scan(cell, h0, xs)
    return h_last, hs.mean()


def example_inputs():
    k = jax.random.split(jax.random.key(0), 3)
    return (jax.random.normal(k[0], (STEPS, BATCH, HIDDEN)), jnp.zeros((BATCH, HIDDEN)),
            jax.random.normal(k[1], (HIDDEN, HIDDEN)) * 0.05, jax.random.normal(k[2], (HIDDEN, HIDDEN)) * 0.05,
            jnp.zeros((HIDDEN,)))
