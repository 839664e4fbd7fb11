"""Flax NNX decoder-only language model whose blocks are an `nnx.List` of layers.

Token embedding plus a learned position table, two pre-norm blocks (causal self-attention, a
SiLU-gated MLP, each with an RMSNorm before it and a residual add after), a final RMSNorm and a
projection to the vocabulary. The parameters are float32 and the blocks compute in bfloat16
(`dtype=`), as mixed-precision decoders do, so XLA has converts to place between the layers.
"""

import jax
import jax.numpy as jnp
from flax import nnx

VOCAB, DIM, HEADS, DEPTH, SEQ = 48, 32, 4, 2, 12
COMPUTE = jnp.bfloat16


class SelfAttention(nnx.Module):
    def __init__(self, dim, heads, *, rngs: nnx.Rngs):
        self.heads = heads
        self.qkv = nnx.Linear(dim, 3 * dim, use_bias=False, dtype=COMPUTE, rngs=rngs)
        self.out = nnx.Linear(dim, dim, use_bias=False, dtype=COMPUTE, rngs=rngs)

    def __call__(self, x):
        b, t, d = x.shape
        q, k, v = jnp.split(self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads), 3, axis=2)
        q, k, v = (a[:, :, 0] for a in (q, k, v))  # (b, t, heads, head_dim)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d // self.heads).astype(COMPUTE)
        causal = jnp.tril(jnp.ones((t, t), bool))
        weights = jax.nn.softmax(jnp.where(causal, scores, -1e4).astype(jnp.float32), axis=-1)
        mixed = jnp.einsum("bhqk,bkhd->bqhd", weights.astype(COMPUTE), v)
        return self.out(mixed.reshape(b, t, d))


class GatedMLP(nnx.Module):
    def __init__(self, dim, hidden, *, rngs: nnx.Rngs):
        self.gate = nnx.Linear(dim, hidden, use_bias=False, dtype=COMPUTE, rngs=rngs)
        self.up = nnx.Linear(dim, hidden, use_bias=False, dtype=COMPUTE, rngs=rngs)
        self.down = nnx.Linear(hidden, dim, use_bias=False, dtype=COMPUTE, rngs=rngs)

    def __call__(self, x):
        return self.down(nnx.silu(self.gate(x)) * self.up(x))


class Block(nnx.Module):
    def __init__(self, dim, heads, *, rngs: nnx.Rngs):
        self.attn_norm = nnx.RMSNorm(dim, dtype=COMPUTE, rngs=rngs)
        self.attn = SelfAttention(dim, heads, rngs=rngs)
        self.mlp_norm = nnx.RMSNorm(dim, dtype=COMPUTE, rngs=rngs)
        self.mlp = GatedMLP(dim, 2 * dim, rngs=rngs)

    def __call__(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nnx.Module):
    def __init__(self, *, rngs: nnx.Rngs):
        self.embed = nnx.Embed(VOCAB, DIM, rngs=rngs)
        self.positions = nnx.Param(jnp.zeros((SEQ, DIM)))
        self.layers = nnx.List([Block(DIM, HEADS, rngs=rngs) for _ in range(DEPTH)])
        self.final_norm = nnx.RMSNorm(DIM, dtype=COMPUTE, rngs=rngs)
        self.logits = nnx.Linear(DIM, VOCAB, dtype=jnp.float32, rngs=rngs)

    def __call__(self, tokens):
        x = (self.embed(tokens) + self.positions[: tokens.shape[1]]).astype(COMPUTE)
        for layer in self.layers:
            x = layer(x)
        return self.logits(self.final_norm(x).astype(jnp.float32))


model = Decoder(rngs=nnx.Rngs(0))


def example_inputs():
    return (jnp.arange(2 * SEQ, dtype=jnp.int32).reshape(2, SEQ) % VOCAB,)
