"""Equinox MLP trained one step with optax: loss, gradients and an Adam update in one program.

The model's arrays are split from its static structure (`eqx.partition`) and the optimizer
state travels with them, so the whole update is one compiled function of arrays. Look for the
backward pass's matmuls (transposed operands: layout copies, or dots that read them as they
are), and Adam's elementwise update of every parameter fused into a few kernels.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

net = eqx.nn.MLP(in_size=64, out_size=10, width_size=128, depth=2, key=jax.random.key(0))
params, static = eqx.partition(net, eqx.is_array)
optimizer = optax.adam(1e-3)


def loss_fn(params, x, y):
    logits = jax.vmap(eqx.combine(params, static))(x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def model(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def example_inputs():
    x = jax.random.normal(jax.random.key(1), (32, 64), jnp.float32)
    y = jax.random.randint(jax.random.key(2), (32,), 0, 10)
    return (params, optimizer.init(params), x, y)
