"""Dense + ReLU: matmul, bias add and ReLU in one kernel.

One dense layer, `relu(x @ w + b)`, for a batch of 1024 rows. Before optimization the matmul,
the bias's broadcast, the add and the ReLU's `max` are separate ops. On the H200 target XLA:GPU
makes the whole layer one Triton GEMM kernel that adds the bias and applies the ReLU as it writes
the matmul's tiles; with the "Triton GEMM off" preset it is one cuBLASLt call whose `BIAS_RELU`
epilogue does the same inside the library. Either way the [1024, 512] result of the matmul is
never written to memory before the ReLU. On the CPU, look where the bias add and ReLU went: into
the matmul's library call, or a loop fusion after it.
"""

import jax
import jax.numpy as jnp


def model(x, w, b):
    with jax.named_scope("dense"):
        return jax.nn.relu(x @ w + b)


def example_inputs():
    k = jax.random.split(jax.random.key(0), 3)
    batch, d_in, d_out = 1024, 256, 512
    return (
        jax.random.normal(k[0], (batch, d_in), jnp.float32),
        jax.random.normal(k[1], (d_in, d_out), jnp.float32) * 0.05,
        jax.random.normal(k[2], (d_out,), jnp.float32) * 0.05,
    )
