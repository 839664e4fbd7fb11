"""Timings from a user's own ``jax.profiler`` trace, onto the compile it ran.

``jax.profiler.trace(DIR)`` writes ``DIR/plugins/profile/<run>/<host>.xplane.pb`` and, most of
the time, a Chrome JSON ``<host>.trace.json.gz`` beside it. Either holds every kernel's start and
end, named after the optimized module's instructions: by the ``hlo_op`` stat (CPU, GPU) or by
the event itself on a TPU core's "XLA Ops" line, with the module (``hlo_module``, or on a TPU the
"XLA Modules" event around it), the execution (``run_id`` on CPU) and, on GPU,
``kernel_details`` (docs/xla-findings.md). Given the compile it ran (an XLA dump, HLO text or a
bundle), ``apply_trace`` attributes its events exactly as a measurement here does
(``analysis.timing.profiles``: the same filter of planes and lines, the same step, shares and spreads,
docs/numbers.md), labels the timings with the device the trace names and, where the trace names a
device whose data-sheet peaks are known (``analysis.devices.catalog``), puts them under the roofline.
This is how a machine without a GPU or a TPU shows their timings.

What is read: a folder (the newest run folder under it), a zip of one, a ``.xplane.pb``, a
``.trace.json.gz`` / ``.trace.json``, or an upload's bytes of any of these. Where a run folder
holds both files, the **``.xplane.pb`` is read**: jax always writes it, the JSON is made from it
and drops what the device reports about itself (the GPU's or TPU's model, so its peaks) and the
``program_id`` of every event. Both are parsed without JAX (``analysis.timing.xplane`` for the XSpace,
``json`` for the JSON), so the app's server can read an upload; both are bounded
(``MAX_TRACE_BYTES`` of input, ``MAX_EVENTS`` events) and read as untrusted input, and anything
malformed is one ``ExplorerError`` line.

A trace alone (no dump) is read too (``pick_program``, ``bundle_from_trace``): its ``.xplane.pb`` carries the
optimized module of each program it ran (``analysis.timing.xplane.Program``), which XLA prints as text
in the sandboxed worker (``analysis.compile.hlo_proto``); the text is parsed like any uploaded HLO
text and gets the events of its own program (a function compiled for two shapes is two programs
of one module name).

What was checked where: CPU traces made by the test suite, both files, the ``.xplane.pb`` reader
against ``jax.profiler.ProfileData`` (``tests/timing/test_xplane.py``). XLA:GPU and TPU traces only in the
layouts their sources describe (docs/xla-findings.md, "Traces from a GPU and a TPU"), written by
the tests: no trace from a real GPU or TPU has been read by this code.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import os
import posixpath
import zipfile
from collections import Counter
from typing import NamedTuple

from analysis.errors import ExplorerError
from analysis.timing.xplane import MAX_EVENTS, Event, Line, Plane, Space, read_xspace
from analysis.devices.catalog import table_peaks, tpu_table_peaks
from analysis.timing.profiles import events_from_profile
from analysis.timing.profiles import attribute, coverage_note
from analysis.bundle.core import TRACE_ORIGIN

MAX_TRACE_BYTES = 256 * 2 ** 20  # of JSON after gunzip, or of XSpace

# The planes -> lines -> events of a trace (either form), shaped like ``ProfileData`` (what
# ``analysis.timing.profiles.events_from_profile`` reads); for the JSON, a plane per process, a line per thread.
TraceProfile = Space


def _bounded_gunzip(raw: bytes, name: str) -> bytes:
    with gzip.GzipFile(fileobj=io.BytesIO(raw)) as g:
        try:
            data = g.read(MAX_TRACE_BYTES + 1)
        except (OSError, EOFError) as e:
            raise ExplorerError("trace", f"not a readable gzip file: {e}", name) from None
    if len(data) > MAX_TRACE_BYTES:
        raise ExplorerError("trace", f"the trace is over {MAX_TRACE_BYTES // 2 ** 20} MiB unzipped", name)
    return data


def _kind(name: str) -> int:
    """2 for an XSpace, 1 for a JSON trace, 0 for neither (by the name jax.profiler gives them)."""
    n = name.lower()
    return 2 if n.endswith(".xplane.pb") else 1 if n.endswith((".trace.json.gz", ".trace.json")) else 0


def _pick(names: list[str]) -> str | None:
    """The trace to read among files: the newest run folder's (run folders are named by date, so
    the last is the newest), its ``.xplane.pb`` before its ``.trace.json.gz``, the last host's."""
    found = [n for n in names if _kind(n)]
    if not found:
        return None
    return max(found, key=lambda n: (posixpath.dirname(n.replace(os.sep, "/")), _kind(n), n))


