"""Differentially private SGD step for a small MLP classifier, in plain JAX.

Per-example gradients come from `vmap(grad(loss))`; each is clipped to a global L2 norm, they are
summed, Gaussian noise is added, and the noisy mean drives one SGD update of the parameter list.
"""

import jax
import jax.numpy as jnp

SIZES = (16, 32, 32, 4)
BATCH, LR, L2_CLIP, NOISE_MULTIPLIER = 4, 0.1, 1.0, 1.1


def init_params(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [{"w": jax.random.normal(k, (m, n), jnp.float32) / jnp.sqrt(m), "b": jnp.zeros((n,), jnp.float32)}
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def predict(params, x):
    h = x
    for i, layer in enumerate(params[:-1]):
        with jax.named_scope(f"dense{i + 1}"):
            h = jnp.tanh(h @ layer["w"] + layer["b"])
    with jax.named_scope("logits"):
        return h @ params[-1]["w"] + params[-1]["b"]


def example_loss(params, x, label):
    """Cross-entropy of one example (no batch axis)."""
    logp = jax.nn.log_softmax(predict(params, x))
    return -logp[label]


def clip_to_norm(grads, max_norm):
    leaves = jax.tree_util.tree_leaves(grads)
    norm = jnp.sqrt(sum(jnp.sum(g * g) for g in leaves))
    scale = jnp.minimum(1.0, max_norm / (norm + 1e-6))
    return jax.tree_util.tree_map(lambda g: g * scale, grads)


def model(params, x, labels, key):
    per_example = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, x, labels)
    with jax.named_scope("clip"):
        clipped = jax.vmap(clip_to_norm, in_axes=(0, None))(per_example, L2_CLIP)
    with jax.named_scope("noise"):
        leaves, treedef = jax.tree_util.tree_flatten(clipped)
        keys = jax.random.split(key, len(leaves))
        noisy = [g.sum(0) + NOISE_MULTIPLIER * L2_CLIP * jax.random.normal(k, g.shape[1:], g.dtype)
                 for g, k in zip(leaves, keys)]
        mean_grad = jax.tree_util.tree_unflatten(treedef, [g / x.shape[0] for g in noisy])
    with jax.named_scope("sgd_update"):
        return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, mean_grad)


def example_inputs():
    params = init_params(jax.random.key(0), SIZES)
    x = jax.random.normal(jax.random.key(1), (BATCH, SIZES[0]), jnp.float32)
    labels = jax.random.randint(jax.random.key(2), (BATCH,), 0, SIZES[-1])
    return (params, x, labels, jax.random.PRNGKey(3))
