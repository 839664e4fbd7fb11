"""Measured kernel timings, device peaks (roofline) and what fusion saved.

``measure_bundle`` runs a bundle's compiled executable (left by ``analysis.compile.lower`` in
``bundle.__dict__['_compiled']`` with its arguments in ``['_args']``) under ``jax.profiler``,
reads the trace back with ``jax.profiler.ProfileData`` and attributes every event to the
optimized module's instruction named by its ``hlo_op`` stat -- never by kernel name.
``compare_fusion`` compiles the same program with the backend's fusion passes disabled and
measures it the same way. Both write plain JSON values into the Bundle (schema in
``docs/bundle.md``, sections "timings" and "fusion_comparison").

JAX is imported only inside the functions that run something; ``attribute``,
``parse_kernel_details``, ``table_peaks`` and the other helpers are pure and work on
recorded data.

What a trace contains (explored with jax/jaxlib 0.10.2 on CPU)
--------------------------------------------------------------
``start_trace(dir)``/``stop_trace()`` write ``dir/plugins/profile/<YYYY_MM_DD_hh_mm_ss>/<host>.xplane.pb``
and ``<host>.trace.json.gz`` (Chrome/Perfetto JSON, written even without
``create_perfetto_trace``). ``ProfileData.from_file(xplane)`` gives ``planes`` (iterable, not
indexable) -> ``lines`` -> ``events``; an event has ``name``, ``start_ns`` and ``duration_ns``
(floats, relative to the trace start) and ``stats``, an iterable of ``(name, value)`` pairs in
which a name can repeat (``_src`` twice).

Planes on CPU: ``/host:metadata`` (stats ``jax_version``, ``jaxlib_version``, ``cpu_version``),
``Task Environment`` (``profile_start_time``/``profile_stop_time``) and ``/host:CPU`` with one
line per thread:

- ``python``: the caller's thread: Python frames (``$api.py:2479 block_until_ready``), and
  PjRt host work (``PjitFunction(jit(model))``, ``ParseArguments``,
  ``CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice``, ``CommonPjRtBuffer::Await``).
- ``tf_XLAPjRtCpuClient/<id>``: XLA:CPU's thunk executor. **One event per executed thunk**,
  named after the HLO instruction (``ynn_fusion.1``, ``broadcast_maximum_fusion``, ``copy.8``,
  ``while.9``, ``cond.1.clone``), with stats ``hlo_op`` (the same name), ``hlo_module``
  (``jit_model``), ``program_id`` (an int), ``run_id`` (one value per execution: our step key),
  ``device_ordinal``, ``_p``/``_pt`` (flow ids). Each is followed by a short
  ``end: <name>`` event without ``hlo_op``. Control flow nests: the ``while.9`` event spans
  the events of its body thunks (one per trip: a 5-trip ``fori_loop`` shows each body kernel
  5 times), a ``conditional`` spans the taken branch's thunks. A ``while`` with a known trip
  count does not run its condition computation at all.
- ``tf_XLAEigen/<id>``: Eigen/YNNPACK worker threads; only ``ThreadpoolListener::StartRegion``
  / ``StopRegion`` markers (a kernel's parallel work is inside its thunk's span on the executor
  line), no ``hlo_op``.

So on CPU the per-kernel time is the thunk's span; "device busy" is the union of the spans of
the module's thunks in one execution (thunks may overlap on several executor threads).

On GPU (from xla-notes, not runnable here): kernel events on ``/device:GPU:N`` planes, lines
``Stream #N(...)``, with ``hlo_op`` (nested names joined by ``::``; the innermost is the
instruction), ``hlo_module``, ``program_id``, ``kernel_details``, ``correlation_id``; one
instruction may launch several kernels. Derived lines ("XLA Ops", "XLA Modules", ...) would
double count and are skipped. ``run_id`` may be missing there; steps are then cut from the
time-ordered launches (each step launches the same number of kernels).
"""

from __future__ import annotations

import base64
import glob
import json
import math
import os
import platform as _platform
import re
import statistics
import tempfile
import time
from typing import Any, Iterable, NamedTuple

from analysis.errors import ExplorerError
from analysis.kernels import Kernel

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACE_EMBED_LIMIT = 5 * 1024 * 1024  # bytes of trace.json.gz embedded as base64 in the bundle
TIMELINE_LIMIT = 4000  # events of the one-step timeline kept in the bundle
LOW_ATTRIBUTION = 0.8
LOW_BUSY = 0.5

# ----------------------------------------------------------------------------- fusion passes

# The fusion passes per backend live in analysis.options (one place for the UI and here).
from analysis.options import FUSION_PASSES  # noqa: E402