WHERE = "jax.profiler.trace(DIR) writes DIR/plugins/profile/<run>/<host>.xplane.pb"


def read_trace(path: str | None = None, data: bytes | None = None, name: str = "trace") -> tuple[bytes, str]:
    """The bytes of a trace (XSpace, or JSON text) and its file's name: from ``path`` (a
    ``.xplane.pb`` or ``.trace.json.gz``, a folder holding them, or a zip of such a folder; see
    ``_pick``) or from the bytes of an upload (any of those)."""
    if path is not None and os.path.isdir(path):
        found = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
        pick = _pick(found)
        if pick is None:
            raise ExplorerError("trace", f"no .xplane.pb or .trace.json.gz in this folder ({WHERE})", path)
        path = pick
    if path is not None:
        try:
            size = os.path.getsize(path)
            if size > MAX_TRACE_BYTES:
                raise ExplorerError("trace", f"over the {MAX_TRACE_BYTES // 2 ** 20} MiB a trace may be", path)
            with open(path, "rb") as f:
                data = f.read(MAX_TRACE_BYTES + 1)
        except OSError as e:
            raise ExplorerError("trace", e.strerror or str(e), path) from None
        name = os.path.basename(path)
    assert data is not None
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):  # a zip (the second: one with no files)
        try:
            z = zipfile.ZipFile(io.BytesIO(data))
            with z:
                infos = {i.filename: i for i in z.infolist() if not i.is_dir()}
                pick = _pick(list(infos))
                if pick is None:
                    raise ExplorerError("trace", f"the zip holds no .xplane.pb or .trace.json.gz ({WHERE})", name)
                if infos[pick].file_size > MAX_TRACE_BYTES:
                    raise ExplorerError("trace", f"{pick} is over the {MAX_TRACE_BYTES // 2 ** 20} MiB a trace may be", name)
                with z.open(infos[pick]) as f:
                    data, name = f.read(MAX_TRACE_BYTES + 1), pick
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, EOFError) as e:
            raise ExplorerError("trace", f"not a readable zip: {str(e)[:120]}", name) from None
    if data[:2] == b"\x1f\x8b":
        data = _bounded_gunzip(data, name)
    if len(data) > MAX_TRACE_BYTES:
        raise ExplorerError("trace", f"over the {MAX_TRACE_BYTES // 2 ** 20} MiB a trace may be", name)
    return data, name


def _is_json(data: bytes, name: str) -> bool:
    n = name.lower()
    if n.endswith(".pb"):
        return False
    return n.endswith((".json", ".json.gz")) or data[:64].lstrip()[:1] in (b"{", b"[")


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_trace(data: bytes, name: str = "trace") -> TraceProfile:
    """A trace's bytes -> ``TraceProfile``: an XSpace (``analysis.timing.xplane.read_xspace``) or a Chrome
    JSON trace (``parse_json_trace``), told apart by the file's name, else by the first byte."""
    if _is_json(data, name):
        return parse_json_trace(data, name)
    return read_xspace(data, name)


