"""Flax Linen ResNet for small images, run in inference mode.

Three basic residual blocks in two stages (16 and 32 filters) with BatchNorm on running averages,
global average pooling and a dense head; the variables hold `params` and `batch_stats`.
"""

from functools import partial
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
from flax import linen as nn

ModuleDef = Any


class ResNetBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (projected when the shape changes)."""

    filters: int
    conv: ModuleDef
    norm: ModuleDef
    act: Callable = nn.relu
    strides: tuple[int, int] = (1, 1)

    @nn.compact
    def __call__(self, x):
        shortcut = x
        y = self.conv(self.filters, (3, 3), self.strides)(x)
        y = self.act(self.norm()(y))
        y = self.conv(self.filters, (3, 3))(y)
        y = self.norm(scale_init=nn.initializers.zeros)(y)
        if shortcut.shape != y.shape:
            shortcut = self.conv(self.filters, (1, 1), self.strides, name="shortcut_conv")(shortcut)
            shortcut = self.norm(name="shortcut_bn")(shortcut)
        return self.act(shortcut + y)


class ResNet(nn.Module):
    stage_sizes: Sequence[int]
    block_cls: ModuleDef
    num_filters: int = 16
    num_classes: int = 10
    dtype: Any = jnp.float32
    act: Callable = nn.relu
    conv: ModuleDef = nn.Conv

    @nn.compact
    def __call__(self, x, train: bool = True):
        conv = partial(self.conv, use_bias=False, dtype=self.dtype)
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5,
                       dtype=self.dtype)
        x = conv(self.num_filters, (3, 3), name="conv_init")(x)
        x = self.act(norm(name="bn_init")(x))
        for stage, n_blocks in enumerate(self.stage_sizes):
            for b in range(n_blocks):
                strides = (2, 2) if stage > 0 and b == 0 else (1, 1)
                x = self.block_cls(self.num_filters * 2 ** stage, conv=conv, norm=norm, act=self.act,
                                   strides=strides)(x)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, dtype=self.dtype, name="head")(x)


ResNetTiny = partial(ResNet, stage_sizes=(2, 1), block_cls=ResNetBlock)

net = ResNetTiny(num_filters=16, num_classes=10)
_images = jax.random.normal(jax.random.key(1), (2, 32, 32, 3), jnp.float32)
variables = jax.jit(partial(net.init, train=False))(jax.random.key(0), _images)


def model(variables, images):
    return net.apply(variables, images, train=False)


def example_inputs():
    return (variables, _images)
