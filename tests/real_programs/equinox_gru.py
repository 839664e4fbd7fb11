"""Equinox GRU sequence classifier: one optax Adam training step.

A GRU cell scanned over time (`lax.scan`) reads each sequence, a linear layer plus a separate bias
array gives the class logits; the step computes the loss and gradients and applies the update.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax import lax

IN_SIZE, HIDDEN, CLASSES, BATCH, STEPS = 4, 16, 3, 4, 16


class GRUClassifier(eqx.Module):
    cell: eqx.nn.GRUCell
    linear: eqx.nn.Linear
    bias: jax.Array
    hidden_size: int = eqx.field(static=True)

    def __init__(self, in_size, hidden_size, num_classes, *, key):
        cell_key, linear_key = jax.random.split(key)
        self.cell = eqx.nn.GRUCell(in_size, hidden_size, key=cell_key)
        self.linear = eqx.nn.Linear(hidden_size, num_classes, use_bias=False, key=linear_key)
        self.bias = jnp.zeros((num_classes,), jnp.float32)
        self.hidden_size = hidden_size

    def __call__(self, xs):
        def step(h, x):
            return self.cell(x, h), None

        h_last, _ = lax.scan(step, jnp.zeros((self.hidden_size,), xs.dtype), xs)
        return self.linear(h_last) + self.bias


net = GRUClassifier(IN_SIZE, HIDDEN, CLASSES, key=jax.random.key(0))
params, static = eqx.partition(net, eqx.is_inexact_array)
optimizer = optax.adam(3e-3)


@eqx.filter_value_and_grad
def loss_fn(net, xs, ys):
    logits = jax.vmap(net)(xs)
    return optax.softmax_cross_entropy_with_integer_labels(logits, ys).mean()


def model(params, opt_state, xs, ys):
    net = eqx.combine(params, static)
    loss, grads = loss_fn(net, xs, ys)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(net, eqx.is_inexact_array))
    net = eqx.apply_updates(net, updates)
    new_params, _ = eqx.partition(net, eqx.is_inexact_array)
    return loss, new_params, opt_state


def example_inputs():
    xs = jax.random.normal(jax.random.key(1), (BATCH, STEPS, IN_SIZE), jnp.float32)
    ys = jax.random.randint(jax.random.key(2), (BATCH,), 0, CLASSES)
    return (params, optimizer.init(params), xs, ys)
