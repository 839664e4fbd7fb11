"""Measuring: run a compiled program under ``jax.profiler`` and attribute every kernel.

``measure`` runs a ``Compiled`` (``analysis.compile.stages``): warm-up, wall-clock timed calls,
then a few calls (``TRACED_STEPS``) under the profiler; the trace is read back with
``jax.profiler.ProfileData`` and attributed by ``analysis.timing.profiles`` (pure). The device's peaks
come from the data-sheet table (``analysis.devices.catalog``) or, on a CPU or unknown device, from a
short calibration handed in by the caller (the service keeps one per machine in its store) or
made here once per process.
"""

from __future__ import annotations

import base64
import glob
import math
import os
import platform as _platform
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp

from analysis.compile.stages import FULL_OPTIMIZATION, Compiled, recompile
from analysis.devices.catalog import table_peaks
from analysis.errors import ExplorerError
from analysis.program.kernels import Kernel
from analysis.measures import spread
from analysis.timing.profiles import attribute, coverage_note, events_from_profile

TRACE_EMBED_LIMIT = 5 * 1024 * 1024  # bytes of trace.json.gz embedded as base64 in the bundle

GPU_MEASURE_OPTIONS = {"xla_gpu_enable_command_buffer": ""}

# Calls run under the profiler. The step is timed by wall clock over all ``iterations``; the
# trace only has to attribute each kernel's share and spread, and a few steps do that: tracing
# every call made a measurement several times its timed work, every event collected, read and
# attributed (docs/performance.md).
TRACED_STEPS = 10

def machine_key(environment: dict) -> str:
    """The machine and device a calibration holds for."""
    return "|".join(str(x) for x in (_platform.node(), environment.get("platform"),
                                    environment.get("device_kind"), os.cpu_count(),
                                    environment.get("jaxlib")))


class Calibrations:
    """Calibrated peaks by machine, for one process (a worker measures once; a test session or
    a benchmark many times). The service keeps them across processes in its store."""

    def __init__(self):
        self._by_machine: dict[str, dict] = {}

    def get(self, environment: dict, device=None) -> dict:
        key = machine_key(environment)
        if key not in self._by_machine:
            p = calibrate_peaks(device)
            p["device_kind"] = environment.get("device_kind")
            p["machine"] = key
            self._by_machine[key] = p
        return self._by_machine[key]

    def remember(self, environment: dict, peaks) -> None:
        """Use ``peaks`` (made earlier on this machine, handed in by the parent) instead of
        calibrating again; ignored when they were made on another machine."""
        if isinstance(peaks, dict) and peaks.get("machine") == machine_key(environment):
            self._by_machine[peaks["machine"]] = peaks

    def clear(self) -> None:
        self._by_machine.clear()


CALIBRATIONS = Calibrations()


def device_peaks(environment: dict, device=None, calibrations: Calibrations | None = None) -> dict | None:
    """Peaks for the measured device: the data-sheet table for a known GPU, else a calibration
    (made once per machine and process, or handed in through ``Calibrations.remember``)."""
    if environment.get("platform") == "gpu":
        p = table_peaks(environment.get("device_kind", ""))
        if p is not None:
            return p
    return (calibrations or CALIBRATIONS).get(environment, device)


