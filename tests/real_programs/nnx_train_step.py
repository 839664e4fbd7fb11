"""Flax NNX image classifier, one training step written the way Flax's MNIST tutorial writes one.

The model, an `nnx.Optimizer` (AdamW) and the metrics are handed to a step that returns nothing:
it computes the loss and gradients with `nnx.value_and_grad`, updates the parameters and the
optimizer's moments in place, and adds the batch's loss and accuracy to the metrics. BatchNorm
runs in training mode (its statistics move) and dropout draws from the model's RNG stream.
"""

import jax.numpy as jnp
import optax
from flax import nnx


class ConvNet(nnx.Module):
    def __init__(self, *, rngs: nnx.Rngs):
        self.conv = nnx.Conv(1, 8, kernel_size=(3, 3), rngs=rngs)
        self.bn = nnx.BatchNorm(8, rngs=rngs)
        self.dropout = nnx.Dropout(0.25, rngs=rngs)
        self.head = nnx.Linear(8 * 7 * 7, 10, rngs=rngs)

    def __call__(self, x):
        x = nnx.relu(self.bn(self.conv(x)))
        x = nnx.avg_pool(x, window_shape=(2, 2), strides=(2, 2))  # 14x14 -> 7x7
        return self.head(self.dropout(x.reshape(x.shape[0], -1)))


net = ConvNet(rngs=nnx.Rngs(0))
optimizer = nnx.Optimizer(net, optax.adamw(1e-3, weight_decay=1e-4), wrt=nnx.Param)
metrics = nnx.MultiMetric(accuracy=nnx.metrics.Accuracy(), loss=nnx.metrics.Average("loss"))


def loss_fn(model, images, labels):
    logits = model(images)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    return loss, logits


def train_step(model, optimizer, metrics, images, labels):
    (loss, logits), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model, images, labels)
    metrics.update(loss=loss, logits=logits, labels=labels)
    optimizer.update(model, grads)


model = train_step


def example_inputs():
    images = jnp.linspace(0.0, 1.0, 4 * 14 * 14).reshape(4, 14, 14, 1)
    return net, optimizer, metrics, images, jnp.array([3, 1, 4, 1])