def parse_json_trace(data: bytes, name: str = "trace") -> TraceProfile:
    """A Chrome JSON trace -> ``TraceProfile``. Complete events (``"ph": "X"``) only; processes
    and threads named by their metadata events. Anything malformed is skipped or refused in one
    line, never trusted."""
    # each event is a JSON object: counted (an upper bound, at C speed) before anything is built,
    # so a gzip bomb of empty objects is refused, not parsed into millions of dicts
    objects = data.count(b"{")
    if objects > 2 * MAX_EVENTS + 1000:
        raise ExplorerError("trace", f"over {2 * MAX_EVENTS:,} JSON objects, more than the {MAX_EVENTS:,} events "
                                     "a trace may hold", name)
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ExplorerError("trace", f"not a JSON trace: {str(e)[:120]}", name) from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc if isinstance(doc, list) else None
    if not isinstance(events, list):
        raise ExplorerError("trace", "no traceEvents list: not a Chrome/Perfetto trace", name)
    if len(events) > MAX_EVENTS:
        raise ExplorerError("trace", f"{len(events):,} events, over the {MAX_EVENTS:,} a trace may hold", name)
    procs: dict = {}
    threads: dict = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M" and isinstance(e.get("args"), dict):
            label = e["args"].get("name")
            if not isinstance(label, str):
                continue
            if e.get("name") == "process_name":
                procs[e.get("pid")] = label[:200]
            elif e.get("name") == "thread_name":
                threads[(e.get("pid"), e.get("tid"))] = label[:200]
    lines: dict = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ts, dur, args = _num(e.get("ts")), _num(e.get("dur")), e.get("args", {})
        if ts is None or dur is None or dur < 0 or not isinstance(args, dict):
            continue  # an event without arguments is kept (the JSON export writes none where it has no stat)
        stats = [(str(k)[:100], v[:2000] if isinstance(v, str) else v if isinstance(v, (int, float)) else str(v)[:2000])
                 for k, v in args.items()]
        key = (e.get("pid"), e.get("tid"))
        lines.setdefault(key, []).append(Event(str(e.get("name", ""))[:500], ts * 1e3, dur * 1e3, stats))
    planes: dict = {}
    for (pid, tid), evs in lines.items():
        planes.setdefault(pid, []).append(Line(threads.get((pid, tid), str(tid)), evs))
    return TraceProfile([Plane(procs.get(pid, str(pid)), ls) for pid, ls in planes.items()])


DEVICE_STATS = {"gpu": "gpu_device_name", "tpu": "device_type_string"}  # plane stats naming the model


def trace_device(pd) -> tuple[str, str, str | None]:
    """(platform, the device in words, its model where the trace names it) of a trace: ``gpu``
    when it has ``/device:GPU:N`` planes, ``tpu`` when it has ``/device:TPU:N`` ones, ``cpu``
    otherwise. The model is a device plane's stat (``gpu_device_name``, ``device_type_string``),
    which only the ``.xplane.pb`` carries."""
    planes = list(pd.planes)
    names = [str(p.name) for p in planes]
    for platform, prefix in (("gpu", "/device:GPU:"), ("tpu", "/device:TPU:")):
        devs = sorted(n for n in names if n.startswith(prefix))
        if not devs:
            continue
        kind = None
        for p in planes:
            if str(p.name).startswith(prefix):
                kind = next((str(v)[:100] for k, v in (getattr(p, "stats", None) or [])
                             if k == DEVICE_STATS[platform] and isinstance(v, str) and v.strip()), None)
                if kind:
                    break
        listed = ", ".join(devs[:4]) + (", …" if len(devs) > 4 else "")
        return platform, f"the trace's {platform.upper()} ({listed}{'; ' + kind if kind else ''})", kind
    host = next((n for n in names if n.startswith("/host:") and n != "/host:metadata"), "the host")
    return "cpu", f"the trace's CPU ({host})", None


def trace_peaks(platform: str, kind: str | None) -> tuple[dict | None, str | None]:
    """(peaks, why none): the data-sheet peaks of the device a trace names (``analysis.devices.catalog``),
    or None and a sentence for the page saying why the roofline has no roofs."""
    if platform == "cpu":
        return None, ("No roofline verdict: a CPU's peaks are measured on the machine itself, and your "
                      "trace's machine is not this one.")
    if not kind:
        return None, (f"No roofline verdict: the trace does not name its {platform.upper()}'s model (a "
                      ".trace.json.gz never does; the .xplane.pb beside it may), so its peaks are unknown.")
    peaks = table_peaks(kind) if platform == "gpu" else tpu_table_peaks(kind)
    if peaks is None:
        return None, f"No roofline verdict: no data-sheet peaks are known here for {kind[:80]}."
    return peaks, None