def calibrate_peaks(device=None) -> dict:
    """About a second of a large elementwise scale, the same scale over working sets that fit in
    each of the CPU's caches, and a large f32 matmul: the best achieved bytes/s and FLOP/s stand
    in for the device's roofs (rates an XLA kernel can reach). Each rate keeps the spread of its
    runs (``spread``: median and middle half), so the page can say how steady the roof was."""
    device = device or jax.devices()[0]
    n = 32 * 1024 * 1024  # 128 MiB of f32 in, 128 MiB out
    # Donated, so the output reuses the input's memory: a fresh 128 MiB output would be
    # first-touch page faults, not memory bandwidth.
    # (at XLA's default optimization, whatever XLA_FLAGS says: stages.FULL_OPTIMIZATION)
    scale = jax.jit(lambda v: v * 1.0001, donate_argnums=0, compiler_options=FULL_OPTIMIZATION)
    state = {"x": jax.device_put(jnp.ones((n,), jnp.float32), device)}

    def step():
        state["x"] = scale(state["x"])
        return state["x"]

    bw, bw_runs = _rates(step, 2 * 4 * n, budget_s=0.4)
    del state
    levels = [_cache_level(name, size, device) for name, size in cache_sizes()]
    m = 1024
    a = jax.device_put(jnp.ones((m, m), jnp.float32), device)
    mm = jax.jit(lambda u, v: u @ v, compiler_options=FULL_OPTIMIZATION)
    fl, fl_runs = _rates(lambda: mm(a, a), 2 * m ** 3, budget_s=0.5)
    del a
    return {"source": "calibrated", "memory_bytes_per_s": bw, "flops_per_s": {"matmul": fl},
            "memory_levels": [lv for lv in levels if lv is not None],
            "spread": {"memory": _spread_of(bw_runs), "matmul": _spread_of(fl_runs)},
            "note": f"calibrated: best of an in-place {4 * n >> 20} MiB f32 scale (read + write), the same in "
                    f"each cache, and a {m}x{m} f32 matmul"}


# Passes over one cache-sized buffer inside one call: the call's dispatch, paid once, is small
# next to them, as it is for a kernel timed by the profiler.
CACHE_PASSES = 64


