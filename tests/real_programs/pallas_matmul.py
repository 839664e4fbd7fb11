"""Two dense layers whose matmuls are a Pallas kernel, run by the Pallas interpreter.

The kernel tiles the output over a (rows, cols, depth) grid and accumulates each tile over the
depth axis; the bias add and ReLU after it are plain `jax.numpy`.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_M, BLOCK_N, BLOCK_K = 16, 16, 16


def matmul_kernel(x_ref, w_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _zero():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)


@functools.partial(jax.jit, static_argnames=("bm", "bn", "bk"))
def pallas_matmul(x, w, bm=BLOCK_M, bn=BLOCK_N, bk=BLOCK_K):
    m, k = x.shape
    _, n = w.shape
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        interpret=True,
    )(x, w)


def model(params, x):
    with jax.named_scope("dense1"):
        h = jax.nn.relu(pallas_matmul(x, params["w1"]) + params["b1"])
    with jax.named_scope("dense2"):
        return jax.nn.relu(pallas_matmul(h, params["w2"]) + params["b2"])


def example_inputs():
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    params = {
        "w1": jax.random.normal(k1, (64, 32), jnp.float32) * 0.1,
        "b1": jnp.zeros((32,), jnp.float32),
        "w2": jax.random.normal(k2, (32, 16), jnp.float32) * 0.1,
        "b2": jnp.zeros((16,), jnp.float32),
    }
    return (params, jax.random.normal(k3, (32, 64), jnp.float32))
