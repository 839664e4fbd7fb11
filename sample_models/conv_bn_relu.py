"""Convolution, batch norm and ReLU: the classic vision block.

A 3x3 convolution (NHWC), batch-norm statistics over batch and space, scale and shift, ReLU.
The convolution goes to a library (cuDNN on GPU, a library or Eigen on CPU); look for the
normalization and the ReLU fused into a few kernels after it.
"""

import jax
import jax.numpy as jnp


def model(x, w, gamma, beta):
    with jax.named_scope("conv"):
        y = jax.lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
    with jax.named_scope("batchnorm"):
        mean = jnp.mean(y, axis=(0, 1, 2))
        var = jnp.var(y, axis=(0, 1, 2))
        y = (y - mean) * jax.lax.rsqrt(var + 1e-5) * gamma + beta
    with jax.named_scope("relu"):
        return jax.nn.relu(y)


def example_inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    n, h, w, c_in, c_out = 8, 32, 32, 16, 32
    return (jax.random.normal(k1, (n, h, w, c_in)), jax.random.normal(k2, (3, 3, c_in, c_out)) * 0.1,
            jnp.ones((c_out,)), jnp.zeros((c_out,)))
