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
MIN_REPEATS = 5  # cached calls per length and run: enough for a median and a spread
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


def spread(times: list[float]) -> dict:
    """Median and the middle half (first and third quartile) of repeated call times."""
    xs = sorted(t for t in times if t is not None)
    if not xs:
        return {"median_s": None, "q1_s": None, "q3_s": None, "n": 0}
    if len(xs) == 1:
        return {"median_s": xs[0], "q1_s": xs[0], "q3_s": xs[0], "n": 1}
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return {"median_s": statistics.median(xs), "q1_s": q1, "q3_s": q3, "n": len(xs)}


def verdict(plain: list[dict], bucketed: list[dict]) -> dict:
    """What the sweep's own numbers support about the cached calls, length by length.

    A padded length counts as *slower* with bucketing when the middle half of its bucketed calls
    lies wholly above the middle half of its exact-shape calls, *faster* when wholly below, and
    *alike* when they overlap. Two thirds of the padded lengths one way make the finding;
    otherwise the difference is within the run-to-run spread. Rows need ``cached_q1_s`` and
    ``cached_q3_s`` (``spread``)."""
    by_len = {r["length"]: r for r in plain}
    slower = faster = alike = 0
    ratios = []
    for b in bucketed:
        p = by_len.get(b["length"])
        if p is None or b["padded_to"] == b["length"]:
            continue
        if None in (p.get("cached_q1_s"), p.get("cached_q3_s"), b.get("cached_q1_s"), b.get("cached_q3_s")):
            continue
        if b["cached_q1_s"] > p["cached_q3_s"]:
            slower += 1
        elif b["cached_q3_s"] < p["cached_q1_s"]:
            faster += 1
        else:
            alike += 1
        if p["cached_call_s"]:
            ratios.append(b["cached_call_s"] / p["cached_call_s"])
    n = slower + faster + alike
    if n == 0:
        finding = "none"
    elif slower * 3 >= 2 * n:
        finding = "slower"
    elif faster * 3 >= 2 * n:
        finding = "faster"
    else:
        finding = "within spread"
    ratio = statistics.geometric_mean(ratios) if ratios else None
    return {"finding": finding, "padded_lengths": n, "slower": slower, "faster": faster, "alike": alike,
            "ratio": ratio}


def conclusions(sw: dict) -> list[str]:
    """Plain-text sentences, each one what the sweep ``sw`` (``metrics["shape_sweep"]``) measured."""
    s, v = sw["summary"], sw.get("verdict") or {}
    out = [f"Exact shapes: {s['executables']} executables for {len(sw['plain'])} lengths, "
           f"{s['compile_s']:.2f} s of XLA compile. Bucketed: {s['executables_bucketed']} executables, "
           f"{s['compile_s_bucketed']:.2f} s."]
    pad = s.get("padding_overhead") or 0.0
    f, n = v.get("finding"), v.get("padded_lengths", 0)
    if f == "slower":
        out.append(f"Cached calls with bucketing are slower at {v['slower']} of {n} padded lengths (by "
                   f"{v['ratio'] - 1:.0%} on the geometric mean): the {pad:.0%} more elements cost time.")
    elif f == "faster":
        out.append(f"Cached calls with bucketing measured faster at {v['faster']} of {n} padded lengths "
                   f"({1 - v['ratio']:.0%} on the geometric mean) although they compute {pad:.0%} more "
                   "elements: the padding costs nothing measurable at this size, and the bucket lengths' own "
                   "executables run a little faster than the exact ones.")
    elif f == "within spread":
        out.append(f"Cached calls: no difference beyond the run-to-run spread ({v['alike']} of {n} padded lengths "
                   f"overlap; the rest split {v['slower']} slower, {v['faster']} faster). At this size a call's "
                   f"fixed cost hides the {pad:.0%} more elements; a bigger model would show them.")
    return out
