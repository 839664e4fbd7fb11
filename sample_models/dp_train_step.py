"""Data-parallel training step on 8 devices: the gradients' all-reduce.

Every device holds the whole MLP and one eighth of the batch (the batch's rows split over the
mesh axis "data"). Each computes the gradient of its own rows; before the update the devices
must agree, so XLA's SPMD partitioner inserts an all-reduce that sums the gradients over all
eight. Look for the collective kernel, the bytes it moves (the size of the gradients, not the
batch), and that the update after it runs on every device alike. The mesh spans the devices
the program is given (8 by default): with Devices = 1 it is the same step on one device, with no
collective at all (Compare shows the two side by side).
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

DEVICES = 8

mesh = jax.make_mesh((jax.device_count(),), ("data",), axis_types=(AxisType.Auto,))


def loss(params, x, y):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def model(params, x, y):
    with jax.named_scope("grad"):
        l, g = jax.value_and_grad(loss)(params, x, y)
    with jax.named_scope("sgd"):
        new = jax.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)
    return l, new


def example_inputs():
    k = jax.random.split(jax.random.key(0), 4)
    d_in, hidden, d_out, batch = 64, 128, 16, 256
    params = {"w1": jax.random.normal(k[0], (d_in, hidden)) * 0.05, "b1": jnp.zeros((hidden,)),
              "w2": jax.random.normal(k[1], (hidden, d_out)) * 0.05}
    rows = NamedSharding(mesh, P("data", None))  # each device: batch / devices rows
    x = jax.device_put(jax.random.normal(k[2], (batch, d_in)), rows)
    y = jax.device_put(jax.random.normal(k[3], (batch, d_out)), rows)
    return (params, x, y)
