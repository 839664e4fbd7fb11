"""Running a shape sweep (``analysis.studies.sweep`` has the lengths, buckets, spread and verdict): one
jitted model called once per length, then again with inputs padded to buckets, with JAX's own
compile events (``jax.monitoring``) timing each trace, lowering and XLA compile; then at least
``MIN_REPEATS`` cached calls per length of each run, interleaved, for a median and a spread."""

from __future__ import annotations

import time
from typing import Callable

import jax
import numpy as np
from jax import monitoring

from analysis.compile.backend import select_device
from analysis.compile.frameworks import split_model
from analysis.compile.load import LoadedModel, as_inputs, as_main, run_model_file
from analysis.compile.user_errors import error_from_exception
from analysis.compile.stages import FULL_OPTIMIZATION, compile_model
from analysis.errors import ExplorerError
from analysis.studies.sweep import (
    DEFAULT_BUCKETS, DEFAULT_LENGTHS, MIN_REPEATS, bucket_for, check_lengths, spread, summary, verdict,
)
from sample_models import gallery_entry

_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace_s",
           "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
           "/jax/core/compile/backend_compile_duration": "compile_s"}


def _inputs(make, n: int, filename: str) -> tuple:
    try:
        args = make(n)
    except TypeError as e:
        raise ExplorerError("inputs", f"example_inputs({n}) failed: {e} — a sweep needs example_inputs(n) "
                                      "that takes the length", filename) from None
    except BaseException as e:  # noqa: BLE001 - user code may raise anything
        if isinstance(e, KeyboardInterrupt):
            raise
        raise error_from_exception("inputs", e, filename) from None
    return as_inputs(args, filename)


def _length_axes(a: tuple, b: tuple, n: int) -> list[tuple[int, ...]]:
    """Per leaf, the axes whose size is ``n`` in ``a`` and different in ``b`` (made for another length)."""
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    out = []
    for x, y in zip(la, lb):
        sx, sy = tuple(getattr(x, "shape", ())), tuple(getattr(y, "shape", ()))
        out.append(tuple(i for i, (p, q) in enumerate(zip(sx, sy)) if p == n and p != q) if len(sx) == len(sy) else ())
    return out


def _pad(args: tuple, axes: list[tuple[int, ...]], target: int) -> tuple:
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
        self.current: dict[str, float] | None = None
        monitoring.register_event_duration_secs_listener(self._on)

    def _on(self, name, duration, **_kw):
        key = _EVENTS.get(name)
        if key and self.current is not None:
            self.current[key] = self.current.get(key, 0.0) + float(duration)


def _one_pass(model, program, make, lengths, buckets, axes_for, device, filename, events, say) -> tuple[list[dict], list]:
    """First calls at each length (compiling where the shape is new); returns the rows and, per
    row, the (jitted function, arguments) to time cached calls with. ``program`` is the model as
    a function of arrays (``frameworks.split_model`` at the first length); each length's
    arguments are split alike, so a module object or a training step handed modules runs as the
    compile ran it."""
    # a fresh function: a fresh jit cache (at XLA's default optimization: stages.FULL_OPTIMIZATION)
    f = jax.jit(lambda *a: program(*a), compiler_options=FULL_OPTIMIZATION)
    seen: set[int] = set()
    rows, calls = [], []
    for n in lengths:
        target = bucket_for(n, buckets) if buckets else n
        args = _inputs(make, n, filename)
        if target != n:
            args = _pad(args, axes_for(n), target)
        args = jax.device_put(split_model(model, args, filename).inputs, device)
        events.current = {}
        t0 = time.perf_counter()
        try:
            jax.block_until_ready(f(*args))
        except Exception as e:  # noqa: BLE001 - the user's model fails at this length: one line
            raise error_from_exception("compile", e, filename) from None
        first = time.perf_counter() - t0
        ev, events.current = events.current, None
        new = target not in seen
        seen.add(target)
        size = f._cache_size() if hasattr(f, "_cache_size") else None
        rows.append({"length": n, "padded_to": target, "compiled": bool(ev.get("compile_s")) or new,
                     "first_call_s": first, "trace_s": ev.get("trace_s", 0.0), "lower_s": ev.get("lower_s", 0.0),
                     "compile_s": ev.get("compile_s", 0.0),
                     "executables": int(size) if size is not None else len(seen)})
        calls.append((f, args))
        say(f"sweep:{'bucketed ' if buckets else ''}{n}")
    return rows, calls


