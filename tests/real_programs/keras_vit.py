"""Keras 3 Vision Transformer for 32x32 images, built with the functional API.

A strided convolution cuts the image into 8x8 patches, a custom layer adds learned position
embeddings, two pre-norm transformer blocks follow, then pooling and a dense classifier.
"""

import jax
import jax.numpy as jnp
import keras
from keras import layers

IMAGE, PATCH, DIM, HEADS, MLP_DIM, CLASSES, DEPTH = 32, 8, 32, 4, 64, 10, 2
NUM_PATCHES = (IMAGE // PATCH) ** 2


class PatchEncoder(layers.Layer):
    """Adds a learned embedding to each patch position."""

    def build(self, input_shape):
        self.position_embedding = self.add_weight(
            shape=(input_shape[1], input_shape[2]), initializer=keras.initializers.RandomNormal(stddev=0.02),
            name="position_embedding")

    def call(self, patches):
        return patches + self.position_embedding[None]


def transformer_block(x, i):
    h = layers.LayerNormalization(epsilon=1e-6, name=f"block{i}_norm1")(x)
    h = layers.MultiHeadAttention(num_heads=HEADS, key_dim=DIM // HEADS, name=f"block{i}_attn")(h, h)
    x = layers.Add(name=f"block{i}_add1")([x, h])
    h = layers.LayerNormalization(epsilon=1e-6, name=f"block{i}_norm2")(x)
    h = layers.Dense(MLP_DIM, activation="gelu", name=f"block{i}_mlp1")(h)
    h = layers.Dense(DIM, name=f"block{i}_mlp2")(h)
    return layers.Add(name=f"block{i}_add2")([x, h])


def build_vit():
    inputs = keras.Input((IMAGE, IMAGE, 3), name="image")
    x = layers.Conv2D(DIM, PATCH, strides=PATCH, name="patch_conv")(inputs)
    x = layers.Reshape((NUM_PATCHES, DIM), name="patch_flatten")(x)
    x = PatchEncoder(name="patch_encoder")(x)
    for i in range(DEPTH):
        x = transformer_block(x, i)
    x = layers.LayerNormalization(epsilon=1e-6, name="final_norm")(x)
    x = layers.GlobalAveragePooling1D(name="pool")(x)
    outputs = layers.Dense(CLASSES, name="classifier")(x)
    return keras.Model(inputs, outputs, name="vit")


keras.utils.set_random_seed(0)
model = build_vit()


def example_inputs():
    return (jax.random.uniform(jax.random.key(1), (2, IMAGE, IMAGE, 3), jnp.float32),)