def cache_sizes() -> list[tuple[str, int]]:
    """The CPU's second-level cache, ``[("L2", bytes)]``, as the C library reports it (glibc's
    ``sysconf(_SC_LEVEL2_CACHE_SIZE)``, read from the CPU itself: the same in the app's sandboxed
    worker, which cannot read sysfs, and in the CLI), empty where it does not. The first level is
    left out (one pass over it is shorter than a loop trip's own cost), and the third too: glibc
    gives the whole package's, not the part one core's data can fill (320 MiB against sysfs's
    32 MiB on a 2-core VM), so a kernel past the L2 is weighed against memory's roof."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.sysconf.restype = ctypes.c_long
        size = int(libc.sysconf(_SC_LEVEL2_CACHE_SIZE))
    except (OSError, AttributeError, ValueError):
        return []
    return [("L2", size)] if 0 < size < 2 ** 32 else []


_SC_LEVEL2_CACHE_SIZE = 191  # glibc's <bits/confname.h>


def _cache_level(name: str, size: int, device) -> dict | None:
    """The bandwidth of an in-place scale over a buffer half the cache's size (the rest holds
    what else runs), ``CACHE_PASSES`` passes in one call."""
    n = max(1024, size // 2 // 4)
    body = jax.jit(lambda v: jax.lax.fori_loop(0, CACHE_PASSES, lambda i, u: u * 1.0001, v),
                   donate_argnums=0, compiler_options=FULL_OPTIMIZATION)
    state = {"x": jax.device_put(jnp.ones((n,), jnp.float32), device)}

    def step():
        state["x"] = body(state["x"])
        return state["x"]

    try:
        bw, runs = _rates(step, 2 * 4 * n * CACHE_PASSES, budget_s=0.2)
    except Exception:  # noqa: BLE001 - a cache roof is a refinement; memory's stays
        return None
    return {"name": f"{name} cache", "bytes": size, "buffer_bytes": 4 * n, "bytes_per_s": bw,
            "spread": _spread_of(runs)}


def _spread_of(rates: list[float]) -> dict:
    s = spread(rates)
    return {"median": s.median, "q1": s.q1, "q3": s.q3, "n": s.n} if s else {}


def _rates(fn, work: float, budget_s: float) -> tuple[float, list[float]]:
    """The best rate of ``fn`` doing ``work`` and every run's rate (at least 3, at most 50 runs
    within ``budget_s``)."""
    jax.block_until_ready(fn())
    times = []
    t_end = time.perf_counter() + budget_s
    while len(times) < 3 or (time.perf_counter() < t_end and len(times) < 50):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    rates = [work / x for x in times if x > 0]
    return (max(rates) if rates else 0.0), rates


# The fusion comparison's calls (docs/numbers.md, "Verdicts"): the two sides called in turn until
# their interquartile ranges part, at least ALTERNATE_MIN calls each, at most ALTERNATE_MAX each
# or ALTERNATE_BUDGET_S of calls in all, whichever comes first.
ALTERNATE_MIN = 15
ALTERNATE_MAX = 400
ALTERNATE_BUDGET_S = 4.0


def alternate_calls(call_a, call_b, budget_s: float = ALTERNATE_BUDGET_S, min_calls: int = ALTERNATE_MIN,
                    max_calls: int = ALTERNATE_MAX) -> dict:
    """Wall clock of ``call_a`` and ``call_b`` (each blocks until its result is ready) called in
    turn, the order swapped every round so a drift in the machine's load falls on both alike.
    Stops once the two interquartile ranges part (after ``min_calls`` each), or at ``max_calls``
    each, or when ``budget_s`` has passed. Returns ``{"a": [s...], "b": [s...], "stopped":
    "parted" | "calls" | "time", "budget_s"}``: the verdict is read from the numbers alone
    (``measures.fusion_verdict``), the stop only says why there were that many."""
    call_a()
    call_b()  # warm: the first call of each pays for what the timed ones must not
    a, b = [], []
    t_end = time.perf_counter() + budget_s
    stopped = "calls"
    for i in range(max_calls):
        for which in ((a, call_a), (b, call_b)) if i % 2 == 0 else ((b, call_b), (a, call_a)):
            t0 = time.perf_counter()
            which[1]()
            which[0].append(time.perf_counter() - t0)
        if len(a) >= min_calls:
            sa, sb = spread(a), spread(b)
            if sa.parts_from(sb):
                stopped = "parted"
                break
            if time.perf_counter() >= t_end:
                stopped = "time"
                break
    return {"a": a, "b": b, "stopped": stopped, "budget_s": budget_s}


def default_iterations(step_s: float, target_s: float = 0.8) -> int:
    if step_s <= 0:
        return 200
    return int(min(500, max(3, round(target_s / step_s))))


def run_measurement(compiled, args, kernels: list[Kernel], platform: str, module_name: str | None,
                    iterations: int | None = None, peaks: dict | None = None,
                    keep_trace: bool = True) -> dict:
    """Warm up, time ``iterations`` calls wall-clock, then at most ``TRACED_STEPS`` calls under
    the profiler; attribute the trace. Returns the ``timings`` dict."""
    def call():
        return jax.block_until_ready(compiled(*args))

    t0 = time.perf_counter()
    call()
    call()
    first = time.perf_counter() - t0
    probe = []
    for _ in range(3):
        t = time.perf_counter()
        call()
        probe.append(time.perf_counter() - t)
    n = int(iterations) if iterations else default_iterations(min(probe))
    if n < 1:
        raise ExplorerError("options", f"--iters must be at least 1, not {iterations}")

    wall = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        wall.append(time.perf_counter() - t)

    traced_wall = []
    traced = min(n, TRACED_STEPS)
    with tempfile.TemporaryDirectory(prefix="xla-explorer-trace-") as d:
        opts = _trace_options(platform)
        if opts is not None:
            jax.profiler.start_trace(d, profiler_options=opts)
        else:
            jax.profiler.start_trace(d)
        try:
            for _ in range(traced):
                t = time.perf_counter()
                call()
                traced_wall.append(time.perf_counter() - t)
        finally:
            jax.profiler.stop_trace()
        pbs = glob.glob(os.path.join(d, "**", "*.xplane.pb"), recursive=True)
        if not pbs:
            raise ExplorerError("measure", "the profiler wrote no trace (is another profile running?)")
        pd = jax.profiler.ProfileData.from_file(max(pbs, key=os.path.getmtime))
        events = events_from_profile(pd, platform)
        trace = _trace_payload(d) if keep_trace else {}

    measured = attribute(events, kernels, traced, platform, module_name, peaks)
    calls = spread(wall)
    out = {
        "iterations": n,
        "traced_steps": traced,
        "warmup_s": first,
        "call_median_s": calls.median, "call_q1_s": calls.q1, "call_q3_s": calls.q3,
        "call_min_s": calls.lo, "call_mean_s": statistics.fmean(wall),
        "traced_call_median_s": statistics.median(traced_wall),
        **{k: v for k, v in measured.items() if k not in ("kernels",)},
        "coverage_note": None,
        "peaks": peaks,
        "events_seen": len(events),
        "kernels": measured["kernels"],
        **trace,
    }
    out["coverage_note"] = coverage_note(out, platform)
    return out


def _trace_options(platform: str):
    """The profiler's options for the traced calls. On the CPU, no HLO protos in the trace:
    the attribution reads each event's own ``hlo_op`` / ``hlo_module``, and writing and reading
    the protos was most of the tracing's cost for a big program (the same events and every
    kernel timed as before: docs/performance.md). Elsewhere the defaults,
    until the same is checked on a GPU. None when this JAX has no such option."""
    if platform != "cpu":
        return None
    try:
        opts = jax.profiler.ProfileOptions()
        opts.enable_hlo_proto = False
    except (AttributeError, TypeError):
        return None
    return opts


def _trace_payload(d: str) -> dict:
    """The Perfetto/Chrome trace, embedded when it is small enough (a bundle stays a few MB;
    a bigger trace is not kept, and the bundle says how big it was)."""
    gz = glob.glob(os.path.join(d, "**", "*.trace.json.gz"), recursive=True)
    if not gz:
        return {"trace_json_gz_b64": None, "trace_json_gz_bytes": 0}
    path = max(gz, key=os.path.getmtime)
    size = os.path.getsize(path)
    if size > TRACE_EMBED_LIMIT:
        return {"trace_json_gz_b64": None, "trace_json_gz_bytes": size}
    with open(path, "rb") as f:
        return {"trace_json_gz_b64": base64.b64encode(f.read()).decode("ascii"), "trace_json_gz_bytes": size}


def measure(c: Compiled, iterations: int | None = None, calibrations: Calibrations | None = None) -> Compiled:
    """Run the compiled program and fill ``c.bundle.timings`` (see docs/bundle.md). On GPU the
    program is recompiled with command buffers off so every kernel is its own trace event."""
    if not c.runnable():
        raise ExplorerError("measure", "this compile has no program to run here (it was compiled for a "
                                       "device that is not present); measure where it is compiled")
    bundle = c.bundle
    platform = bundle.platform
    run = c
    measured_compile = {"compiler_options": dict(bundle.options.get("compiler_options") or {}),
                        "same_hlo_as_bundle": True, "command_buffers_disabled": False}
    if platform == "gpu":
        opts = bundle.options.get("compiler_options") or {}
        if any(opts.get(k) != v for k, v in GPU_MEASURE_OPTIONS.items()):
            run = recompile(c, GPU_MEASURE_OPTIONS)
            measured_compile["compiler_options"] = dict(run.bundle.options.get("compiler_options") or {})
            measured_compile["same_hlo_as_bundle"] = run.bundle.stages.get("hlo_after") == bundle.stages.get("hlo_after")
        measured_compile["command_buffers_disabled"] = True
    leaves = jax.tree_util.tree_leaves(run.args)
    device = next(iter(leaves[0].devices())) if leaves and hasattr(leaves[0], "devices") else None
    peaks = device_peaks(bundle.environment, device, calibrations)
    module = run.bundle.module("hlo_after")
    t = run_measurement(run.executable, run.args, run.bundle.kernels, platform,
                        module.name if module is not None else None, iterations, peaks)
    t["platform"] = platform
    t["measured_compile"] = measured_compile
    if measured_compile["command_buffers_disabled"]:
        t["command_buffer_note"] = ("Measured with CUDA command buffers disabled "
                                    "(xla_gpu_enable_command_buffer=\"\") so every kernel is timed "
                                    "on its own; with them on, launches are batched and steps may be faster.")
    bundle.timings = t
    return c