FUSION_NOTES = {
    "cpu": "With fusion off, dots also lose their YNNPACK library fusion and run through Eigen.",
    "gpu": "With fusion off, dots that Triton would have fused go to cuBLAS and normalizations "
           "lose their one-kernel Triton form; a bias/activation epilogue folded into a cuBLAS "
           "call comes from gemm-rewriter and stays, as does a split-K dot's reduction.",
}
GPU_MEASURE_OPTIONS = {"xla_gpu_enable_command_buffer": ""}

# ----------------------------------------------------------------------------- device peaks

# Dense (no sparsity) peaks from NVIDIA's data sheets; memory in bytes/s, compute in FLOP/s.
# Matched against jax's ``device_kind`` by substring, first match wins (so more specific first).
_T = 1e12
GPU_PEAKS: tuple[tuple[str, dict], ...] = (
    # NVIDIA GH200 data sheet (96 GB HBM3 variant; the 144 GB HBM3e one has 4.9 TB/s).
    ("GH200", {"memory": 4.0e12, "fp32": 67 * _T, "tf32": 494.7 * _T, "bf16": 989.4 * _T}),
    # NVIDIA H200 data sheet (SXM): 4.8 TB/s; tensor numbers there are with sparsity, halved here.
    ("H200", {"memory": 4.8e12, "fp32": 67 * _T, "tf32": 494.7 * _T, "bf16": 989.4 * _T}),
    # NVIDIA H100 data sheet: PCIe 2.0 TB/s, NVL 3.9 TB/s, SXM5 3.35 TB/s.
    ("H100 PCIe", {"memory": 2.0e12, "fp32": 51 * _T, "tf32": 378 * _T, "bf16": 756 * _T}),
    ("H100 NVL", {"memory": 3.9e12, "fp32": 60 * _T, "tf32": 417.5 * _T, "bf16": 835.5 * _T}),
    ("H100", {"memory": 3.35e12, "fp32": 67 * _T, "tf32": 494.7 * _T, "bf16": 989.4 * _T}),
    # NVIDIA B200 (DGX B200 data sheet divided by 8; approximate).
    ("B200", {"memory": 8.0e12, "fp32": 75 * _T, "tf32": 1100 * _T, "bf16": 2250 * _T}),
    # NVIDIA A100 data sheet: 40 GB 1.555 TB/s, 80 GB PCIe 1.935 TB/s, 80 GB SXM 2.039 TB/s.
    ("A100-SXM4-40GB", {"memory": 1.555e12, "fp32": 19.5 * _T, "tf32": 156 * _T, "bf16": 312 * _T}),
    ("A100-PCIE-40GB", {"memory": 1.555e12, "fp32": 19.5 * _T, "tf32": 156 * _T, "bf16": 312 * _T}),
    ("A100 80GB PCIe", {"memory": 1.935e12, "fp32": 19.5 * _T, "tf32": 156 * _T, "bf16": 312 * _T}),
    ("A100", {"memory": 2.039e12, "fp32": 19.5 * _T, "tf32": 156 * _T, "bf16": 312 * _T}),
    # NVIDIA L40S / L40 / L4 data sheets.
    ("L40S", {"memory": 864e9, "fp32": 91.6 * _T, "tf32": 183 * _T, "bf16": 362 * _T}),
    ("L40", {"memory": 864e9, "fp32": 90.5 * _T, "tf32": 90.5 * _T, "bf16": 181 * _T}),
    ("L4", {"memory": 300e9, "fp32": 30.3 * _T, "tf32": 60 * _T, "bf16": 121 * _T}),
    # NVIDIA A10 / A10G data sheets (A10G: AWS's variant, same memory system).
    ("A10", {"memory": 600e9, "fp32": 31.2 * _T, "tf32": 62.5 * _T, "bf16": 125 * _T}),
    # NVIDIA V100 (SXM2) and T4 data sheets: no TF32/BF16; FP16 tensor cores.
    ("V100", {"memory": 900e9, "fp32": 15.7 * _T, "fp16": 125 * _T}),
    ("T4", {"memory": 320e9, "fp32": 8.1 * _T, "fp16": 65 * _T}),
    # NVIDIA GeForce RTX 4090 (Ada whitepaper, FP16 tensor with FP32 accumulate).
    ("RTX 4090", {"memory": 1008e9, "fp32": 82.6 * _T, "tf32": 82.6 * _T, "bf16": 165.2 * _T}),
)


def table_peaks(device_kind: str) -> dict | None:
    """Peaks of a known GPU, as the ``peaks`` schema (see docs/bundle.md), or None."""
    for pattern, p in GPU_PEAKS:
        if pattern.lower() in (device_kind or "").lower():
            return {"source": "table", "device_kind": device_kind, "matched": pattern,
                    "memory_bytes_per_s": p["memory"],
                    "flops_per_s": {k: v for k, v in p.items() if k != "memory"},
                    "note": "NVIDIA data-sheet peaks (dense, no sparsity)"}
    return None