def _steps(events, module: str | None) -> int:
    """Executions of the module in the trace: distinct ``run_id`` values where events carry
    them (CPU), else the fewest launches of any of its instructions (each execution launches
    every instruction at least once; a loop's body more often)."""
    evs = [e for e in events if module is None or e.hlo_module == module]
    if evs and all(e.run_id is not None for e in evs):
        return len({e.run_id for e in evs})
    counts = Counter(e.instruction for e in evs)
    return min(counts.values()) if counts else 0


class Trace(NamedTuple):
    """A user's trace, read: its kernel events (``analysis.timing.profiles.TraceEvent``), the platform and
    device it names, its file, and the device's model where the trace names it."""

    events: list
    platform: str
    device: str
    file: str
    kind: str | None = None
    programs: list = []  # the modules it carries (``analysis.timing.xplane.Program``); a JSON trace none

    def modules(self) -> set[str]:
        return {e.hlo_module for e in self.events}


NO_HLO = ("this trace carries no HLO (a .trace.json.gz never does; the .xplane.pb beside it does): give the "
          ".xplane.pb, or the XLA dump with --trace")


def load_trace(path: str | None = None, data: bytes | None = None, name: str = "trace",
               need_hlo: bool = False) -> Trace:
    """Read and check a trace once (a folder, a zip, a ``.xplane.pb``, a ``.trace.json.gz``, or an
    upload's bytes of any of these). ``need_hlo``: a trace alone, opened for the HLO it carries:
    a JSON trace, which carries none, is refused before its events are read."""
    raw, member = read_trace(path, data, name)
    if need_hlo and _is_json(raw, member):
        raise ExplorerError("trace", NO_HLO, member)
    pd = parse_trace(raw, member)
    platform, device, kind = trace_device(pd)
    return Trace(events_from_profile(pd, platform), platform, device, member, kind,
                 list(getattr(pd, "programs", [])))


def apply_trace(bundle, path: str | None = None, data: bytes | None = None, name: str = "trace",
                trace: Trace | None = None):
    """Fill ``bundle.timings`` from a trace (read here from ``path`` or ``data``, or ``trace``
    read before; see the module docstring) and return the bundle. The timings say where they
    came from (``source: "trace"``, ``trace_device``, ``trace_file``); ``peaks`` are the named
    device's data-sheet peaks, or None with ``peaks_note`` saying why."""
    tr = trace or load_trace(path, data, name)
    events, platform = tr.events, tr.platform
    post = bundle.module("hlo_after")
    if post is None:
        raise ExplorerError("trace", "the compile has no optimized module to put the trace's times on")
    if platform == "tpu" and events and not any(e.hlo_module for e in events):
        raise ExplorerError("trace", "no TPU op lies inside an \"XLA Modules\" event: the trace does not say which "
                                     "module ran them", tr.file)
    if post.name not in tr.modules():
        seen = sorted(m for m in tr.modules() if m)
        raise ExplorerError("trace", f"no event of module {post.name} in the trace (it ran: "
                                     f"{', '.join(s[:60] for s in seen[:5]) or 'nothing XLA named'})", tr.file)
    steps = _steps(events, post.name)
    peaks, no_peaks = trace_peaks(platform, tr.kind)
    t = attribute(events, bundle.kernels, steps, platform, post.name, peaks=peaks)
    ran = {e.instruction for e in events if e.hlo_module == post.name and e.program_id == t["program_id"]}
    names = {k.name for k in bundle.kernels}
    t.update({"platform": platform, "iterations": steps, "traced_steps": steps, "source": "trace",
              "trace_device": tr.device, "trace_file": tr.file[-200:], "events_seen": len(events),
              "matched_fraction": len(ran & names) / len(ran) if ran else 0.0, "peaks": peaks,
              "peaks_note": no_peaks})
    t["coverage_note"] = coverage_note(t, platform)
    bundle.timings = t
    return bundle


