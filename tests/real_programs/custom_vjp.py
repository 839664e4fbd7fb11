"""A small binary classifier whose loss uses two `jax.custom_vjp` functions.

`clip_gradient` is the identity forward and clips the cotangent backward; `log1pexp` is a
numerically stable softplus with its own derivative. `model` returns the loss and its gradients.
"""

import functools

import jax
import jax.numpy as jnp

D_IN, HIDDEN, BATCH, GRAD_CLIP = 16, 32, 8, 0.5


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def clip_gradient(x, bound):
    return x


def _clip_fwd(x, bound):
    return x, None


def _clip_bwd(bound, _, g):
    return (jnp.clip(g, -bound, bound),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


@jax.custom_vjp
def log1pexp(x):
    """log(1 + exp(x)) without overflow for large x."""
    return jnp.where(x > 0, x + jnp.log1p(jnp.exp(-x)), jnp.log1p(jnp.exp(x)))


def _log1pexp_fwd(x):
    return log1pexp(x), x


def _log1pexp_bwd(x, g):
    return (g * jax.nn.sigmoid(x),)


log1pexp.defvjp(_log1pexp_fwd, _log1pexp_bwd)


def loss(params, x, y):
    with jax.named_scope("dense1"):
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        h = clip_gradient(h, GRAD_CLIP)
    with jax.named_scope("dense2"):
        score = (h @ params["w2"] + params["b2"])[:, 0]
    with jax.named_scope("logistic_loss"):
        return jnp.mean(log1pexp(-y * score))


def model(params, x, y):
    return jax.value_and_grad(loss)(params, x, y)


def example_inputs():
    k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
    params = {
        "w1": jax.random.normal(k1, (D_IN, HIDDEN), jnp.float32) / jnp.sqrt(D_IN),
        "b1": jnp.zeros((HIDDEN,), jnp.float32),
        "w2": jax.random.normal(k2, (HIDDEN, 1), jnp.float32) / jnp.sqrt(HIDDEN),
        "b2": jnp.zeros((1,), jnp.float32),
    }
    x = jax.random.normal(k3, (BATCH, D_IN), jnp.float32)
    y = jnp.where(jax.random.bernoulli(k4, 0.5, (BATCH,)), 1.0, -1.0)
    return (params, x, y)
