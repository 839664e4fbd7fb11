"""Mixture of experts on 8 devices: tokens sent to their expert with all-to-all.

One expert per device, and each device starts with its own tokens. A router picks an expert
for every token; tokens are grouped by expert and exchanged so each device receives the
tokens routed to its expert (all-to-all), the expert's MLP runs there, and a second
all-to-all brings the results home. Look for the two all-to-all kernels and their bytes (each
device's tokens, in both directions), and the expert matmul between them.
"""

from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

DEVICES = 8
CAPACITY = 16  # tokens each device may send to each expert

mesh = jax.make_mesh((DEVICES,), ("expert",), axis_types=(AxisType.Explicit,))


# shard_map over the mesh's shape and axis names (its abstract mesh): the devices are those the
# inputs are on, so the same program compiles for these CPU devices or for a GPU target's
@partial(jax.shard_map, mesh=mesh.abstract_mesh, in_specs=(P("expert"), P(), P("expert"), P("expert")), out_specs=P("expert"))
def moe_layer(tokens, router, w_in, w_out):
    # tokens: this device's [n, d]; w_in / w_out: this device's expert, [1, d, h] / [1, h, d]
    with jax.named_scope("route"):
        choice = jnp.argmax(tokens @ router, axis=-1)  # [n] expert per token
        onehot = jax.nn.one_hot(choice, DEVICES)  # [n, experts]
        earlier = jnp.tril(jnp.ones((onehot.shape[0],) * 2))  # token m counts tokens n <= m
        slot = (earlier @ onehot - 1) * onehot  # position among the expert's tokens
        dispatch = onehot[:, :, None] * jax.nn.one_hot(slot, CAPACITY)  # [n, experts, capacity]
        grouped = jnp.einsum("nec,nd->ecd", dispatch, tokens)  # [experts, capacity, d]
    with jax.named_scope("dispatch"):
        mine = jax.lax.all_to_all(grouped, "expert", 0, 0, tiled=True)  # the tokens for this expert
    with jax.named_scope("expert"):
        out = jax.nn.relu(mine @ w_in[0]) @ w_out[0]
    with jax.named_scope("combine"):
        back = jax.lax.all_to_all(out, "expert", 0, 0, tiled=True)
        return jnp.einsum("nec,ecd->nd", dispatch, back)


def model(tokens, router, w_in, w_out):
    return moe_layer(tokens, router, w_in, w_out)


def example_inputs():
    k = jax.random.split(jax.random.key(0), 4)
    tokens_per_device, d, h = 64, 64, 128
    split = NamedSharding(mesh, P("expert"))
    tokens = jax.device_put(jax.random.normal(k[0], (DEVICES * tokens_per_device, d)), split)
    router = jax.random.normal(k[1], (d, DEVICES))
    w_in = jax.device_put(jax.random.normal(k[2], (DEVICES, d, h)) * 0.05, split)
    w_out = jax.device_put(jax.random.normal(k[3], (DEVICES, h, d)) * 0.05, split)
    return (tokens, router, w_in, w_out)
