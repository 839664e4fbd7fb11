"""Profiles: profiler events -> per-kernel times, steps, device-busy time. Pure (no JAX).

``events_from_profile`` reads the events that name an HLO instruction out of a
``jax.profiler.ProfileData`` (or anything shaped like it: planes -> lines -> events);
``attribute`` turns them into the ``timings`` numbers of a Bundle (docs/bundle.md): every event
is matched to the optimized module's instruction named by its ``hlo_op`` stat -- never by
kernel name. Running the program under the profiler is ``analysis.compile.measure``.

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

On TPU (from sources only, docs/xla-findings.md "Traces from a GPU and a TPU"; no TPU was run
here): each TensorCore is a ``/device:TPU:N`` plane whose "XLA Ops" line has an event per executed
instruction, named by it through its metadata (no ``hlo_op`` stat), inside the "XLA Modules" event
of the module's execution (named ``jit_f(program_id)``). ``tpu_events`` reads them.
"""

from __future__ import annotations

import base64
import bisect
import statistics
from collections import Counter
from typing import Any, Iterable, NamedTuple, TypedDict

from analysis import linear_re
from analysis.program.kernels import Kernel, launching
from analysis.measures import middle, roof_note, spread

TIMELINE_LIMIT = 4000  # events of the one-step timeline kept in the bundle
LOW_ATTRIBUTION = 0.8
LOW_BUSY = 0.5


# Traces and bundles are a user's: RE2 patterns (analysis.linear_re), linear in the text.
_DTYPE = linear_re.compile(r"\b(pred|s4|s8|s16|s32|s64|u4|u8|u16|u32|u64|f8e\w+|bf16|f16|f32|f64|c64|c128)\[")
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


class KernelTiming(TypedDict):
    """One row of ``timings["kernels"]``: one instruction of the optimized module, per step."""

    name: str
    route: str  # the legend's route, "unknown" for an instruction that is no kernel
    library: str | None
    context: str
    inclusive: bool  # control flow: its time includes the kernels it runs
    calls: float  # executions per step (loop trip counts included; on TPU per core), median over steps
    launches: float  # device kernels launched per step (one call may launch several on GPU)
    median_s: float  # time per step spent in it: median, min, mean, spread and total over steps
    min_s: float
    mean_s: float
    std_s: float
    total_s: float
    per_call_s: float | None
    share: float  # of the step: its part of the middle steps' time (numbers.py), overlaps split
    own_share: float  # of the step: the time it ran over the same steps, overlaps counted in full
    bytes: float | None  # moved per step (the kernel's bytes x calls)
    flops: float | None
    gbps: float | None
    flops_per_s: float | None
    arithmetic_intensity: float | None
    pct_of_peak: float | None
    peak_key: str | None  # which FLOP/s peak bounds it (fp32, tf32, bf16, matmul, ...)
    kernel_details: dict | None  # GPU: per device kernel, registers, grid, block, occupancy


class Timings(TypedDict, total=False):
    """``bundle.timings``: a measured compile (docs/bundle.md, "timings")."""

    platform: str
    iterations: int
    traced_steps: int
    warmup_s: float
    # the step (numbers.step): first kernel start -> last kernel end of a traced execution
    step_median_s: float | None
    step_q1_s: float | None
    step_q3_s: float | None
    step_min_s: float | None
    step_max_s: float | None
    share_steps: int  # the middle steps the kernels' shares are taken over
    # the call (numbers.call): wall clock of an untraced call, host dispatch included
    call_median_s: float
    call_q1_s: float
    call_q3_s: float
    call_min_s: float
    call_mean_s: float
    traced_call_median_s: float  # wall clock of the traced calls
    hlo_module: str | None
    program_id: int | None
    steps_seen: int
    device_busy_s: float
    device_busy_min_s: float
    attributed_busy_s: float
    attributed_fraction: float
    kernels: dict[str, KernelTiming]
    unattributed: dict[str, float]
    not_run: list[str]
    timeline: dict
    coverage_note: str | None
    peaks: dict | None
    events_seen: int
    trace_json_gz_b64: str | None
    trace_json_gz_bytes: int
    measured_compile: dict
    command_buffer_note: str
    jobs_beside: int  # other jobs that ran on the machine while these were measured (the job queue's count)


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