def _time_cached(plain, plain_calls, bucketed, bucketed_calls, repeats) -> None:
    """Cached calls, ``repeats`` of each run at each length, the two runs interleaved call by
    call so a drift of the machine (another job, the clock) falls on both alike."""
    for (pr, (pf, pa)), (br, (bf, ba)) in zip(zip(plain, plain_calls), zip(bucketed, bucketed_calls)):
        times: dict[int, list[float]] = {0: [], 1: []}
        for _ in range(repeats):
            for side, (f, a) in ((0, (pf, pa)), (1, (bf, ba))):
                t0 = time.perf_counter()
                jax.block_until_ready(f(*a))
                times[side].append(time.perf_counter() - t0)
        for row, ts in ((pr, times[0]), (br, times[1])):
            sp = spread(ts)
            row.update({"cached_call_s": sp["median_s"], "cached_q1_s": sp["q1_s"], "cached_q3_s": sp["q3_s"],
                        "cached_calls_s": ts})


def run_sweep(job, progress: Callable[[str], None] | None = None):
    """The worker's body for a ``kind="sweep"`` job; returns the Bundle of the first length with
    ``metrics["shape_sweep"]``."""
    say = progress or (lambda p: None)
    spec = job.sweep  # (analysis.service.job.Sweep, or None for the defaults)
    lengths = check_lengths((spec and spec.lengths) or DEFAULT_LENGTHS)
    buckets = check_lengths((spec and spec.buckets) or DEFAULT_BUCKETS, "buckets")
    try:
        repeats = max(MIN_REPEATS, min(50, int(spec.repeats if spec and spec.repeats is not None else MIN_REPEATS)))
    except (TypeError, ValueError):
        raise ExplorerError("options", "repeats must be a whole number") from None
    source, filename = job.source, job.filename
    if not source and job.name:
        entry = gallery_entry(job.name)
        source, filename = entry.source, str(entry.path)
    say("load")
    mf = run_model_file(source, filename, job.name, inputs_doc="example_inputs(n)")
    with as_main(mf.module):  # the user's code runs as under ``python FILE`` throughout
        model, make = mf.model, mf.make_inputs
        device = select_device(job.backend)

        first = _inputs(make, lengths[0], filename)
        axes_memo: dict[int, list] = {}

        def axes_for(n: int):
            if n not in axes_memo:
                axes_memo[n] = _length_axes(_inputs(make, n, filename), _inputs(make, n + 1, filename), n)
            return axes_memo[n]

        # the model as a function of arrays, as the compile shows it (a Flax, Equinox or Keras object,
        # a step handed modules: analysis.compile.frameworks)
        split = split_model(model, first, filename)
        loaded = LoadedModel(split.fn, split.inputs, source, filename, job.name, mf.description, split.library,
                             split.parameters, mf.module, split.state)
        bundle = compile_model(loaded, job.backend, job.compiler_options, say,
                               source_kind="gallery" if not job.source else "code").bundle
        say("sweep")
        events = _CompileEvents()
        t0 = time.perf_counter()
        plain, plain_calls = _one_pass(model, split.fn, make, lengths, None, axes_for, device, filename, events, say)
        bucketed, bucketed_calls = _one_pass(model, split.fn, make, lengths, buckets, axes_for, device, filename, events, say)
        say("sweep:cached calls")
        _time_cached(plain, plain_calls, bucketed, bucketed_calls, repeats)
        bundle.metrics["shape_sweep"] = {
            "lengths": lengths, "buckets": sorted(buckets), "repeats": repeats,
            "count_method": "jit cache size" if hasattr(jax.jit(split.fn), "_cache_size") else "distinct shapes",
            "plain": plain, "bucketed": bucketed, "summary": summary(plain, bucketed),
            "verdict": verdict(plain, bucketed),
            "seconds": time.perf_counter() - t0,
        }
        return bundle
