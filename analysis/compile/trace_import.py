"""Timings from a user's own ``jax.profiler`` trace, onto the compile it ran.

A trace made on the user's machine (``jax.profiler.trace(DIR)``: ``DIR/plugins/profile/<run>/
<host>.xplane.pb``, a folder or a zip of it) holds every kernel's start and end, named by the
``hlo_op`` stat after the optimized module's instructions (docs/xla-findings.md). Given the
compile it ran (an XLA dump, HLO text or a bundle), ``apply_trace`` attributes its events exactly
as a measurement here does (``analysis.profile.attribute``: the same step, shares and spreads,
docs/numbers.md) and labels the timings with the device the trace names. This is how a
machine without a GPU shows real GPU timings.

What was checked where: CPU traces made by the test suite (``tests/test_trace_import.py``);
XLA:GPU traces only in the shape ``analysis.profile`` reads them (device planes, ``Stream``
lines, nested ``hlo_op`` names, no ``run_id``): no GPU trace from a real GPU has been read
by this code. TPU traces are refused with a message: their layout was never seen.

The trace is read with ``jax.profiler.ProfileData`` (XLA's own reader of the XSpace protobuf),
so this module needs JAX; the CLI runs it on the user's own files.
"""

from __future__ import annotations

import os
import zipfile
from collections import Counter

from analysis.errors import ExplorerError

MAX_XSPACE_BYTES = 512 * 2 ** 20  # one .xplane.pb read into memory at most


def _newest(paths: list[str]) -> str | None:
    return max(paths, key=lambda p: (os.path.getmtime(p), p)) if paths else None


def read_xspace(path: str) -> tuple[bytes, str]:
    """The serialized XSpace of a trace: ``path`` is an ``.xplane.pb``, a folder holding one
    (the newest is taken) or a zip of such a folder. Returns (bytes, the member's name)."""
    if os.path.isdir(path):
        found = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".xplane.pb")]
        pick = _newest(found)
        if pick is None:
            raise ExplorerError("trace", "no .xplane.pb in this folder (jax.profiler.trace(DIR) writes "
                                         "DIR/plugins/profile/<run>/<host>.xplane.pb)", path)
        path = pick
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            members = [i for i in z.infolist() if i.filename.endswith(".xplane.pb") and not i.is_dir()]
            if not members:
                raise ExplorerError("trace", "the zip holds no .xplane.pb", path)
            info = max(members, key=lambda i: (i.date_time, i.filename))
            if info.file_size > MAX_XSPACE_BYTES:
                raise ExplorerError("trace", f"{info.filename} is {info.file_size / 2 ** 20:.0f} MiB, over the "
                                             f"{MAX_XSPACE_BYTES // 2 ** 20} MiB a trace may be", path)
            with z.open(info) as f:
                data = f.read(MAX_XSPACE_BYTES + 1)
            return data, info.filename
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise ExplorerError("trace", e.strerror or str(e), path) from None
    if size > MAX_XSPACE_BYTES:
        raise ExplorerError("trace", f"{size / 2 ** 20:.0f} MiB, over the {MAX_XSPACE_BYTES // 2 ** 20} MiB a "
                                     "trace may be", path)
    with open(path, "rb") as f:
        return f.read(), os.path.basename(path)


def trace_device(pd) -> tuple[str, str]:
    """(platform, the device in words) of a trace: ``gpu`` when it has ``/device:GPU:N`` planes,
    ``cpu`` otherwise; TPU traces are refused (their layout was never seen here)."""
    names = [p.name for p in pd.planes]
    if any(n.startswith("/device:TPU") for n in names):
        raise ExplorerError("trace", "a TPU trace: this version reads CPU and GPU traces only (a TPU trace's "
                                     "layout was never seen here)")
    gpus = sorted(n for n in names if n.startswith("/device:GPU:"))
    if gpus:
        return "gpu", f"the trace's GPU ({', '.join(gpus[:4])}{', …' if len(gpus) > 4 else ''})"
    host = next((n for n in names if n.startswith("/host:")), "the host")
    return "cpu", f"the trace's CPU ({host})"


def _steps(events, module: str | None) -> int:
    """Executions of the module in the trace: distinct ``run_id`` values where events carry
    them (CPU), else the fewest launches of any of its instructions (each execution launches
    every instruction at least once; a loop's body more often)."""
    evs = [e for e in events if module is None or e.hlo_module == module]
    if evs and all(e.run_id is not None for e in evs):
        return len({e.run_id for e in evs})
    counts = Counter(e.instruction for e in evs)
    return min(counts.values()) if counts else 0


def apply_trace(bundle, path: str):
    """Fill ``bundle.timings`` from the trace at ``path`` (see the module docstring) and return
    the bundle. The timings say where they came from (``source: "trace"``, ``trace_device``)."""
    import jax

    from analysis.profile import attribute, coverage_note, events_from_profile

    data, member = read_xspace(path)
    try:
        pd = jax.profiler.ProfileData.from_serialized_xspace(data)
    except Exception as e:  # noqa: BLE001 - XLA's reader raises its own types for a damaged protobuf
        raise ExplorerError("trace", f"not a readable profiler trace: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}",
                            member) from None
    platform, device = trace_device(pd)
    events = events_from_profile(pd, platform)
    post = bundle.module("hlo_after")
    if post is None:
        raise ExplorerError("trace", "the compile has no optimized module to put the trace's times on")
    if not any(e.hlo_module == post.name for e in events):
        seen = sorted({e.hlo_module for e in events})
        raise ExplorerError("trace", f"no event of module {post.name} in the trace (it ran: "
                                     f"{', '.join(seen[:5]) or 'nothing XLA named'})", member)
    steps = _steps(events, post.name)
    t = attribute(events, bundle.kernels, steps, platform, post.name)
    ran = {e.instruction for e in events if e.hlo_module == post.name and e.program_id == t["program_id"]}
    names = {k.name for k in bundle.kernels}
    t.update({"platform": platform, "iterations": steps, "traced_steps": steps, "source": "trace",
              "trace_device": device, "trace_file": member[-200:], "events_seen": len(events),
              "matched_fraction": len(ran & names) / len(ran) if ran else 0.0, "peaks": None})
    t["coverage_note"] = coverage_note(t, platform)
    bundle.timings = t
    return bundle
