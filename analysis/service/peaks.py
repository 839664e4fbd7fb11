"""The machine's calibrated CPU peaks, shared between jobs through the store: which calibration
may be shared, and checked again when it is read.

A measuring job calibrates the peaks (``analysis.compile.measure.calibrate_peaks``) in its worker,
and the parent remembers them so the next jobs need not calibrate again. The worker of a job that
runs a user's code is the user's: what it returns is theirs to choose (text, or 1 B/s, which made
every later job's roofline 10^13 "of peak"). So only a calibration made in a job that runs no
user code (a gallery model: the project's own code) is shared, and it is checked to be numbers in
a physical range before it is stored and again when it is read. A user's job calibrates for
itself; its peaks stay in its own bundle.
"""

from __future__ import annotations

import math

from analysis.service.job import Job

# The store's key (with the machine's probe key): "trusted" since calibrations were shared only
# from jobs without user code; "caches" since they carry each cache's roof and their spread.
# Entries under an older key are never read.
KEY_PREFIX = "peaks:trusted:caches:"

# Physical ranges: from a slow laptop core's memory (0.1 GB/s) to beyond any machine's (100 TB/s);
# FLOP/s from 0.1 GFLOP/s to 10 EFLOP/s.
BYTES_PER_S = (1e8, 1e14)
FLOPS_PER_S = (1e8, 1e19)
MAX_TEXT = 512


def key(probe_key: str) -> str:
    return KEY_PREFIX + probe_key


def may_share(job: Job) -> bool:
    """Whether the calibration this job's worker made may be used by other jobs: the job runs
    none of a user's code (a gallery model, run as it is in the repository)."""
    return job.kind == "gallery"  # (its source is read from the gallery's file, never from the job)


def _rate(v, lo_hi) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and lo_hi[0] <= v <= lo_hi[1]


def checked(p) -> dict | None:
    """``p`` as a calibration that may be shared (only the fields a calibration has, each of its
    type, every rate in its physical range), else None."""
    if not isinstance(p, dict) or p.get("source") != "calibrated":
        return None
    machine, flops = p.get("machine"), p.get("flops_per_s")
    if not isinstance(machine, str) or not machine or len(machine) > MAX_TEXT:
        return None
    if not _rate(p.get("memory_bytes_per_s"), BYTES_PER_S):
        return None
    if not isinstance(flops, dict) or not 0 < len(flops) <= 8 or not all(
            isinstance(k, str) and len(k) <= 32 and _rate(v, FLOPS_PER_S) for k, v in flops.items()):
        return None
    out = {"source": "calibrated", "memory_bytes_per_s": p["memory_bytes_per_s"], "flops_per_s": dict(flops),
           "machine": machine}
    for k in ("device_kind", "note"):
        if isinstance(p.get(k), str) and len(p[k]) <= MAX_TEXT:
            out[k] = p[k]
    levels = p.get("memory_levels")
    if isinstance(levels, list) and len(levels) <= 4:  # the caches' roofs, each checked as memory's is
        out["memory_levels"] = [{"name": lv["name"], "bytes": lv["bytes"], "bytes_per_s": lv["bytes_per_s"]}
                                for lv in levels if isinstance(lv, dict) and isinstance(lv.get("name"), str)
                                and len(lv["name"]) <= 32 and _rate(lv.get("bytes_per_s"), BYTES_PER_S)
                                and type(lv.get("bytes")) is int and 0 < lv["bytes"] < 2 ** 40]
    sp = p.get("spread")
    if isinstance(sp, dict) and len(sp) <= 8:  # how steady each rate was over its runs
        out["spread"] = {k: {q: v[q] for q in ("median", "q1", "q3", "n") if type(v.get(q)) in (int, float)
                             and math.isfinite(v[q])}
                         for k, v in sp.items() if isinstance(k, str) and len(k) <= 32 and isinstance(v, dict)}
    return out
