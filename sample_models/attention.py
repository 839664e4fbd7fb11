"""Attention: naive softmax(QK^T)V next to jax.nn.dot_product_attention.

The same multi-head attention written twice. On a GPU, `jax.nn.dot_product_attention` asked
for cuDNN becomes one fused-attention library call while the naive version is matmuls plus a
softmax fusion; on the CPU both are dots and fusions. Compare the kernels each half produced
and how many bytes the [heads, seq, seq] score matrix costs.
"""

import jax
import jax.numpy as jnp
from jax import lax

B, SEQ, HEADS, HEAD_DIM = 1, 256, 4, 64


def naive_attention(q, k, v):
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.float32(HEAD_DIM))
    probs = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)


def api_attention(q, k, v):
    # dot_product_attention only uses cuDNN when asked (its default is the XLA formulation), and
    # cuDNN's fused attention takes bf16/fp16, so this half runs in bf16. platform_dependent picks
    # the cuDNN version when compiling for a CUDA GPU; an install without cuDNN cannot even trace
    # it, so there only the XLA version is built.
    q, k, v = (t.astype(jnp.bfloat16) for t in (q, k, v))

    def with_xla(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, implementation="xla")

    def with_cudnn(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, implementation="cudnn")

    try:
        out = lax.platform_dependent(q, k, v, default=with_xla, cuda=with_cudnn)
    except RuntimeError:  # "cuDNN is not detected": a CPU-only install
        out = with_xla(q, k, v)
    return out.astype(jnp.float32)


def model(q, k, v):
    with jax.named_scope("naive"):
        a = naive_attention(q, k, v)
    with jax.named_scope("fused_api"):
        b = api_attention(q, k, v)
    return a, b


def example_inputs():
    ks = jax.random.split(jax.random.key(0), 3)
    shape = (B, SEQ, HEADS, HEAD_DIM)
    return tuple(jax.random.normal(k, shape, jnp.float32) for k in ks)
