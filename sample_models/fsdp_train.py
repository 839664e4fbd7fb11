"""Fully sharded data parallel (FSDP) on 8 devices: all-gather the weights, reduce-scatter the gradients.

Each device keeps only an eighth of every weight (its rows) and an eighth of the batch. Written
with shard_map, as in JAX's own FSDP example: for the forward pass each device gathers the
whole weight from the others (all-gather), and the gradient of its batch is summed over the
devices and split back into eighths in one step (reduce-scatter), so each device updates only
the slice it keeps. Look for an all-gather per weight and a reduce-scatter per gradient, and
compare their bytes with the weights'.
"""

from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

DEVICES = 8

mesh = jax.make_mesh((DEVICES,), ("fsdp",), axis_types=(AxisType.Explicit,))


def forward(ws, x):
    for w in ws:  # each weight gathered whole just before it is used
        x = jnp.tanh(x @ jax.lax.all_gather(w, "fsdp", tiled=True))
    return x


def local_loss(ws, x, y):
    return jnp.mean((forward(ws, x) - y) ** 2)


# shard_map over the mesh's shape and axis names (its abstract mesh): the devices are those the
# inputs are on, so the same program compiles for these CPU devices or for a GPU target's
@partial(jax.shard_map, mesh=mesh.abstract_mesh, in_specs=(P("fsdp"), P("fsdp"), P("fsdp")), out_specs=P("fsdp"))
def sgd_step(ws, x, y):
    # the gradient of an all-gather is a reduce-scatter: each device gets the summed slice it owns
    grads = jax.grad(local_loss)(ws, x, y)
    return [w - 0.01 * g / DEVICES for w, g in zip(ws, grads)]


def model(ws, x, y):
    return sgd_step(ws, x, y)


def example_inputs():
    k = jax.random.split(jax.random.key(0), 5)
    d, batch = 128, 64
    rows = NamedSharding(mesh, P("fsdp"))
    ws = [jax.device_put(jax.random.normal(k[i], (d, d)) * 0.05, rows) for i in range(3)]
    x = jax.device_put(jax.random.normal(k[3], (batch, d)), rows)
    y = jax.device_put(jax.random.normal(k[4], (batch, d)), rows)
    return (ws, x, y)
