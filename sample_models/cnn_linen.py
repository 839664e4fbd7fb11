"""Flax Linen CNN: two convolutions with ReLU and pooling, then a dense classifier.

Linen modules are applied with their parameters (`Net().apply(params, x)`), so the weights
are inputs of the program already. On the CPU the convolutions run as library calls; look for
each convolution's bias add and ReLU fused behind it, the pooling's reduce-window, and the
flatten as a bitcast (a layout change that moves no data).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp


class Net(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(16, (3, 3), name="conv1")(x))
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = nn.relu(nn.Conv(32, (3, 3), name="conv2")(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape(x.shape[0], -1)
        return nn.Dense(10, name="head")(x)


def model(params, x):
    return Net().apply(params, x)


def example_inputs():
    x = jax.random.normal(jax.random.key(0), (8, 32, 32, 3), jnp.float32)
    return (Net().init(jax.random.key(1), x), x)
