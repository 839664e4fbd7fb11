"""Shape specialization: compile one model for many input lengths, then again with bucketing.

XLA compiles for exact shapes, so every new input length is a new trace, lowering and compile.
``analysis.compile.sweep.run_sweep`` (the worker's body for a ``kind="sweep"`` job) calls a jitted model once per
length and records what the first call cost (trace, lowering and XLA compile, from JAX's own
``jax.monitoring`` compile events) and what a cached call costs, and how many executables the
jitted function holds (``jax.jit(f)._cache_size()``, else the distinct shapes seen). Then the
same with the inputs zero-padded up to a few bucket sizes: fewer executables, each call doing
the work of the padded length. The numbers go into ``bundle.metrics["shape_sweep"]``
(docs/bundle.md); the bundle itself is the ordinary compile at the first length.

The model contract: like a gallery model, but ``example_inputs(n)`` takes the length
(``sample_models/shape_sweep.py``). The axes that follow the length are found by comparing
the inputs made for two lengths, so padding never touches the other axes.

This module holds the pure part (lengths, buckets, the summary); it needs no JAX.
"""

from __future__ import annotations

import re
import statistics

from analysis.errors import ExplorerError

DEFAULT_LENGTHS = list(range(100, 1001, 100))
DEFAULT_BUCKETS = [256, 512, 1024]
MAX_LENGTHS = 40
MAX_LENGTH = 1 << 20


def bucket_for(n: int, buckets: list[int]) -> int:
    """The smallest bucket that holds ``n``; past the largest, the next multiple of it."""
    bs = sorted(b for b in buckets if b > 0)
    if not bs:
        return n
    for b in bs:
        if n <= b:
            return b
    top = bs[-1]
    return -(-n // top) * top


def parse_lengths(text: str, what: str = "lengths") -> list[int]:
    """``"100, 200 300"`` or ``"100..1000 step 100"`` / ``"100:1001:100"`` -> ints."""
    t = (text or "").strip().lower()
    m = re.fullmatch(r"(\d+)\s*(?:\.\.|-|to)\s*(\d+)(?:\s*(?:step|by|,)\s*(\d+))?", t)
    if m:
        a, b, s = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
        out = list(range(a, b + 1, max(1, s)))
    else:
        m = re.fullmatch(r"(\d+):(\d+)(?::(\d+))?", t)
        if m:
            out = list(range(int(m.group(1)), int(m.group(2)), max(1, int(m.group(3) or 1))))
        else:
            parts = [p for p in re.split(r"[\s,;]+", t) if p]
            if not parts or not all(p.isdigit() for p in parts):
                raise ExplorerError("options", f"{what}: give numbers like '100, 200, 300' or '100..1000 step 100'")
            out = [int(p) for p in parts]
    return check_lengths(out, what)


def check_lengths(values, what: str = "lengths") -> list[int]:
    try:
        out = [int(v) for v in values]
    except (TypeError, ValueError):
        raise ExplorerError("options", f"{what} must be whole numbers") from None
    if not out:
        raise ExplorerError("options", f"{what}: give at least one")
    if len(out) > MAX_LENGTHS:
        raise ExplorerError("options", f"{what}: at most {MAX_LENGTHS} values (got {len(out)})")
    if any(v < 1 or v > MAX_LENGTH for v in out):
        raise ExplorerError("options", f"{what} must be between 1 and {MAX_LENGTH}")
    return out


def summary(plain: list[dict], bucketed: list[dict]) -> dict:
    """Totals of the two runs: executables, compile seconds, mean cached call, padding overhead."""

    def tot(rows, key):
        return sum(r.get(key) or 0.0 for r in rows)

    def mean(rows, key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return statistics.fmean(vals) if vals else None

    return {
        "executables": plain[-1]["executables"] if plain else 0,
        "executables_bucketed": bucketed[-1]["executables"] if bucketed else 0,
        "compile_s": tot(plain, "compile_s"), "compile_s_bucketed": tot(bucketed, "compile_s"),
        "first_call_s": tot(plain, "first_call_s"), "first_call_s_bucketed": tot(bucketed, "first_call_s"),
        "mean_cached_call_s": mean(plain, "cached_call_s"),
        "mean_cached_call_s_bucketed": mean(bucketed, "cached_call_s"),
        "padding_overhead": (sum(r["padded_to"] for r in bucketed) / sum(r["length"] for r in bucketed) - 1.0)
        if bucketed else 0.0,
    }
