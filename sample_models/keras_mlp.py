"""Keras 3 on the JAX backend: a small classifier with layer normalization and dropout off.

A Keras model is the model: its variables are passed in (`stateless_call`), so they are inputs
of the compiled program. Keras names each layer (`dense`, `layer_normalization`, ...); look for
each dense layer's bias add and activation fused behind its matmul, and the layer norm's mean,
variance and scale in as few kernels as the reductions allow.
"""

import jax
import jax.numpy as jnp
import keras

model = keras.Sequential([
    keras.Input((256,)),
    keras.layers.Dense(512, activation="gelu", name="hidden"),
    keras.layers.LayerNormalization(name="norm"),
    keras.layers.Dense(10, name="logits"),
])


def example_inputs():
    return (jax.random.normal(jax.random.key(0), (64, 256), jnp.float32),)
