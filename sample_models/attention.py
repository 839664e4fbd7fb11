"""Attention: naive softmax(QK^T)V next to jax.nn.dot_product_attention.

The same multi-head attention written twice. On a GPU, `jax.nn.dot_product_attention` can
become one fused-attention library call (cuDNN) while the naive version is matmuls plus a
softmax fusion; on the CPU both are dots and fusions. Compare the kernels each half produced
and how many bytes the [heads, seq, seq] score matrix costs.
"""

import jax
import jax.numpy as jnp

B, SEQ, HEADS, HEAD_DIM = 1, 256, 4, 64


def naive_attention(q, k, v):
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.float32(HEAD_DIM))
    probs = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)


def model(q, k, v):
    with jax.named_scope("naive"):
        a = naive_attention(q, k, v)
    with jax.named_scope("fused_api"):
        b = jax.nn.dot_product_attention(q, k, v)
    return a, b


def example_inputs():
    ks = jax.random.split(jax.random.key(0), 3)
    shape = (B, SEQ, HEADS, HEAD_DIM)
    return tuple(jax.random.normal(k, shape, jnp.float32) for k in ks)
