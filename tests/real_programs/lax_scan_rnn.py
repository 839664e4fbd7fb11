"""Elman RNN over a sequence with `lax.scan`, in plain JAX.

The input projection is applied to every step at once, the recurrent cell runs under a scan
carrying the hidden state, and a readout gives per-step class scores.
"""

import jax
import jax.numpy as jnp
from jax import lax

D_IN, HIDDEN, CLASSES, BATCH, SEQ = 8, 32, 4, 2, 16


def init_params(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "input_proj": {"w": jax.random.normal(k1, (D_IN, HIDDEN), jnp.float32) / jnp.sqrt(D_IN),
                       "b": jnp.zeros((HIDDEN,), jnp.float32)},
        "rnn": {"w_hh": jax.random.normal(k2, (HIDDEN, HIDDEN), jnp.float32) / jnp.sqrt(HIDDEN)},
        "readout": {"w": jax.random.normal(k3, (HIDDEN, CLASSES), jnp.float32) / jnp.sqrt(HIDDEN),
                    "b": jnp.zeros((CLASSES,), jnp.float32)},
    }


def model(params, xs):
    """xs: (batch, time, features) -> scores (batch, time, classes)."""
    with jax.named_scope("input_proj"):
        u = xs @ params["input_proj"]["w"] + params["input_proj"]["b"]
    w_hh = params["rnn"]["w_hh"]

    def step(h, u_t):
        with jax.named_scope("cell"):
            h = jnp.tanh(u_t + h @ w_hh)
        return h, h

    with jax.named_scope("rnn"):
        h0 = jnp.zeros((xs.shape[0], HIDDEN), xs.dtype)
        _, hs = lax.scan(step, h0, jnp.swapaxes(u, 0, 1))
        hs = jnp.swapaxes(hs, 0, 1)
    with jax.named_scope("readout"):
        return hs @ params["readout"]["w"] + params["readout"]["b"]


def example_inputs():
    xs = jax.random.normal(jax.random.key(1), (BATCH, SEQ, D_IN), jnp.float32)
    return (init_params(jax.random.key(0)), xs)
