"""Residual MLP training step with rematerialized blocks (`jax.checkpoint` with a policy).

Each block is wrapped in `jax.checkpoint` with `dots_with_no_batch_dims_saveable`, so the
backward pass keeps the matmul outputs and recomputes the rest; `model` returns the loss and
the SGD-updated parameters.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

D_IN, DIM, HIDDEN, CLASSES, NUM_BLOCKS, BATCH, LR = 16, 32, 64, 8, 3, 4, 0.05


def dense_init(key, m, n):
    return {"w": jax.random.normal(key, (m, n), jnp.float32) / jnp.sqrt(m), "b": jnp.zeros((n,), jnp.float32)}


def init_params(key):
    keys = jax.random.split(key, 2 + 2 * NUM_BLOCKS)
    blocks = [{"fc_in": dense_init(keys[2 + 2 * i], DIM, HIDDEN), "fc_out": dense_init(keys[3 + 2 * i], HIDDEN, DIM)}
              for i in range(NUM_BLOCKS)]
    return {"embed": dense_init(keys[0], D_IN, DIM), "blocks": blocks, "head": dense_init(keys[1], DIM, CLASSES)}


def mlp_block(p, x):
    h = x @ p["fc_in"]["w"] + p["fc_in"]["b"]
    h = checkpoint_name(jax.nn.gelu(h), "mlp_hidden")
    return x + h @ p["fc_out"]["w"] + p["fc_out"]["b"]


remat_block = jax.checkpoint(mlp_block, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)


def forward(params, x):
    with jax.named_scope("embed"):
        x = x @ params["embed"]["w"] + params["embed"]["b"]
    for i, p in enumerate(params["blocks"]):
        with jax.named_scope(f"block_{i}"):
            x = remat_block(p, x)
    with jax.named_scope("head"):
        return x @ params["head"]["w"] + params["head"]["b"]


def loss_fn(params, x, labels):
    logp = jax.nn.log_softmax(forward(params, x))
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


def model(params, x, labels):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, labels)
    new_params = jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)
    return loss, new_params


def example_inputs():
    x = jax.random.normal(jax.random.key(1), (BATCH, D_IN), jnp.float32)
    labels = jax.random.randint(jax.random.key(2), (BATCH,), 0, CLASSES)
    return (init_params(jax.random.key(0)), x, labels)