TPU_CORE = linear_re.compile(r"/device:TPU:\d+$")  # a TensorCore plane (SparseCore planes add " SparseCore N")
TPU_OPS_LINE, TPU_MODULES_LINE = "XLA Ops", "XLA Modules"
MODULE_RUN = linear_re.compile(r"^(.*)\((\d+)\)$")  # read by module_run_name
_DIGITS = frozenset("0123456789")
KEPT_STATS = ("kernel_details", "correlation_id", "device_ordinal", "memcpy_details", "hlo_category")


def events_from_profile(pd, platform: str) -> list[TraceEvent]:
    """Events carrying ``hlo_op`` from the planes where the kernels run: ``/host:CPU`` on
    CPU, ``/device:GPU:N`` stream lines on GPU, the "XLA Ops" line of each ``/device:TPU:N``
    TensorCore plane on TPU (``tpu_events``)."""
    if platform == "tpu":
        return tpu_events(pd)
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
                    stats={k: v for k, v in st.items() if k in KEPT_STATS},
                ))
    return out


def tpu_op_name(name: str) -> str:
    """The HLO instruction a TPU op event names. Its metadata's display name is the instruction
    (``fusion.3``), its name may be the instruction's text (``%fusion.3 = f32[8]{0} fusion(...)``);
    the trace viewer's JSON shows the display name. Either way: the name before `` = ``."""
    head = name.split(" = ", 1)[0].strip() if " = " in name else name.strip()
    return head.lstrip("%").strip()


def module_run_name(name: str) -> tuple[str, int | None]:
    """``jit_f(42)`` (an "XLA Modules" event) -> (``jit_f``, 42): the module and its program id."""
    name = name.strip()
    # every execution of a module is an event: read with str methods, as MODULE_RUN reads it
    # (only the last "(" can open the digits that end the name)
    at = name.rfind("(")
    digits = name[at + 1:-1]
    if at >= 0 and name.endswith(")") and digits and _DIGITS.issuperset(digits) and "\n" not in name \
            and len(digits) <= 30:
        return name[:at], int(digits)
    return name, None


