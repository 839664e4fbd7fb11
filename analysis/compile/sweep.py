"""Shape specialization: compile one model for many input lengths, then again with bucketing.

XLA compiles for exact shapes, so every new input length is a new trace, lowering and compile.
``run_sweep`` (the worker's body for a ``kind="sweep"`` job) calls a jitted model once per
length and records what the first call cost (trace, lowering and XLA compile, from JAX's own
``jax.monitoring`` compile events) and what a cached call costs, and how many executables the
jitted function holds (``jax.jit(f)._cache_size()``, else the distinct shapes seen). Then the
same with the inputs zero-padded up to a few bucket sizes: fewer executables, each call doing
the work of the padded length. The numbers go into ``bundle.metrics["shape_sweep"]``
(docs/bundle.md); the bundle itself is the ordinary compile at the first length.

The model contract: like a gallery model, but ``example_inputs(n)`` takes the length
(``sample_models/shape_sweep.py``). The axes that follow the length are found by comparing
the inputs made for two lengths, so padding never touches the other axes.

The pure helpers (``bucket_for``, ``parse_lengths``, ``summary``) need no JAX.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

from analysis.errors import ExplorerError

DEFAULT_LENGTHS = list(range(100, 1001, 100))
DEFAULT_BUCKETS = [256, 512, 1024]
MAX_LENGTHS = 40
MAX_LENGTH = 1 << 20
_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace_s",
           "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
           "/jax/core/compile/backend_compile_duration": "compile_s"}


# ----------------------------------------------------------------------------- pure helpers


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
    import re

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


# ----------------------------------------------------------------------------- in the worker (JAX)


def _load(source: str, filename: str, name: str):
    """Run the model file; return (model, example_inputs, docstring)."""
    import linecache
    import types

    from analysis.compile.lower import _error_from_exception

    try:
        code = compile(source, filename, "exec")
    except SyntaxError as e:
        raise _error_from_exception("syntax", e, filename) from None
    except ValueError as e:
        raise ExplorerError("syntax", str(e), filename) from None
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    mod = types.ModuleType(f"xla_explorer_sweep_{name}")
    mod.__file__ = filename
    try:
        exec(code, mod.__dict__)
    except BaseException as e:  # noqa: BLE001 - user code may raise anything
        if isinstance(e, KeyboardInterrupt):
            raise
        raise _error_from_exception("import", e, filename) from None
    model, make = mod.__dict__.get("model"), mod.__dict__.get("example_inputs")
    if not callable(model):
        raise ExplorerError("import", "the code defines no callable named `model`", filename)
    if not callable(make):
        raise ExplorerError("import", "the code defines no `example_inputs(n)` function", filename)
    return model, make, (mod.__doc__ or "").strip()


def _inputs(make, n: int, filename: str) -> tuple:
    from analysis.compile.lower import _check_inputs, _error_from_exception

    try:
        args = make(n)
    except TypeError as e:
        raise ExplorerError("inputs", f"example_inputs({n}) failed: {e} — a sweep needs example_inputs(n) "
                                      "that takes the length", filename) from None
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        raise _error_from_exception("inputs", e, filename) from None
    if not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    _check_inputs(args, filename)
    return args


def _length_axes(a: tuple, b: tuple, n: int) -> list[tuple[int, ...]]:
    """Per leaf, the axes whose size is ``n`` in ``a`` and different in ``b`` (made for another length)."""
    import jax

    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    out = []
    for x, y in zip(la, lb):
        sx, sy = tuple(getattr(x, "shape", ())), tuple(getattr(y, "shape", ()))
        out.append(tuple(i for i, (p, q) in enumerate(zip(sx, sy)) if p == n and p != q) if len(sx) == len(sy) else ())
    return out


def _pad(args: tuple, axes: list[tuple[int, ...]], target: int) -> tuple:
    import jax
    import numpy as np

    leaves, tree = jax.tree_util.tree_flatten(args)
    out = []
    for leaf, ax in zip(leaves, axes):
        if ax and hasattr(leaf, "shape"):
            arr = np.asarray(leaf)
            width = [(0, target - arr.shape[i]) if i in ax else (0, 0) for i in range(arr.ndim)]
            leaf = np.pad(arr, width)
        out.append(leaf)
    return jax.tree_util.tree_unflatten(tree, out)


class _CompileEvents:
    """Collects JAX's compile-duration events (trace, lowering, XLA compile) while active."""

    def __init__(self):
        from jax import monitoring

        self.current: dict[str, float] | None = None
        monitoring.register_event_duration_secs_listener(self._on)

    def _on(self, name, duration, **_kw):
        key = _EVENTS.get(name)
        if key and self.current is not None:
            self.current[key] = self.current.get(key, 0.0) + float(duration)


