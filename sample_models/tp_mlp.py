"""Tensor-parallel MLP (Megatron style) on 8 devices: one all-reduce per block.

The first weight is split by columns and the second by rows over the mesh axis "model": each
device computes its own slice of the hidden layer with no communication at all (the ReLU
works slice by slice), then a partial product of the output. The partial outputs are summed
by one all-reduce at the end of the block. Look for that single collective, its size (the
block's output, batch x d), and every matmul working on an eighth of the weights.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

DEVICES = 8

mesh = jax.make_mesh((DEVICES,), ("model",), axis_types=(AxisType.Auto,))


def model(x, w1, b1, w2, b2):
    with jax.named_scope("column_parallel"):
        h = jax.nn.relu(x @ w1 + b1)  # each device: its columns of h, its slice of b1
    with jax.named_scope("row_parallel"):
        return h @ w2 + b2  # the partial products summed, then the bias once


def example_inputs():
    k = jax.random.split(jax.random.key(0), 5)
    batch, d, hidden = 64, 128, 512
    x = jax.random.normal(k[0], (batch, d))  # replicated: every device has the whole batch
    w1 = jax.device_put(jax.random.normal(k[1], (d, hidden)) * 0.05, NamedSharding(mesh, P(None, "model")))
    b1 = jax.device_put(jax.random.normal(k[2], (hidden,)) * 0.05, NamedSharding(mesh, P("model")))
    w2 = jax.device_put(jax.random.normal(k[3], (hidden, d)) * 0.05, NamedSharding(mesh, P("model", None)))
    b2 = jax.random.normal(k[4], (d,)) * 0.05
    return (x, w1, b1, w2, b2)
