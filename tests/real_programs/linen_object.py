"""Flax Linen classifier given as a module object (`model = Classifier()`), one training-mode call.

The tool initializes it as Linen's examples do (`Classifier().init(jax.random.key(0), x)`) and
compiles `apply` with the variables as the program's first input; BatchNorm updates its running
statistics (`batch_stats`, applied mutable) and dropout asks for the `dropout` RNG stream.
"""

import jax.numpy as jnp
from flax import linen as nn


class Classifier(nn.Module):
    hidden: int = 24
    classes: int = 6

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.hidden, name="embed")(x)
        x = nn.BatchNorm(use_running_average=False, name="norm")(x)
        x = nn.Dropout(0.1, deterministic=False, name="drop")(nn.gelu(x))
        return nn.Dense(self.classes, name="logits")(x)


model = Classifier()


def example_inputs():
    return (jnp.ones((8, 10), jnp.float32),)
