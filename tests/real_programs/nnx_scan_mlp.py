"""Flax NNX residual MLP whose blocks are stacked and applied with a scan.

Three blocks are created at once (`nnx.split_rngs` + `nnx.vmap`: one set of weights with a
leading layer axis) and run one after another by `nnx.scan`, between an input and output layer.
"""

import jax
import jax.numpy as jnp
from flax import nnx

NUM_BLOCKS = 3


class Block(nnx.Module):
    def __init__(self, dim, *, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(dim, rngs=rngs)
        self.linear = nnx.Linear(dim, dim, rngs=rngs)

    def __call__(self, x):
        return x + nnx.gelu(self.linear(self.norm(x)))


class ScanMLP(nnx.Module):
    def __init__(self, din, dim, dout, num_blocks, *, rngs: nnx.Rngs):
        self.embed = nnx.Linear(din, dim, rngs=rngs)

        @nnx.split_rngs(splits=num_blocks)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_blocks(rngs: nnx.Rngs):
            return Block(dim, rngs=rngs)

        self.blocks = make_blocks(rngs)
        self.head = nnx.Linear(dim, dout, rngs=rngs)

    def __call__(self, x):
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def run_block(h, block: Block):
            return block(h)

        h = self.embed(x)
        h = run_block(h, self.blocks)
        return self.head(h)


model = ScanMLP(16, 32, 10, NUM_BLOCKS, rngs=nnx.Rngs(0))


def example_inputs():
    return (jax.random.normal(jax.random.key(1), (4, 16), jnp.float32),)
