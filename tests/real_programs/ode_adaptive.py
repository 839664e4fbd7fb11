"""A damped pendulum-on-a-spring integrated with an embedded Runge-Kutta 5(4) pair and adaptive
steps, in plain JAX.

One `while_loop` runs until the end time: each step evaluates the seven stages of the Butcher
tableau below (a Python loop, unrolled), estimates the local error from the embedded 4th-order
solution, accepts or rejects the step with `lax.cond`, and rescales the step size.
"""

import jax
import jax.numpy as jnp
from jax import lax

T_END, MAX_STEPS, TOL = 4.0, 400, 1e-5

# Dormand-Prince coefficients (the published tableau)
A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
B5 = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
B4 = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)


def vector_field(params, state):
    """state = (angle, length, angular velocity, radial velocity)."""
    theta, r, omega, v = state[0], state[1], state[2], state[3]
    g, k, damping = params["gravity"], params["stiffness"], params["damping"]
    domega = (-g * jnp.sin(theta) - 2 * v * omega) / r - damping * omega
    dv = r * omega ** 2 + g * jnp.cos(theta) - k * (r - 1.0) - damping * v
    return jnp.stack([omega, v, domega, dv])


def rk_step(params, y, h):
    stages = []
    for row in A:
        yi = y
        for a, k in zip(row, stages):
            yi = yi + h * a * k
        stages.append(vector_field(params, yi))
    y5 = y + h * sum(b * k for b, k in zip(B5, stages))
    y4 = y + h * sum(b * k for b, k in zip(B4, stages))
    return y5, y5 - y4


def model(params, y0):
    """-> (state at T_END, steps taken, steps rejected)."""

    def keep_going(carry):
        t, _, _, n, _ = carry
        return (t < T_END) & (n < MAX_STEPS)

    def step(carry):
        t, y, h, n, rejected = carry
        y_new, err = rk_step(params, y, h)
        scale = TOL + TOL * jnp.maximum(jnp.abs(y), jnp.abs(y_new))
        q = jnp.sqrt(jnp.mean((err / scale) ** 2))  # the error in units of the tolerance
        t, y, rejected = lax.cond(q <= 1.0, lambda: (t + h, y_new, rejected),
                                  lambda: (t, y, rejected + 1))
        h = jnp.minimum(h * jnp.clip(0.9 * q ** -0.2, 0.2, 5.0), T_END - t)
        return t, y, h, n + 1, rejected

    init = (jnp.float32(0.0), y0, jnp.float32(0.01), jnp.int32(0), jnp.int32(0))
    _, y, _, n, rejected = lax.while_loop(keep_going, step, init)
    return y, n, rejected


def example_inputs():
    params = {"gravity": jnp.float32(9.81), "stiffness": jnp.float32(40.0), "damping": jnp.float32(0.05)}
    return params, jnp.array([0.8, 1.0, 0.0, 0.0], jnp.float32)
