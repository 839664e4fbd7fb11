"""Flax Linen decoder-only Transformer language model.

Token and learned position embeddings, two pre-norm decoder layers (causal self-attention and an
MLP block) and a vocabulary projection; the config is a frozen `flax.struct` dataclass.
"""

from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn
from flax import struct


@struct.dataclass
class TransformerConfig:
    vocab_size: int = 64
    emb_dim: int = 32
    num_heads: int = 4
    num_layers: int = 2
    qkv_dim: int = 32
    mlp_dim: int = 64
    max_len: int = 32
    dtype: Any = jnp.float32
    deterministic: bool = True


def shift_right(tokens):
    """Targets become inputs: a zero (BOS) in front, the last token dropped."""
    return jnp.pad(tokens, ((0, 0), (1, 0)))[:, :-1]


class MlpBlock(nn.Module):
    config: TransformerConfig

    @nn.compact
    def __call__(self, x):
        cfg = self.config
        h = nn.Dense(cfg.mlp_dim, dtype=cfg.dtype)(x)
        h = nn.gelu(h)
        return nn.Dense(x.shape[-1], dtype=cfg.dtype)(h)


class DecoderLayer(nn.Module):
    config: TransformerConfig

    @nn.compact
    def __call__(self, x, mask):
        cfg = self.config
        h = nn.LayerNorm(dtype=cfg.dtype)(x)
        h = nn.MultiHeadDotProductAttention(num_heads=cfg.num_heads, qkv_features=cfg.qkv_dim,
                                            dtype=cfg.dtype, deterministic=cfg.deterministic)(h, h, mask=mask)
        x = x + h
        h = nn.LayerNorm(dtype=cfg.dtype)(x)
        return x + MlpBlock(cfg)(h)


class TransformerLM(nn.Module):
    config: TransformerConfig

    @nn.compact
    def __call__(self, targets):
        cfg = self.config
        tokens = shift_right(targets)
        mask = nn.combine_masks(nn.make_causal_mask(tokens),
                                nn.make_attention_mask(targets > 0, targets > 0))
        x = nn.Embed(cfg.vocab_size, cfg.emb_dim, name="token_embed")(tokens)
        pos = self.param("pos_embedding", nn.initializers.normal(0.02), (cfg.max_len, cfg.emb_dim))
        x = x + pos[None, : tokens.shape[1]]
        for _ in range(cfg.num_layers):
            x = DecoderLayer(cfg)(x, mask)
        x = nn.LayerNorm(dtype=cfg.dtype, name="final_norm")(x)
        return nn.Dense(cfg.vocab_size, dtype=cfg.dtype, name="logits")(x)


config = TransformerConfig()
lm = TransformerLM(config)
_targets = jax.random.randint(jax.random.key(1), (2, 16), 1, config.vocab_size)
params = jax.jit(lm.init)(jax.random.key(0), _targets)


def model(params, targets):
    return lm.apply(params, targets)


def example_inputs():
    return (params, _targets)