def _one_pass(model, make, lengths, buckets, axes_for, device, repeats, filename, events, say) -> list[dict]:
    import jax

    from analysis.compile.lower import _error_from_exception

    f = jax.jit(lambda *a: model(*a))  # a fresh function: a fresh jit cache
    seen: set[int] = set()
    rows = []
    for n in lengths:
        target = bucket_for(n, buckets) if buckets else n
        args = _inputs(make, n, filename)
        if target != n:
            args = _pad(args, axes_for(n), target)
        args = jax.device_put(args, device)
        events.current = {}
        t0 = time.perf_counter()
        try:
            jax.block_until_ready(f(*args))
        except Exception as e:  # noqa: BLE001
            raise _error_from_exception("compile", e, filename) from None
        first = time.perf_counter() - t0
        ev, events.current = events.current, None
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(f(*args))
            times.append(time.perf_counter() - t0)
        new = target not in seen
        seen.add(target)
        size = f._cache_size() if hasattr(f, "_cache_size") else None
        rows.append({"length": n, "padded_to": target, "compiled": bool(ev.get("compile_s")) or new,
                     "first_call_s": first, "trace_s": ev.get("trace_s", 0.0), "lower_s": ev.get("lower_s", 0.0),
                     "compile_s": ev.get("compile_s", 0.0), "cached_call_s": statistics.median(times),
                     "executables": int(size) if size is not None else len(seen)})
        say(f"sweep:{'bucketed ' if buckets else ''}{n}")
    return rows


def run_sweep(job, progress: Callable[[str], None] | None = None):
    """The worker's body for a ``kind="sweep"`` job; returns the Bundle of the first length with
    ``metrics["shape_sweep"]``."""
    import jax

    from analysis.compile import lower as run

    say = progress or (lambda p: None)
    spec = job.sweep or {}
    if not isinstance(spec, dict):
        raise ExplorerError("options", "sweep must be an object {lengths, buckets, repeats}")
    lengths = check_lengths(spec.get("lengths") or DEFAULT_LENGTHS)
    buckets = check_lengths(spec.get("buckets") or DEFAULT_BUCKETS, "buckets")
    try:
        repeats = max(1, min(50, int(spec.get("repeats", 5))))
    except (TypeError, ValueError):
        raise ExplorerError("options", "repeats must be a whole number") from None
    source, filename = job.source, job.filename
    if not source and job.name:
        from sample_models import gallery

        entry = gallery().get(job.name)
        if entry is None:
            raise ExplorerError("load", f"no gallery model named {job.name!r}")
        source, filename = entry.source, str(entry.path)
    say("load")
    model, make, doc = _load(source, filename, job.name)
    device = run.select_device(job.backend)

    first = _inputs(make, lengths[0], filename)
    axes_memo: dict[int, list] = {}

    def axes_for(n: int):
        if n not in axes_memo:
            axes_memo[n] = _length_axes(_inputs(make, n, filename), _inputs(make, n + 1, filename), n)
        return axes_memo[n]

    loaded = run.LoadedModel(model, first, source, filename, job.name, doc)
    bundle = run.compile_to_bundle(loaded, job.backend, job.compiler_options, say,
                                   source_kind="gallery" if not job.source else "code")
    bundle.__dict__.pop("_compiled", None)
    bundle.__dict__.pop("_args", None)
    say("sweep")
    events = _CompileEvents()
    t0 = time.perf_counter()
    plain = _one_pass(model, make, lengths, None, axes_for, device, repeats, filename, events, say)
    bucketed = _one_pass(model, make, lengths, buckets, axes_for, device, repeats, filename, events, say)
    bundle.metrics["shape_sweep"] = {
        "lengths": lengths, "buckets": sorted(buckets), "repeats": repeats,
        "count_method": "jit cache size" if hasattr(jax.jit(model), "_cache_size") else "distinct shapes",
        "plain": plain, "bucketed": bucketed, "summary": summary(plain, bucketed),
        "seconds": time.perf_counter() - t0,
    }
    return bundle