def tpu_events(pd) -> list[TraceEvent]:
    """A TPU trace's op events (docs/xla-findings.md, "Traces from a GPU and a TPU"): on each
    TensorCore plane (``/device:TPU:N``), the "XLA Ops" line holds one event per executed HLO
    instruction, named by it (``tpu_op_name``; an ``hlo_op`` stat, where one is, wins), nested
    where control flow runs other ops; the "XLA Modules" line holds one event per execution of a
    module, named ``module(program_id)``, spanning its ops. An op's module, program and step
    (``run_id``) are those of the module execution that contains it: the k-th execution of a
    module on a core is step k, on every core, so one step spans the cores that ran it."""
    out: list[TraceEvent] = []
    for plane in pd.planes:
        pname = str(plane.name)
        if not TPU_CORE.match(pname):
            continue
        lines = list(plane.lines)
        runs = []  # (start, end, module, program id, k-th execution of that module here)
        seen: Counter = Counter()
        mods = sorted((float(e.start_ns), float(e.start_ns) + float(e.duration_ns), str(e.name))
                      for ln in lines if ln.name == TPU_MODULES_LINE for e in ln.events)
        for start, end, name in mods:
            module, program = module_run_name(name)
            runs.append((start, end, module, program, seen[module]))
            seen[module] += 1
        starts = [r[0] for r in runs]
        for ln in lines:
            if ln.name != TPU_OPS_LINE:
                continue
            for e in ln.events:
                st = dict(e.stats)
                op = str(st.get("hlo_op") or tpu_op_name(str(e.name)))
                if not op:
                    continue
                start, dur = float(e.start_ns), float(e.duration_ns)
                i = bisect.bisect_right(starts, start) - 1
                run = runs[i] if i >= 0 and start + dur <= runs[i][1] + 1e-3 else None
                module = str(st.get("hlo_module") or (run[2] if run else ""))
                program = _int_or_none(st.get("program_id"))
                out.append(TraceEvent(
                    name=str(e.name), hlo_op=op, hlo_module=module,
                    program_id=program if program is not None else (run[3] if run else None),
                    start_ns=start, duration_ns=dur, line=f"{pname} {ln.name}",
                    run_id=run[4] if run else _int_or_none(st.get("run_id")),
                    stats={**{k: v for k, v in st.items() if k in KEPT_STATS}, "device": pname},
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
    for tok in text.replace(";", " ").split():  # whitespace and ";" separate the pairs
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


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """The length covered by the union of ``(start, end)`` intervals (overlaps counted once)."""
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


def attributed_time(step: list[TraceEvent], control: set[str]) -> dict[str, float]:
    """Each instruction's part of one step's busy time, in ns: time during which several
    kernels ran at once (XLA:CPU's executor threads, GPU streams) divided evenly between them;
    a control-flow instruction (``control``: its span holds the kernels it runs) gets only the
    time in which none of its kernels ran (its own bookkeeping), the innermost one first. The
    parts add up to the union of the step's intervals, so shares never sum past the step."""
    bounds = []
    for i, e in enumerate(step):
        if e.duration_ns > 0:
            bounds.append((e.start_ns, 1, i))
            bounds.append((e.start_ns + e.duration_ns, 0, i))
    bounds.sort()
    out: dict[str, float] = {}
    leaves: set[int] = set()
    loops: set[int] = set()
    prev = None
    for t, starts, i in bounds:
        if prev is not None and t > prev and (leaves or loops):
            dt = t - prev
            if leaves:
                each = dt / len(leaves)
                for j in leaves:
                    name = step[j].instruction
                    out[name] = out.get(name, 0.0) + each
            else:  # only control flow running: the innermost (latest started) loop's bookkeeping
                j = max(loops, key=lambda j: (step[j].start_ns, j))
                name = step[j].instruction
                out[name] = out.get(name, 0.0) + dt
        prev = t
        into = loops if step[i].instruction in control else leaves
        if starts:
            into.add(i)
        else:
            into.discard(i)
    return out


def select_program(events: list[TraceEvent], module_name: str | None) -> tuple[str | None, int | None]:
    """The (hlo_module, program_id) measured: the module's name if it appears, the pair with
    the most events among those."""
    
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
    control = {k.name for k in kernels} - {k.name for k in launching(kernels)}

    per_kernel_steps: dict[str, list[float]] = {}
    per_kernel_launches: dict[str, list[int]] = {}
    per_kernel_calls: dict[str, list[float]] = {}
    kernel_names: dict[str, dict[str, dict]] = {}
    busy, attributed, spans, parts = [], [], [], []
    unattributed: dict[str, float] = {}
    for si, step in enumerate(steps):
        own: dict[str, list[tuple[float, float]]] = {}
        counts: dict[str, int] = {}
        names_in_step: dict[str, set] = {}
        for e in step:
            inst = e.instruction
            own.setdefault(inst, []).append((e.start_ns, e.start_ns + e.duration_ns))
            counts[inst] = counts.get(inst, 0) + 1
            names_in_step.setdefault(inst, set()).add(e.stats.get("device") if platform == "tpu" else e.name)
            if platform == "gpu":
                d = kernel_names.setdefault(inst, {})
                if e.name not in d:
                    d[e.name] = parse_kernel_details(e.stats.get("kernel_details"))
            if inst not in by_name:
                unattributed[inst] = unattributed.get(inst, 0.0) + e.duration_ns * 1e-9
        # a kernel's time in the step: the union of its own intervals (one instruction's launches
        # on several streams or threads at once count once), so it never exceeds the step
        sums = {inst: union_length(iv) * 1e-9 for inst, iv in own.items()}
        for inst in set(per_kernel_steps) | set(sums):
            per_kernel_steps.setdefault(inst, [0.0] * si).append(sums.get(inst, 0.0))
            per_kernel_launches.setdefault(inst, [0] * si).append(counts.get(inst, 0))
            # On GPU one execution of an instruction may launch several distinct kernels; on TPU
            # each core runs its own copy of the program: calls are per core.
            distinct = max(1, len(names_in_step.get(inst, ()))) if platform in ("gpu", "tpu") else 1
            per_kernel_calls.setdefault(inst, [0.0] * si).append(counts.get(inst, 0) / distinct)
        busy.append(union_length((e.start_ns, e.start_ns + e.duration_ns) for e in step) * 1e-9)
        spans.append((max(e.start_ns + e.duration_ns for e in step) - min(e.start_ns for e in step)) * 1e-9)
        parts.append(attributed_time(step, control))
        attributed.append(union_length((e.start_ns, e.start_ns + e.duration_ns) for e in step
                                    if e.instruction in by_name and e.instruction not in control) * 1e-9)

    busy_total = sum(busy)
    busy_med = statistics.median(busy) if busy else 0.0
    # Shares are taken over the middle steps by span (numbers.middle): sums over the same steps,
    # so they add up to at most the step; a slow step changes none of them.
    by_span = sorted(range(n_steps), key=lambda i: (spans[i], busy[i], i))
    typical = [by_span[i] for i in middle(n_steps)] if n_steps else []
    typical_ns = sum(spans[i] for i in typical) * 1e9
    typical_s = typical_ns * 1e-9
    share_of = {}
    for i in typical:
        for inst, ns in parts[i].items():
            share_of[inst] = share_of.get(inst, 0.0) + ns
    sp = spread(spans)
    rows: dict[str, KernelTiming] = {}
    for inst, per_step in per_kernel_steps.items():
        k = by_name.get(inst)
        st = _stats(per_step)
        calls = statistics.median(per_kernel_calls[inst])
        launches = statistics.median(per_kernel_launches[inst])
        total_calls = sum(per_kernel_calls[inst])
        row: KernelTiming = {
            "name": inst,
            "route": k.route if k else "unknown",
            "library": k.library if k else None,
            "context": k.context if k else "",
            "inclusive": inst in control,  # control flow: its time includes the kernels it runs
            "calls": calls,
            "launches": launches,
            **st,
            "per_call_s": st["total_s"] / total_calls if total_calls else None,
            "share": (share_of.get(inst, 0.0) / typical_ns) if typical_ns else 0.0,
            # the time it ran in the same steps, on the same scale: differs from its share only
            # where other kernels ran beside it (or, control flow, by the kernels it runs)
            "own_share": (sum(per_step[i] for i in typical) / typical_s) if typical_s else 0.0,
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
    # busy: over the steps the shares are taken over, as a part of the step shown, so that the
    # kernels' parts of the step (share x step) add up to it
    busy_share = sum(busy[i] for i in typical) / typical_s if typical_s else 0.0
    result = {
        "hlo_module": module, "program_id": program, "steps_seen": n_steps,
        "step_median_s": sp.median if sp else None, "step_q1_s": sp.q1 if sp else None,
        "step_q3_s": sp.q3 if sp else None, "step_min_s": sp.lo if sp else None,
        "step_max_s": sp.hi if sp else None, "share_steps": len(typical),
        "device_busy_s": busy_share * sp.median if sp else busy_med, "device_busy_min_s": min(busy) if busy else 0.0,
        "attributed_busy_s": statistics.median(attributed) if attributed else 0.0,
        "attributed_fraction": (sum(attributed) / busy_total) if busy_total else 0.0,
        "kernels": dict(sorted(rows.items(), key=lambda kv: -kv[1]["total_s"])),
        "unattributed": {k: v / max(1, n_steps) for k, v in sorted(unattributed.items(), key=lambda kv: -kv[1])},
        "not_run": [k.name for k in kernels if k.name not in ran],
        "timeline": _timeline(steps, by_span, by_name),
    }
    return result


def _timeline(steps: list[list[TraceEvent]], by_span: list[int], by_name: dict[str, Kernel]) -> dict:
    """The events of the step whose span is the median, relative to its start."""
    if not steps:
        return {"step": None, "events": []}
    si = by_span[len(by_span) // 2]
    step = sorted(steps[si], key=lambda e: e.start_ns)
    t0 = step[0].start_ns
    out = []
    for e in step[:TIMELINE_LIMIT]:
        k = by_name.get(e.instruction)
        out.append({"name": e.instruction, "kernel": e.name, "start_s": (e.start_ns - t0) * 1e-9,
                    "duration_s": e.duration_ns * 1e-9, "line": e.line,
                    "route": k.route if k else "unknown"})
    return {"step": si, "events": out, "truncated": len(step) > TIMELINE_LIMIT}


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
    step, traced_call = t.get("step_median_s"), t.get("traced_call_median_s")
    if step and traced_call and step / traced_call < LOW_BUSY:
        where = "the host (dispatch, argument handling, synchronisation)" if platform == "cpu" else \
            "launch overhead and host work before the first kernel and after the last"
        notes.append(f"The step (first kernel to last) is {step / traced_call:.0%} of a traced call's wall clock; "
                     f"the rest is {where}. Small programs are dominated by it.")
    return " ".join(notes) or None


def trace_bytes(timings: dict | None) -> bytes | None:
    """The raw gzip'd Chrome/Perfetto trace of a measured bundle, when it was embedded."""
    b64 = (timings or {}).get("trace_json_gz_b64")
    if not isinstance(b64, str) or not b64:
        return None
    try:
        return base64.b64decode(b64, validate=True)
    except ValueError:
        return None  # a damaged bundle: no trace to offer


def over_peak_note(t: dict | None) -> str | None:
    """Which roofs the kernels' rates are measured against, and how many ran faster than every
    roof measured (``measures.roof_note``: no kernel shows more than 100% of a roof)."""
    return roof_note(t)
