"""Transformer block: layer norm, multi-head attention, MLP and residuals.

One pre-norm block with named scopes (`ln1`, `attention`, `ln2`, `mlp`). Look for the matmuls
(projections, QK^T, PV, the MLP) handed to a library or kept as dots, and for everything
between them — the norm statistics, softmax, GELU, residual adds — fused into a handful of
generated kernels.
"""

import jax
import jax.numpy as jnp

SEQ, D_MODEL, HEADS, D_FF = 128, 256, 4, 1024


def layer_norm(x, scale, bias, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * scale + bias


def attention(x, wqkv, wo):
    seq, d = x.shape
    hd = d // HEADS
    qkv = x @ wqkv
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q, k, v = (t.reshape(seq, HEADS, hd).transpose(1, 0, 2) for t in (q, k, v))
    scores = q @ k.transpose(0, 2, 1) / jnp.sqrt(jnp.float32(hd))
    probs = jax.nn.softmax(scores, axis=-1)
    out = (probs @ v).transpose(1, 0, 2).reshape(seq, d)
    return out @ wo


def model(x, params):
    with jax.named_scope("ln1"):
        h = layer_norm(x, params["ln1_scale"], params["ln1_bias"])
    with jax.named_scope("attention"):
        x = x + attention(h, params["wqkv"], params["wo"])
    with jax.named_scope("ln2"):
        h = layer_norm(x, params["ln2_scale"], params["ln2_bias"])
    with jax.named_scope("mlp"):
        h = jax.nn.gelu(h @ params["w1"] + params["b1"])
        return x + h @ params["w2"] + params["b2"]


def example_inputs():
    k = jax.random.split(jax.random.key(0), 6)
    s = 0.02
    params = {
        "ln1_scale": jnp.ones((D_MODEL,)), "ln1_bias": jnp.zeros((D_MODEL,)),
        "wqkv": jax.random.normal(k[0], (D_MODEL, 3 * D_MODEL)) * s,
        "wo": jax.random.normal(k[1], (D_MODEL, D_MODEL)) * s,
        "ln2_scale": jnp.ones((D_MODEL,)), "ln2_bias": jnp.zeros((D_MODEL,)),
        "w1": jax.random.normal(k[2], (D_MODEL, D_FF)) * s, "b1": jnp.zeros((D_FF,)),
        "w2": jax.random.normal(k[3], (D_FF, D_MODEL)) * s, "b2": jnp.zeros((D_MODEL,)),
    }
    return (jax.random.normal(k[4], (SEQ, D_MODEL)), params)
