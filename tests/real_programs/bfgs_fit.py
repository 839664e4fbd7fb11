"""Logistic regression fitted by BFGS with a backtracking (Armijo) line search, in plain JAX.

The whole fit is one compiled program: the BFGS iterations are a `lax.while_loop`, and each
iteration's line search is a `lax.while_loop` inside it, so nearly every op runs in a loop body.
"""

import jax
import jax.numpy as jnp
from jax import lax

FEATURES, SAMPLES, MAX_ITER, GTOL = 6, 128, 50, 1e-5


def loss(w, x, labels):
    z = x @ w[:-1] + w[-1]
    return jnp.mean(jax.nn.softplus(z) - labels * z) + 1e-2 * jnp.sum(w[:-1] ** 2)


def model(w0, x, labels):
    """w0: (features + 1,) initial weights and bias -> (fitted weights, final loss, iterations)."""
    value_and_grad = jax.value_and_grad(lambda w: loss(w, x, labels))

    def line_search(w, f, g, p):
        slope = g @ p

        def too_long(s):
            t, f_t = s
            return (f_t > f + 1e-4 * t * slope) & (t > 1e-8)

        def shorten(s):
            t = 0.5 * s[0]
            return t, loss(w + t * p, x, labels)

        return lax.while_loop(too_long, shorten, (1.0, loss(w + p, x, labels)))[0]

    def not_done(s):
        _, _, g, _, k = s
        return (jnp.linalg.norm(g) > GTOL) & (k < MAX_ITER)

    def iteration(s):
        w, f, g, h_inv, k = s
        p = -h_inv @ g
        t = line_search(w, f, g, p)
        w_new = w + t * p
        f_new, g_new = value_and_grad(w_new)
        step, dg = w_new - w, g_new - g
        rho = 1.0 / jnp.maximum(dg @ step, 1e-10)
        eye = jnp.eye(w.shape[0], dtype=w.dtype)
        left = eye - rho * jnp.outer(step, dg)
        h_inv = left @ h_inv @ left.T + rho * jnp.outer(step, step)
        return w_new, f_new, g_new, h_inv, k + 1

    f0, g0 = value_and_grad(w0)
    init = (w0, f0, g0, jnp.eye(w0.shape[0], dtype=w0.dtype), jnp.int32(0))
    w, f, _, _, k = lax.while_loop(not_done, iteration, init)
    return w, f, k


def example_inputs():
    kx, kn = jax.random.split(jax.random.key(3))
    x = jax.random.normal(kx, (SAMPLES, FEATURES), jnp.float32)
    true_w = jnp.arange(1, FEATURES + 1, dtype=jnp.float32) / FEATURES - 0.5
    labels = (x @ true_w + 0.3 * jax.random.normal(kn, (SAMPLES,)) > 0).astype(jnp.float32)
    return jnp.zeros((FEATURES + 1,), jnp.float32), x, labels