def data_dir() -> str:
    return os.environ.get("XLA_EXPLORER_DATA") or os.path.join(REPO_ROOT, "data")


def _machine_key(environment: dict) -> str:
    return "|".join(str(x) for x in (_platform.node(), environment.get("platform"),
                                    environment.get("device_kind"), os.cpu_count(),
                                    environment.get("jaxlib")))


_REMEMBERED: dict[str, dict] = {}


def remember_peaks(environment: dict, peaks: dict) -> None:
    """Use ``peaks`` (a calibration made earlier on this machine, handed in by the parent) for
    this machine instead of calibrating again."""
    if isinstance(peaks, dict) and peaks.get("machine") == _machine_key(environment):
        _REMEMBERED[peaks["machine"]] = peaks


def device_peaks(environment: dict, device=None, calibrate: bool = True) -> dict | None:
    """Peaks for the measured device: the GPU table, else a calibration cached per machine
    in ``<data dir>/peaks.json`` (or handed in through ``remember_peaks``)."""
    p = table_peaks(environment.get("device_kind", "")) if environment.get("platform") == "gpu" else None
    if p is not None or not calibrate:
        return p
    path = os.path.join(data_dir(), "peaks.json")
    key = _machine_key(environment)
    if key in _REMEMBERED:
        return _REMEMBERED[key]
    cache: dict = {}
    try:
        with open(path) as f:
            cache = json.load(f)
    except (OSError, ValueError):
        cache = {}
    if isinstance(cache.get(key), dict):
        return cache[key]
    p = calibrate_peaks(device)
    p["device_kind"] = environment.get("device_kind")
    p["machine"] = key
    cache[key] = p
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(cache, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only data dir only costs a re-calibration next time
    return p


def calibrate_peaks(device=None) -> dict:
    """About a second of a large elementwise copy and a large f32 matmul: the best achieved
    bytes/s and FLOP/s stand in for the device's peaks (roofs an XLA kernel can reach)."""
    import jax
    import jax.numpy as jnp

    device = device or jax.devices()[0]
    n = 32 * 1024 * 1024  # 128 MiB of f32 in, 128 MiB out
    # Donated, so the output reuses the input's memory: a fresh 128 MiB output would be
    # first-touch page faults, not memory bandwidth.
    scale = jax.jit(lambda v: v * 1.0001, donate_argnums=0)
    state = {"x": jax.device_put(jnp.ones((n,), jnp.float32), device)}

    def step():
        state["x"] = scale(state["x"])
        return state["x"]

    bw = _best_rate(step, 2 * 4 * n, budget_s=0.4)
    m = 1024
    a = jax.device_put(jnp.ones((m, m), jnp.float32), device)
    mm = jax.jit(lambda u, v: u @ v)
    fl = _best_rate(lambda: mm(a, a), 2 * m ** 3, budget_s=0.5)
    del state, a
    return {"source": "calibrated", "memory_bytes_per_s": bw, "flops_per_s": {"matmul": fl},
            "note": f"calibrated: best of an in-place {4 * n >> 20} MiB f32 scale (read + write) and a {m}x{m} f32 matmul"}


def _best_rate(fn, work: float, budget_s: float) -> float:
    import jax

    jax.block_until_ready(fn())
    best = math.inf
    t_end = time.perf_counter() + budget_s
    reps = 0
    while reps < 3 or (time.perf_counter() < t_end and reps < 50):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
        reps += 1
    return work / best if best > 0 else 0.0


_DTYPE = re.compile(r"\b(pred|s4|s8|s16|s32|s64|u4|u8|u16|u32|u64|f8e\w+|bf16|f16|f32|f64|c64|c128)\[")
MATMUL_OPS = ("dot", "convolution")


def is_matmul(k: Kernel) -> bool:
    t = (k.custom_call_target or "").lower()
    return (k.opcode in MATMUL_OPS or any(o in MATMUL_OPS for o in k.fused_opcodes)
            or "gemm" in t or "matmul" in t or "conv" in t)


def peak_flops_key(k: Kernel, peaks: dict | None) -> str | None:
    """Which of ``peaks['flops_per_s']`` bounds this kernel's compute."""
    if not peaks:
        return None
    avail = peaks.get("flops_per_s") or {}
    m = _DTYPE.search(k.shape or "")
    dtype = m.group(1) if m else "f32"
    if is_matmul(k):
        prefs = {"bf16": ("bf16", "fp16"), "f16": ("fp16", "bf16")}.get(dtype, ("tf32", "fp32"))
        prefs = prefs + ("matmul",)
    else:
        prefs = ("fp32", "vector", "matmul")
    for p in prefs:
        if p in avail:
            return p
    return next(iter(avail), None)


# ----------------------------------------------------------------------------- trace events


class TraceEvent(NamedTuple):
    """One profiler event that names an HLO instruction (extracted from ProfileData)."""

    name: str            # the event's own name (GPU: the device kernel's name)
    hlo_op: str          # the ``hlo_op`` stat as written (maybe ``a::b`` when nested)
    hlo_module: str
    program_id: int | None
    start_ns: float
    duration_ns: float
    line: str = ""       # thread (CPU) or stream (GPU) line name
    run_id: int | None = None
    stats: dict = {}

    @property
    def instruction(self) -> str:
        return innermost(self.hlo_op)


def innermost(hlo_op: str) -> str:
    return hlo_op.rsplit("::", 1)[-1].strip()


DERIVED_LINES = ("XLA Modules", "XLA Ops", "XLA TraceMe", "Steps", "Framework Ops",
                 "Framework Name Scope", "Source code", "Launch Stats", "TensorFlow Ops")


def _int_or_none(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def events_from_profile(pd, platform: str) -> list[TraceEvent]:
    """Events carrying ``hlo_op`` from the planes where the kernels run: ``/host:CPU`` on
    CPU, ``/device:GPU:N`` stream lines on GPU."""
    out: list[TraceEvent] = []
    for plane in pd.planes:
        pname = plane.name
        if platform == "gpu":
            if not pname.startswith("/device:GPU:"):
                continue
        elif not pname.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            lname = line.name or ""
            if platform == "gpu" and lname in DERIVED_LINES:
                continue
            for e in line.events:
                st = dict(e.stats)
                op = st.get("hlo_op")
                if not op:
                    continue
                st.pop("_src", None)
                out.append(TraceEvent(
                    name=e.name, hlo_op=str(op), hlo_module=str(st.get("hlo_module", "")),
                    program_id=_int_or_none(st.get("program_id")), start_ns=float(e.start_ns),
                    duration_ns=float(e.duration_ns), line=f"{pname} {lname}" if platform == "gpu" else lname,
                    run_id=_int_or_none(st.get("run_id")),
                    stats={k: v for k, v in st.items() if k in ("kernel_details", "correlation_id",
                                                                "device_ordinal", "memcpy_details")},
                ))
    return out


def parse_kernel_details(text: Any) -> dict:
    """``kernel_details`` (GPU) -> {registers, shared memory, grid, block, occupancy, ...}.
    The stat is ``key:value`` pairs separated by whitespace or newlines; values like
    ``1,2,1`` become lists. Unknown keys are kept; the raw text too."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str) or not text.strip():
        return {}
    out: dict = {"raw": text}
    for tok in re.split(r"[\s;]+", text.strip()):
        if ":" not in tok:
            continue
        k, v = tok.split(":", 1)
        vals = [_num(x) for x in v.split(",") if x != ""]
        out[k] = vals if len(vals) > 1 else (vals[0] if vals else v)
    return out


def _num(x: str):
    try:
        return int(x)
    except ValueError:
        try:
            return float(x)
        except ValueError:
            return x


# ----------------------------------------------------------------------------- attribution


def _union_ns(intervals: Iterable[tuple[float, float]]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def select_program(events: list[TraceEvent], module_name: str | None) -> tuple[str | None, int | None]:
    """The (hlo_module, program_id) measured: the module's name if it appears, the pair with
    the most events among those."""
    from collections import Counter

    pairs = Counter((e.hlo_module, e.program_id) for e in events)
    if not pairs:
        return None, None
    named = {p: n for p, n in pairs.items() if module_name and p[0] == module_name}
    best = max((named or pairs).items(), key=lambda kv: kv[1])[0]
    return best


def split_steps(events: list[TraceEvent], iterations: int) -> list[list[TraceEvent]]:
    """Events of one program grouped per execution: by ``run_id`` when every event has one,
    else the time-ordered events cut into ``iterations`` equal parts (each execution of a
    program launches the same kernels, unless control flow depends on data)."""
    if not events:
        return []
    if all(e.run_id is not None for e in events):
        groups: dict[int, list[TraceEvent]] = {}
        for e in sorted(events, key=lambda e: e.start_ns):
            groups.setdefault(e.run_id, []).append(e)
        return list(groups.values())
    evs = sorted(events, key=lambda e: e.start_ns)
    n = max(1, iterations)
    if len(evs) % n:
        # Uneven: cut by time gaps -- the n-1 largest gaps between launches separate the steps.
        if len(evs) < n:
            return [evs]
        gaps = sorted(range(1, len(evs)), key=lambda i: -(evs[i].start_ns - (evs[i - 1].start_ns + evs[i - 1].duration_ns)))
        cuts = sorted(gaps[: n - 1])
        out, prev = [], 0
        for c in cuts + [len(evs)]:
            out.append(evs[prev:c])
            prev = c
        return out
    per = len(evs) // n
    return [evs[i * per:(i + 1) * per] for i in range(n)]


def _stats(xs: list[float]) -> dict:
    return {"median_s": statistics.median(xs), "min_s": min(xs), "mean_s": statistics.fmean(xs),
            "std_s": statistics.pstdev(xs) if len(xs) > 1 else 0.0, "total_s": sum(xs)}


def attribute(events: list[TraceEvent], kernels: list[Kernel], iterations: int, platform: str,
              module_name: str | None = None, peaks: dict | None = None) -> dict:
    """Per-kernel and per-step numbers from recorded events (pure; no JAX).

    Returns the measured part of the ``timings`` schema: ``steps_seen``, ``device_busy_s``,
    ``attributed_busy_s``, ``attributed_fraction``, ``kernels`` (rows by instruction name),
    ``unattributed`` (instruction names in the trace that are not kernels of the module),
    ``not_run`` (kernels never seen), ``timeline`` (one median step)."""
    module, program = select_program(events, module_name)
    evs = [e for e in events if (e.hlo_module, e.program_id) == (module, program)]
    by_name = {k.name: k for k in kernels}
    steps = split_steps(evs, iterations)
    n_steps = len(steps)
    control = {k.name for k in kernels if k.route == "control"}

    per_kernel_steps: dict[str, list[float]] = {}
    per_kernel_launches: dict[str, list[int]] = {}
    per_kernel_calls: dict[str, list[float]] = {}
    kernel_names: dict[str, dict[str, dict]] = {}
    busy, attributed = [], []
    unattributed: dict[str, float] = {}
    for si, step in enumerate(steps):
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        names_in_step: dict[str, set] = {}
        for e in step:
            inst = e.instruction
            sums[inst] = sums.get(inst, 0.0) + e.duration_ns * 1e-9
            counts[inst] = counts.get(inst, 0) + 1
            names_in_step.setdefault(inst, set()).add(e.name)
            if platform == "gpu":
                d = kernel_names.setdefault(inst, {})
                if e.name not in d:
                    d[e.name] = parse_kernel_details(e.stats.get("kernel_details"))
            if inst not in by_name:
                unattributed[inst] = unattributed.get(inst, 0.0) + e.duration_ns * 1e-9
        for inst in set(per_kernel_steps) | set(sums):
            per_kernel_steps.setdefault(inst, [0.0] * si).append(sums.get(inst, 0.0))
            per_kernel_launches.setdefault(inst, [0] * si).append(counts.get(inst, 0))
            # On GPU one execution of an instruction may launch several distinct kernels.
            distinct = max(1, len(names_in_step.get(inst, ()))) if platform == "gpu" else 1
            per_kernel_calls.setdefault(inst, [0.0] * si).append(counts.get(inst, 0) / distinct)
        busy.append(_union_ns((e.start_ns, e.start_ns + e.duration_ns) for e in step) * 1e-9)
        attributed.append(_union_ns((e.start_ns, e.start_ns + e.duration_ns) for e in step
                                    if e.instruction in by_name and e.instruction not in control) * 1e-9)

    busy_total = sum(busy)
    busy_med = statistics.median(busy) if busy else 0.0
    rows: dict[str, dict] = {}
    for inst, per_step in per_kernel_steps.items():
        k = by_name.get(inst)
        st = _stats(per_step)
        calls = statistics.median(per_kernel_calls[inst])
        launches = statistics.median(per_kernel_launches[inst])
        total_calls = sum(per_kernel_calls[inst])
        row = {
            "name": inst,
            "route": k.route if k else "unknown",
            "library": k.library if k else None,
            "context": k.context if k else "",
            "inclusive": inst in control,  # control flow: its time includes the kernels it runs
            "calls": calls,
            "launches": launches,
            **st,
            "per_call_s": st["total_s"] / total_calls if total_calls else None,
            "share": (st["total_s"] / busy_total) if busy_total else 0.0,
            "bytes": (k.bytes * calls) if k else None,
            "flops": (k.flops * calls) if k else None,
            "gbps": None, "flops_per_s": None, "arithmetic_intensity": None,
            "pct_of_peak": None, "peak_key": None,
            "kernel_details": None,
        }
        if k is not None and not row["inclusive"] and st["median_s"] > 0:
            if k.bytes:
                row["gbps"] = k.bytes * calls / st["median_s"] / 1e9
            if k.flops:
                row["flops_per_s"] = k.flops * calls / st["median_s"]
            if k.bytes and k.flops:
                row["arithmetic_intensity"] = k.flops / k.bytes
            if peaks:
                fkey = peak_flops_key(k, peaks)
                row["peak_key"] = fkey
                fracs = []
                if peaks.get("memory_bytes_per_s") and k.bytes:
                    fracs.append(k.bytes * calls / st["median_s"] / peaks["memory_bytes_per_s"])
                fpeak = (peaks.get("flops_per_s") or {}).get(fkey) if fkey else None
                if fpeak and k.flops:
                    fracs.append(k.flops * calls / st["median_s"] / fpeak)
                row["pct_of_peak"] = 100.0 * max(fracs) if fracs else None
        if platform == "gpu" and inst in kernel_names:
            row["kernel_details"] = kernel_names[inst]
        rows[inst] = row

    ran = set(rows)
    result = {
        "hlo_module": module, "program_id": program, "steps_seen": n_steps,
        "device_busy_s": busy_med, "device_busy_min_s": min(busy) if busy else 0.0,
        "attributed_busy_s": statistics.median(attributed) if attributed else 0.0,
        "attributed_fraction": (sum(attributed) / busy_total) if busy_total else 0.0,
        "kernels": dict(sorted(rows.items(), key=lambda kv: -kv[1]["total_s"])),
        "unattributed": {k: v / max(1, n_steps) for k, v in sorted(unattributed.items(), key=lambda kv: -kv[1])},
        "not_run": [k.name for k in kernels if k.name not in ran],
        "timeline": _timeline(steps, busy, by_name),
    }
    return result


def _timeline(steps: list[list[TraceEvent]], busy: list[float], by_name: dict[str, Kernel]) -> dict:
    """The events of the step whose device-busy time is the median, relative to its start."""
    if not steps:
        return {"step": None, "events": []}
    order = sorted(range(len(steps)), key=lambda i: busy[i])
    si = order[len(order) // 2]
    step = sorted(steps[si], key=lambda e: e.start_ns)
    t0 = step[0].start_ns
    out = []
    for e in step[:TIMELINE_LIMIT]:
        k = by_name.get(e.instruction)
        out.append({"name": e.instruction, "kernel": e.name, "start_s": (e.start_ns - t0) * 1e-9,
                    "duration_s": e.duration_ns * 1e-9, "line": e.line,
                    "route": k.route if k else "unknown"})
    return {"step": si, "events": out, "truncated": len(step) > TIMELINE_LIMIT}


# ----------------------------------------------------------------------------- measuring


def _executable(bundle):
    compiled = bundle.__dict__.get("_compiled")
    args = bundle.__dict__.get("_args")
    if compiled is None or args is None:
        raise ExplorerError("measure", "this bundle has no compiled program to run (it was loaded "
                                       "from JSON or HLO text); measure where it is compiled")
    return compiled, args


def _loaded_from_bundle(bundle):
    from analysis.compile import lower as run

    loaded = bundle.__dict__.get("_loaded")
    if loaded is not None:
        return loaded
    code = bundle.source.get("code")
    if not code:
        raise ExplorerError("measure", "the bundle carries no model source to recompile")
    return run.load_source(code, bundle.source.get("file") or "<pasted code>", bundle.title)


def _recompile(bundle, loaded, extra_options: dict):
    from analysis.compile import lower as run

    options = dict(bundle.options.get("compiler_options") or {})
    options.update(extra_options)
    other = run.compile_to_bundle(loaded, bundle.options.get("backend", "auto"), options,
                                  source_kind=bundle.source.get("kind", "code"),
                                  gpu_target=bundle.environment.get("gpu_target"))
    return other


def default_iterations(step_s: float, target_s: float = 0.8) -> int:
    if step_s <= 0:
        return 200
    return int(min(500, max(3, round(target_s / step_s))))


def run_measurement(compiled, args, kernels: list[Kernel], platform: str, module_name: str | None,
                    iterations: int | None = None, peaks: dict | None = None,
                    keep_trace: bool = True) -> dict:
    """Warm up, time ``iterations`` calls wall-clock, then ``iterations`` calls under the
    profiler; attribute the trace. Returns the ``timings`` dict."""
    import jax

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
    with tempfile.TemporaryDirectory(prefix="xla-explorer-trace-") as d:
        jax.profiler.start_trace(d)
        try:
            for _ in range(n):
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

    measured = attribute(events, kernels, n, platform, module_name, peaks)
    step_med = statistics.median(wall)
    busy = measured["device_busy_s"]
    out = {
        "iterations": n,
        "warmup_s": first,
        "step_median_s": step_med,
        "step_min_s": min(wall),
        "step_mean_s": statistics.fmean(wall),
        "step_std_s": statistics.pstdev(wall) if n > 1 else 0.0,
        "traced_step_median_s": statistics.median(traced_wall),
        **{k: v for k, v in measured.items() if k not in ("kernels",)},
        # Against the traced calls' wall clock: the events and that clock come from the same calls.
        "busy_fraction": (busy / statistics.median(traced_wall)) if traced_wall else 0.0,
        "coverage_note": None,
        "peaks": peaks,
        "events_seen": len(events),
        "kernels": measured["kernels"],
        **trace,
    }
    out["coverage_note"] = coverage_note(out, platform)
    return out


def coverage_note(t: dict, platform: str) -> str | None:
    """A sentence for the UI when the kernel rows explain little of the step."""
    if not t.get("kernels"):
        return ("The profiler recorded no kernel of this program: nothing to attribute "
                "(the program may be all constants, or the backend emits no per-kernel events).")
    notes = []
    af = t.get("attributed_fraction", 0.0)
    if af < LOW_ATTRIBUTION:
        un = ", ".join(list(t.get("unattributed") or {})[:3])
        notes.append(f"Only {af:.0%} of the device-busy time is in kernels of this module"
                     + (f"; the rest is in {un}" if un else "; the rest is control-flow bookkeeping") + ".")
    bf = t.get("busy_fraction", 0.0)
    if bf < LOW_BUSY:
        where = "the host (dispatch, argument handling, synchronisation)" if platform == "cpu" else \
            "launch overhead and host work between kernels"
        notes.append(f"Kernels keep the {'CPU' if platform == 'cpu' else 'device'} busy for {bf:.0%} "
                     f"of the wall-clock step; the rest is {where}. Small programs are dominated by it.")
    return " ".join(notes) or None


def _trace_payload(d: str) -> dict:
    gz = glob.glob(os.path.join(d, "**", "*.trace.json.gz"), recursive=True)
    if not gz:
        return {"trace_json_gz_b64": None, "trace_json_gz_bytes": 0, "trace_json_gz_path": None}
    path = max(gz, key=os.path.getmtime)
    size = os.path.getsize(path)
    if size <= TRACE_EMBED_LIMIT:
        with open(path, "rb") as f:
            return {"trace_json_gz_b64": base64.b64encode(f.read()).decode("ascii"),
                    "trace_json_gz_bytes": size, "trace_json_gz_path": None}
    # Too big to embed: keep it under the data dir and record where.
    dest_dir = os.path.join(data_dir(), "traces")
    try:
        os.makedirs(dest_dir, exist_ok=True)
        dest = os.path.join(dest_dir, f"{int(time.time())}-{os.getpid()}.trace.json.gz")
        with open(path, "rb") as src, open(dest, "wb") as dst:
            dst.write(src.read())
    except OSError:
        dest = None
    return {"trace_json_gz_b64": None, "trace_json_gz_bytes": size, "trace_json_gz_path": dest}


def trace_bytes(timings: dict | None) -> bytes | None:
    """The raw gzip'd Chrome/Perfetto trace of a measured bundle, if it was kept."""
    if not timings:
        return None
    b64 = timings.get("trace_json_gz_b64")
    if b64:
        return base64.b64decode(b64)
    path = timings.get("trace_json_gz_path")
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    return None


def measure_bundle(bundle, iterations: int | None = None):
    """Run the bundle's program and fill ``bundle.timings`` (see docs/bundle.md). On GPU the
    program is recompiled with command buffers off so every kernel is its own trace event."""
    compiled, args = _executable(bundle)
    platform = bundle.platform
    measured_kernels = bundle.kernels
    module = bundle.module("hlo_after")
    module_name = module.name if module is not None else None
    measured_compile = {"compiler_options": dict(bundle.options.get("compiler_options") or {}),
                        "same_hlo_as_bundle": True, "command_buffers_disabled": False}
    if platform == "gpu":
        opts = bundle.options.get("compiler_options") or {}
        if any(opts.get(k) != v for k, v in GPU_MEASURE_OPTIONS.items()):
            other = _recompile(bundle, _loaded_from_bundle(bundle), GPU_MEASURE_OPTIONS)
            compiled, args = _executable(other)
            measured_kernels = other.kernels
            measured_compile["compiler_options"] = dict(other.options.get("compiler_options") or {})
            measured_compile["same_hlo_as_bundle"] = other.stages.get("hlo_after") == bundle.stages.get("hlo_after")
        measured_compile["command_buffers_disabled"] = True
    device = None
    try:
        device = next(iter(args[0].devices())) if args and hasattr(args[0], "devices") else None
    except Exception:  # noqa: BLE001 - pytrees / scalars: use the default device
        device = None
    peaks = device_peaks(bundle.environment, device)
    t = run_measurement(compiled, args, measured_kernels, platform, module_name, iterations, peaks)
    t["platform"] = platform
    t["measured_compile"] = measured_compile
    if measured_compile["command_buffers_disabled"]:
        t["command_buffer_note"] = ("Measured with CUDA command buffers disabled "
                                    "(xla_gpu_enable_command_buffer=\"\") so every kernel is timed "
                                    "on its own; with them on, launches are batched and steps may be faster.")
    bundle.timings = t
    return bundle


# ----------------------------------------------------------------------------- fusion off


def _side(b, timings: dict | None) -> dict:
    launching = [k for k in b.kernels if k.route != "control"]
    from collections import Counter
    side = {
        "kernels": len(launching),
        "kernels_by_route": dict(Counter(k.route for k in launching)),
        "bytes": sum(k.bytes for k in launching),
        "flops": sum(k.flops for k in launching),
        "step_median_s": None, "device_busy_s": None, "iterations": None,
        "top_kernels": [],
    }
    if timings:
        side["step_median_s"] = timings.get("step_median_s")
        side["device_busy_s"] = timings.get("device_busy_s")
        side["iterations"] = timings.get("iterations")
        rows = [r for r in timings.get("kernels", {}).values() if not r.get("inclusive")]
        side["top_kernels"] = [{"name": r["name"], "route": r["route"], "median_s": r["median_s"],
                                "calls": r["calls"]} for r in sorted(rows, key=lambda r: -r["median_s"])[:15]]
    return side


def compare_fusion(bundle, loaded=None, measure: bool = True, iterations: int | None = None):
    """Compile the same program with the backend's fusion passes disabled, measure it the same
    way (when ``measure``), and store both sides in ``bundle.fusion_comparison``."""
    platform = bundle.platform
    passes = FUSION_PASSES.get(platform, FUSION_PASSES["cpu"])
    loaded = loaded if loaded is not None else _loaded_from_bundle(bundle)
    extra = {"xla_disable_hlo_passes": ",".join(passes)}
    existing = (bundle.options.get("compiler_options") or {}).get("xla_disable_hlo_passes")
    if existing:
        extra["xla_disable_hlo_passes"] = existing + "," + extra["xla_disable_hlo_passes"]
    unfused = _recompile(bundle, loaded, extra)
    if measure:
        if bundle.timings is None:
            measure_bundle(bundle, iterations=iterations)
        n = iterations or bundle.timings.get("iterations")
        measure_bundle(unfused, iterations=n)
        unfused.timings.pop("trace_json_gz_b64", None)  # one trace per bundle is plenty
        unfused.timings.pop("timeline", None)
    d = _side(bundle, bundle.timings if measure else None)
    u = _side(unfused, unfused.timings if measure else None)
    cmp = {
        "platform": platform,
        "disabled_passes": list(passes),
        "compiler_options": dict(unfused.options.get("compiler_options") or {}),
        "note": FUSION_NOTES.get(platform, ""),
        "measured": bool(measure),
        "default": d,
        "unfused": u,
        "kernels_saved": u["kernels"] - d["kernels"],
        "bytes_saved": u["bytes"] - d["bytes"],
        "time_saved_s": (u["step_median_s"] - d["step_median_s"])
        if measure and u["step_median_s"] is not None and d["step_median_s"] is not None else None,
        "speedup": (u["step_median_s"] / d["step_median_s"])
        if measure and u["step_median_s"] and d["step_median_s"] else None,
        "busy_speedup": (u["device_busy_s"] / d["device_busy_s"])
        if measure and u["device_busy_s"] and d["device_busy_s"] else None,
        "unfused_hlo_after": unfused.stages.get("hlo_after"),
    }
    bundle.fusion_comparison = cmp
    bundle.__dict__["_unfused_bundle"] = unfused
    return bundle


def over_peak_note(t: dict | None) -> str | None:
    """Why some kernels show more than 100% of peak, when they do: small kernels whose data
    stays in cache beat a memory roof measured by streaming far more than the caches hold."""
    if not t or not t.get("kernels"):
        return None
    over = [r["name"] for r in t["kernels"].values() if (r.get("pct_of_peak") or 0) > 100]
    if not over:
        return None
    return (f"{len(over)} kernel(s) show over 100% of peak: their data stayed in cache, which is faster than "
            "the memory-bandwidth roof (measured streaming arrays much larger than the caches).")