def _holds(names) -> tuple[bool, bool]:
    """(a trace file, an XLA dump's optimized module) among file names."""
    names = list(names)
    return any(_kind(n) for n in names), any(n.endswith("after_optimizations.txt") for n in names)


def _members(path) -> tuple[bool, bool]:
    if isinstance(path, str) and os.path.isdir(path):
        return _holds(f for _, _, fs in os.walk(path) for f in fs)
    if isinstance(path, str) and _kind(path):
        return True, False
    try:
        with zipfile.ZipFile(path) as z:
            return _holds(z.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False, False


def is_trace(path) -> bool:
    """Whether ``path`` is a trace alone rather than a compile: a ``.xplane.pb`` or
    ``.trace.json.gz``, a folder or zip holding one and no XLA dump (a zip of both is a dump with
    its trace: ``holds_trace``). ``path`` may be a zip's file object."""
    trace, dump = _members(path)
    return trace and not dump


def holds_trace(path) -> bool:
    """Whether a zipped XLA dump also holds a profiler trace (the user zipped both together)."""
    trace, dump = _members(path)
    return trace and dump


def program_events(tr: Trace, p) -> list:
    """The trace's events of program ``p`` (events without a program id are matched by name)."""
    return [e for e in tr.events if e.hlo_module == p.module and e.program_id in (p.program_id, None)]


def busy_programs(tr: Trace) -> list:
    """``(program, kernel time in ns)`` of the programs the trace carries that it ran, the most
    time first: its events' durations added in one pass over them (a program's events as
    ``program_events`` takes them)."""
    busy: Counter = Counter()
    for e in tr.events:
        busy[(e.hlo_module, e.program_id)] += e.duration_ns
    timed = [(p, busy.get((p.module, p.program_id), 0) + (busy.get((p.module, None), 0) if p.program_id is not None else 0))
             for p in tr.programs]
    return sorted(((p, t) for p, t in timed if t > 0), key=lambda pt: (-pt[1], pt[0].module))


def ran_programs(tr: Trace) -> list:
    """The programs the trace carries that it ran, the one with the most kernel time first."""
    return [p for p, _ in busy_programs(tr)]


def program_label(p) -> str:
    return f"{p.module}({p.program_id})" if p.program_id is not None else p.module


def pick_program(tr: Trace, module: str | None = None):
    """The program of the trace to open: ``module`` (its name, or ``name(program_id)``), else the
    one it spent the most kernel time in. One ExplorerError line when there is none."""
    if not tr.programs:
        raise ExplorerError("trace", NO_HLO, tr.file)
    ran = ran_programs(tr)
    if not ran:
        seen = sorted(m for m in tr.modules() if m)
        raise ExplorerError("trace", "none of the modules the trace carries ran in it (it ran: "
                                     f"{', '.join(s[:60] for s in seen[:5]) or 'nothing XLA named'})", tr.file)
    if not module:
        return ran[0]
    want = module.strip()
    picked = [p for p in ran if want in (p.module, program_label(p))]
    if not picked:
        raise ExplorerError("load", f"no module {want!r} ran in the trace (it ran: "
                                    + ", ".join(program_label(p) for p in ran[:20]) + ")", tr.file)
    return picked[0]


def bundle_from_trace(tr: Trace, p, bundle):
    """``bundle`` (the HLO program ``p`` of trace ``tr`` carries, from ``service.job.trace_job``) with the
    trace's timings of that program's events on it. Only the optimized module is in a trace:
    the bundle has no graph before optimization, and says so (``analysis.bundle.core.TRACE_ORIGIN``)."""
    if bundle.module("hlo_after") is None or bundle.module("hlo_after").name != p.module:
        raise ExplorerError("trace", f"the module {program_label(p)} the trace carries is not the optimized "
                                     "module it ran", tr.file)
    bundle = copy.copy(bundle)  # a shared (queued, cached) bundle is not changed: its fields are replaced
    bundle.environment = {**(bundle.environment or {}), "origin": TRACE_ORIGIN}
    bundle.source = {**(bundle.source or {}), "kind": "hlo", "name": p.module, "file": tr.file[-200:], "code": None}
    return apply_trace(bundle, trace=tr._replace(events=program_events(tr, p)))
