"""A ring over 8 devices with shard_map: collective-permute.

Each device holds one block of a vector and passes a block to its right-hand neighbour at every
step (jax.lax.ppermute), adding up what it receives, so after seven steps every device has the
sum of all blocks without any all-reduce: the ring algorithm written by hand. Look for the
collective-permute kernels, the source-target pairs that make the ring, and the bytes of one
block moved per step.
"""

from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

DEVICES = 8

mesh = jax.make_mesh((DEVICES,), ("ring",), axis_types=(AxisType.Explicit,))

RIGHT = [(i, (i + 1) % DEVICES) for i in range(DEVICES)]  # device i sends to device i + 1


# shard_map over the mesh's shape and axis names (its abstract mesh): the devices are those the
# inputs are on, so the same program compiles for these CPU devices or for a GPU target's
@partial(jax.shard_map, mesh=mesh.abstract_mesh, in_specs=P("ring"), out_specs=P("ring"))
def ring_sum(block):
    total, passing = block, block
    for _ in range(DEVICES - 1):
        passing = jax.lax.ppermute(passing, "ring", RIGHT)
        total = total + passing
    return total


def model(x):
    return ring_sum(x)


def example_inputs():
    x = jax.random.normal(jax.random.key(0), (DEVICES * 256, 64))
    return (jax.device_put(x, NamedSharding(mesh, P("ring"))),)
