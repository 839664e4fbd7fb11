"""First compile of a model written with a library against the same model in plain jax.numpy,
side by side in one run, each in a fresh sandboxed worker as the app runs them (process start,
imports, trace, lower, compile): what importing Flax / Keras costs a job.

    .venv/bin/python benchmarks/frameworks_first_compile.py [ROUNDS]

Prints the median wall time of each and the ratio (the goal: a library model's first compile
under 2x the plain one's).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from analysis.service.job import Job  # noqa: E402
from analysis.service.worker import run_job  # noqa: E402

PLAIN = '''
import jax, jax.numpy as jnp
D, HEADS, FFN, SEQ = 128, 4, 256, 64

def rms(x, s):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * s

def model(p, x):
    s, d = x.shape
    h = rms(x, p["n1"])
    split = lambda t: t.reshape(s, HEADS, d // HEADS).transpose(1, 0, 2)
    q, k, v = split(h @ p["q"]), split(h @ p["k"]), split(h @ p["v"])
    a = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((s, s), bool)), q @ k.transpose(0, 2, 1) / jnp.sqrt(d // HEADS), -1e9), -1)
    x = x + ((a @ v).transpose(1, 0, 2).reshape(s, d)) @ p["o"]
    h = rms(x, p["n2"])
    return x + (jax.nn.silu(h @ p["g"]) * (h @ p["u"])) @ p["dn"]

def example_inputs():
    k = jax.random.split(jax.random.key(0), 8)
    n = lambda i, shape: jax.random.normal(k[i], shape, jnp.float32) * 0.05
    p = {"q": n(0, (D, D)), "k": n(1, (D, D)), "v": n(2, (D, D)), "o": n(3, (D, D)), "g": n(4, (D, FFN)),
         "u": n(5, (D, FFN)), "dn": n(6, (FFN, D)), "n1": jnp.ones((D,)), "n2": jnp.ones((D,))}
    return (p, jax.random.normal(k[7], (SEQ, D), jnp.float32))
'''


def first_compile(source: str | None, name: str) -> float:
    job = Job(kind="gallery", name=name, backend="cpu") if source is None else \
        Job(source=source, name=name, backend="cpu")
    t0 = time.perf_counter()
    run_job(job)
    return time.perf_counter() - t0


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    sides = {"plain jax.numpy decoder": (PLAIN, "plain"), "Flax NNX decoder (gallery decoder_nnx)": (None, "decoder_nnx"),
             "Keras 3 MLP (gallery keras_mlp)": (None, "keras_mlp"), "plain jax.numpy MLP (gallery mlp)": (None, "mlp")}
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(rounds):  # interleaved, so load on the machine falls on every side alike
        for label, (src, name) in sides.items():
            times[label].append(first_compile(src, name))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:42s} {v:6.2f} s (median of {rounds})")
    print(f"Flax NNX / plain decoder: {med['Flax NNX decoder (gallery decoder_nnx)'] / med['plain jax.numpy decoder']:.2f}x")
    print(f"Keras / plain MLP:        {med['Keras 3 MLP (gallery keras_mlp)'] / med['plain jax.numpy MLP (gallery mlp)']:.2f}x")


if __name__ == "__main__":
    main()
