"""Flax NNX decoder block: causal attention, RMSNorm and SwiGLU as one module.

A Flax NNX module is the model: its parameters are split out (`nnx.split`) and become inputs of
the compiled program, so the graph's parameters are the weights, not constants. The layer names
(`attn/q_proj`, `mlp/gate`, ...) are the graph's name scopes. Look for the RMSNorm's
mean-of-squares, rsqrt and scale in one kernel, the causal mask and softmax around the two
attention matmuls, and SwiGLU's `silu(gate) * up` riding on the matmul that produces it.
"""

import jax
import jax.numpy as jnp
from flax import nnx

D, HEADS, FFN, SEQ = 128, 4, 256, 64


class RMSNorm(nnx.Module):
    def __init__(self, dim):
        self.scale = nnx.Param(jnp.ones((dim,), jnp.float32))

    def __call__(self, x):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * self.scale[...]


class CausalAttention(nnx.Module):
    def __init__(self, rngs):
        self.q_proj = nnx.Linear(D, D, use_bias=False, rngs=rngs)
        self.k_proj = nnx.Linear(D, D, use_bias=False, rngs=rngs)
        self.v_proj = nnx.Linear(D, D, use_bias=False, rngs=rngs)
        self.o_proj = nnx.Linear(D, D, use_bias=False, rngs=rngs)

    def __call__(self, x):
        s, d = x.shape
        split = lambda t: t.reshape(s, HEADS, d // HEADS).transpose(1, 0, 2)  # noqa: E731
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        scores = q @ k.transpose(0, 2, 1) / jnp.sqrt(d // HEADS)
        mask = jnp.tril(jnp.ones((s, s), bool))
        p = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
        return self.o_proj((p @ v).transpose(1, 0, 2).reshape(s, d))


class SwiGLU(nnx.Module):
    def __init__(self, rngs):
        self.gate = nnx.Linear(D, FFN, use_bias=False, rngs=rngs)
        self.up = nnx.Linear(D, FFN, use_bias=False, rngs=rngs)
        self.down = nnx.Linear(FFN, D, use_bias=False, rngs=rngs)

    def __call__(self, x):
        return self.down(jax.nn.silu(self.gate(x)) * self.up(x))


class DecoderBlock(nnx.Module):
    def __init__(self, rngs):
        self.attn_norm = RMSNorm(D)
        self.attn = CausalAttention(rngs)
        self.mlp_norm = RMSNorm(D)
        self.mlp = SwiGLU(rngs)

    def __call__(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


model = DecoderBlock(nnx.Rngs(0))


def example_inputs():
    return (jax.random.normal(jax.random.key(1), (SEQ, D), jnp.float32),)
