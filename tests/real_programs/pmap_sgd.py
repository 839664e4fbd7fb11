"""One data-parallel SGD step of a small MLP with `jax.pmap`, in plain JAX.

Each of the four devices takes its shard of the batch, computes the loss and its gradient,
and the gradients and loss are averaged across devices with `lax.pmean` before the update.
"""

import jax
import jax.numpy as jnp

DEVICES = 4
D_IN, HIDDEN, D_OUT, PER_DEVICE, LR = 12, 24, 3, 8, 0.05


def init_params(key):
    k1, k2 = jax.random.split(key)
    return {
        "hidden": {"w": jax.random.normal(k1, (D_IN, HIDDEN), jnp.float32) / jnp.sqrt(D_IN),
                   "b": jnp.zeros((HIDDEN,), jnp.float32)},
        "out": {"w": jax.random.normal(k2, (HIDDEN, D_OUT), jnp.float32) / jnp.sqrt(HIDDEN),
                "b": jnp.zeros((D_OUT,), jnp.float32)},
    }


def mlp(params, x):
    with jax.named_scope("hidden"):
        h = jax.nn.gelu(x @ params["hidden"]["w"] + params["hidden"]["b"])
    with jax.named_scope("out"):
        return h @ params["out"]["w"] + params["out"]["b"]


def model(params, x, y):
    """x: (devices, per-device batch, D_IN), y: (devices, per-device batch, D_OUT) ->
    (updated parameters, one copy per device; mean loss on each device)."""

    def device_step(params, x, y):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((mlp(p, x) - y) ** 2))(params)
        grads = jax.lax.pmean(grads, "batch")
        new = jax.tree.map(lambda p, g: p - LR * g, params, grads)
        return new, jax.lax.pmean(loss, "batch")

    return jax.pmap(device_step, axis_name="batch", in_axes=(None, 0, 0))(params, x, y)


def example_inputs():
    kx, ky = jax.random.split(jax.random.key(7))
    x = jax.random.normal(kx, (DEVICES, PER_DEVICE, D_IN), jnp.float32)
    y = jax.random.normal(ky, (DEVICES, PER_DEVICE, D_OUT), jnp.float32)
    return init_params(jax.random.key(0)), x, y
