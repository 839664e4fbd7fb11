"""How fast is our pure-Python HLO parser next to XLA's own C++ parser?

Generates, at run time, the optimized HLO of a deep transformer stack compiled with jax on CPU
(many layers of layernorm + attention + MLP, small dimensions so the compile is quick), then times
on the same text, interleaved, several repeats each:

- ``parse_module`` (lazy: shapes, metadata and backend configs are decoded on first access);
- ``parse_module`` + touching every instruction's shape, metadata and backend_config;
- XLA's C++ parser, ``jaxlib._hlo.hlo_module_from_text`` (text -> HloModule, verified).

Target: ``parse_module`` within 1.5x of the C++ parser. Run::

    .venv/bin/python benchmarks/parse_speed.py [--layers 24] [--repeats 7] [--profile] [--hlo FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from analysis.hlo import parse_module  # noqa: E402


def transformer_hlo(layers: int, d_model: int = 32, heads: int = 4, seq: int = 16, batch: int = 2) -> str:
    """Optimized HLO of a ``layers``-deep transformer, forward + loss (unrolled Python loop)."""
    import jax
    import jax.numpy as jnp

    d_head = d_model // heads

    def layernorm(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b

    def attention(x, p):
        q = (x @ p["wq"]).reshape(batch, seq, heads, d_head)
        k = (x @ p["wk"]).reshape(batch, seq, heads, d_head)
        v = (x @ p["wv"]).reshape(batch, seq, heads, d_head)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d_head)
        mask = jnp.tril(jnp.ones((seq, seq), bool))
        s = jnp.where(mask, s, -1e9)
        a = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(batch, seq, d_model)
        return o @ p["wo"]

    def mlp(x, p):
        return jax.nn.gelu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

    def model(params, x):
        for p in params:
            with jax.named_scope("block"):
                x = x + attention(layernorm(x, p["g1"], p["b1n"]), p)
                x = x + mlp(layernorm(x, p["g2"], p["b2n"]), p)
        return jnp.mean(x ** 2)

    key = jax.random.PRNGKey(0)

    def layer_params(i):
        ks = jax.random.split(jax.random.fold_in(key, i), 6)
        n = lambda k, s: jax.random.normal(k, s) * 0.02  # noqa: E731
        return {
            "wq": n(ks[0], (d_model, d_model)), "wk": n(ks[1], (d_model, d_model)),
            "wv": n(ks[2], (d_model, d_model)), "wo": n(ks[3], (d_model, d_model)),
            "w1": n(ks[4], (d_model, 4 * d_model)), "b1": jnp.zeros(4 * d_model),
            "w2": n(ks[5], (4 * d_model, d_model)), "b2": jnp.zeros(d_model),
            "g1": jnp.ones(d_model), "b1n": jnp.zeros(d_model),
            "g2": jnp.ones(d_model), "b2n": jnp.zeros(d_model),
        }

    params = [layer_params(i) for i in range(layers)]
    x = jnp.ones((batch, seq, d_model))
    # Forward + loss only: with the gradient, CPU HLO grows superlinearly with depth
    # (about 5k instructions at 4 layers, 200k at 32), and compiles take minutes.
    return jax.jit(model).lower(params, x).compile().as_text()


def parse_and_touch(text: str):
    mod = parse_module(text)
    for inst in mod.instructions():
        inst.shape
        inst.metadata
        inst.backend_config
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--min-instructions", type=int, default=5000)
    ap.add_argument("--profile", action="store_true", help="cProfile one parse_module run")
    ap.add_argument("--hlo", help="time this HLO file instead of a generated transformer (e.g. the "
                    "largest module of XLA's tests: benchmarks/xla_grammar.py prints which)")
    args = ap.parse_args()

    from jaxlib import _hlo

    t0 = time.perf_counter()
    if args.hlo:
        with open(args.hlo) as f:
            text = f.read()
        n = sum(1 for _ in parse_module(text).instructions())
        print(f"{os.path.basename(args.hlo)}: {n} instructions, {len(text) / 1e6:.2f} MB")
    else:
        layers = args.layers
        while True:
            text = transformer_hlo(layers)
            n = sum(1 for _ in parse_module(text).instructions())
            if n >= args.min_instructions:
                break
            layers *= 2
        print(f"generated optimized HLO: {layers} layers, {n} instructions, {len(text) / 1e6:.2f} MB, "
              f"in {time.perf_counter() - t0:.1f} s")

    # Sanity: both parsers see the same instructions.
    xla_mod = _hlo.hlo_module_from_text(text)
    n_xla = sum(len(c.instructions()) for c in xla_mod.computations())
    assert n_xla == n, (n_xla, n)

    def fresh_parse(t):
        # lru caches (shape texts) would otherwise make later repeats of "touch" artificially cheap
        from analysis.hlo import ir as _ir
        _ir.cached_shape.cache_clear()
        return parse_and_touch(t)

    contenders = {
        "parse_module": parse_module,
        "parse_module+touch": fresh_parse,
        "XLA C++ parser": _hlo.hlo_module_from_text,
    }
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(args.repeats):  # interleaved, so drifts hit all alike
        for name, fn in contenders.items():
            gc.collect()
            t = time.perf_counter()
            result = fn(text)
            times[name].append(time.perf_counter() - t)
            del result

    for name, ts in times.items():
        print(f"  {name:20s} best {min(ts) * 1e3:8.1f} ms   median {statistics.median(ts) * 1e3:8.1f} ms")

    if args.profile:
        from analysis.hlo import ir as _ir
        _ir.cached_shape.cache_clear()
        prof = cProfile.Profile()
        prof.enable()
        parse_module(text)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)

    ours, xla = min(times["parse_module"]), min(times["XLA C++ parser"])
    touch = min(times["parse_module+touch"])
    print(f"parse_module+touch: {touch * 1e3:.1f} ms ({touch / xla:.2f}x)")
    print(f"parse_module: {ours * 1e3:.1f} ms, XLA C++ parser: {xla * 1e3:.1f} ms, "
          f"ratio {ours / xla:.2f}x ({n} instructions)")


if __name__ == "__main__":
    main()
