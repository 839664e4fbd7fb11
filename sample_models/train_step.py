"""Training step: the gradient of an MLP loss and an SGD update.

jax.grad doubles the graph: a backward pass with transposed matmuls, the ReLU mask and the
bias gradients (reductions), then the parameter update. Look at how many kernels the
backward pass needs, where the transposed matmuls went, and the update fused per parameter.
"""

import jax
import jax.numpy as jnp


def loss(params, x, y):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    pred = h @ params["w2"] + params["b2"]
    return jnp.mean((pred - y) ** 2)


def model(params, x, y):
    with jax.named_scope("grad"):
        l, g = jax.value_and_grad(loss)(params, x, y)
    with jax.named_scope("sgd"):
        new = jax.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)
    return l, new


def example_inputs():
    k = jax.random.split(jax.random.key(0), 4)
    d_in, hidden, d_out, batch = 128, 256, 16, 64
    params = {"w1": jax.random.normal(k[0], (d_in, hidden)) * 0.05, "b1": jnp.zeros((hidden,)),
              "w2": jax.random.normal(k[1], (hidden, d_out)) * 0.05, "b2": jnp.zeros((d_out,))}
    return (params, jax.random.normal(k[2], (batch, d_in)), jax.random.normal(k[3], (batch, d_out)))
