"""bf16 mixed precision: compute in bfloat16, accumulate and normalize in float32.

The weights and activations are cast to bf16 for the matmuls and back to f32 for the
residual and the reduction. Look for the `convert` ops: XLA fuses the casts into neighbouring
kernels, and the bf16 arrays move half the bytes of f32 ones.
"""

import jax
import jax.numpy as jnp


def model(x, w1, w2):
    xb = x.astype(jnp.bfloat16)
    with jax.named_scope("up"):
        h = jax.nn.gelu(xb @ w1.astype(jnp.bfloat16))
    with jax.named_scope("down"):
        y = (h @ w2.astype(jnp.bfloat16)).astype(jnp.float32)
    with jax.named_scope("residual_norm"):
        y = x + y
        return y / jnp.sqrt(jnp.mean(y * y, axis=-1, keepdims=True) + 1e-6)


def example_inputs():
    k = jax.random.split(jax.random.key(0), 3)
    d, f = 256, 1024
    return (jax.random.normal(k[0], (128, d)), jax.random.normal(k[1], (d, f)) * 0.05,
            jax.random.normal(k[2], (f, d)) * 0.05)
