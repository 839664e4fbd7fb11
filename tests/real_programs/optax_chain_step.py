"""A Flax Linen classifier trained one step with an optax chain: gradient clipping, then Adam.

The step is a plain function of (parameters, optimizer state, batch): `jax.value_and_grad` of
the loss through `model.apply`, then `tx.update` of the chain and `optax.apply_updates`, the new
parameters and optimizer state returned with the loss.
"""

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(32, name="hidden")(x))
        return nn.Dense(4, name="out")(x)


net = MLP()
tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))


def train_step(params, opt_state, x, y):
    def loss_fn(p):
        logits = net.apply({"params": p}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return loss, optax.apply_updates(params, updates), opt_state


model = train_step


def example_inputs():
    x = jnp.linspace(-1.0, 1.0, 8 * 16).reshape(8, 16)
    params = net.init(jax.random.key(0), x)["params"]
    return params, tx.init(params), x, jnp.arange(8) % 4
