"""Flax NNX variational autoencoder, one forward pass.

An MLP encoder gives a mean and log-variance, a sample is drawn with the model's own `noise` RNG
stream (its counter advances), and the call stores the KL term in a variable it updates.
"""

import jax
import jax.numpy as jnp
from flax import nnx


class Encoder(nnx.Module):
    def __init__(self, din, hidden, latents, *, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(din, hidden, rngs=rngs)
        self.mean = nnx.Linear(hidden, latents, rngs=rngs)
        self.logvar = nnx.Linear(hidden, latents, rngs=rngs)

    def __call__(self, x):
        h = nnx.relu(self.hidden(x))
        return self.mean(h), self.logvar(h)


class Decoder(nnx.Module):
    def __init__(self, latents, hidden, dout, *, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(latents, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, dout, rngs=rngs)

    def __call__(self, z):
        return self.out(nnx.relu(self.hidden(z)))


class Loss(nnx.Variable):
    """A value the forward pass records for the training loss."""


class VAE(nnx.Module):
    def __init__(self, din=64, hidden=32, latents=8, *, rngs: nnx.Rngs):
        self.encoder = Encoder(din, hidden, latents, rngs=rngs)
        self.decoder = Decoder(latents, hidden, din, rngs=rngs)
        self.rngs = rngs
        self.kl_loss = Loss(jnp.zeros((), jnp.float32))

    def __call__(self, x):
        mean, logvar = self.encoder(x)
        eps = jax.random.normal(self.rngs.noise(), mean.shape)
        z = mean + jnp.exp(0.5 * logvar) * eps
        kl = -0.5 * jnp.sum(1.0 + logvar - mean ** 2 - jnp.exp(logvar), axis=-1)
        self.kl_loss[...] = jnp.mean(kl)
        return self.decoder(z)


model = VAE(rngs=nnx.Rngs(params=0, noise=1))


def example_inputs():
    return (jax.random.uniform(jax.random.key(2), (4, 64), jnp.float32),)
