"""Formatting numbers for people: bytes, FLOPs, seconds, and the library calls of a compile.
One definition each, for every view (app, CLI, report, lessons)."""

from __future__ import annotations


def library_calls(metrics: dict) -> dict:
    """Library name -> kernels handed to it. ``kernels_by_library`` also counts Triton kernels
    (their code generator is named there); they are generated code, so they are left out."""
    return {k: v for k, v in (metrics.get("kernels_by_library") or {}).items() if k != "Triton"}


def human_bytes(n: float | int | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{sign}{n:.0f} {unit}" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1024
    return f"{sign}{n:.1f} TiB"


def human_flops(n: float | int | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("", "K", "M", "G", "T", "P"):
        if abs(n) < 1000 or unit == "P":
            return f"{n:.3g} {unit}FLOP"
        n /= 1000
    return f"{n:.3g} PFLOP"


def human_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 0:  # a difference that went the other way: the same unit as its size, signed
        return "-" + human_seconds(-s)
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e9:.0f} ns"


def human_bandwidth(bytes_per_s: float | None) -> str:
    """A rate of bytes in one unit everywhere: ``20.1 GiB/s`` (binary, as ``human_bytes``)."""
    return "-" if bytes_per_s is None else f"{bytes_per_s / 2 ** 30:.3g} GiB/s"


def human_flop_rate(flops_per_s: float | None) -> str:
    """A rate of FLOPs in one unit everywhere: ``123 GFLOP/s`` (never TFLOP/s beside GFLOP/s)."""
    return "-" if flops_per_s is None else f"{flops_per_s / 1e9:,.4g} GFLOP/s"


def peaks_sentence(peaks: dict | None) -> str | None:
    """The roofs a bundle's rates are measured against, in one unit system, with how steady a
    calibration was (the middle half of its runs): the app, the CLI and the report say this."""
    if not isinstance(peaks, dict) or not peaks.get("memory_bytes_per_s"):
        return None
    spread = peaks.get("spread") if isinstance(peaks.get("spread"), dict) else {}

    def runs(key):
        s = spread.get(key)
        if isinstance(s, dict) and isinstance(s.get("q1"), (int, float)) and isinstance(s.get("q3"), (int, float)):
            return s
        return None

    mem = human_bandwidth(peaks["memory_bytes_per_s"])
    s = runs("memory")
    if s:
        mem += f" (its {s.get('n')} runs' middle half {s['q1'] / 2 ** 30:.3g}–{s['q3'] / 2 ** 30:.3g} GiB/s)"
    parts = [f"memory {mem}"]
    for lv in peaks.get("memory_levels") or []:
        if isinstance(lv, dict) and isinstance(lv.get("bytes_per_s"), (int, float)):
            parts.append(f"{lv.get('name')} ({human_bytes(lv.get('bytes'))}) {human_bandwidth(lv['bytes_per_s'])}")
    for k, v in (peaks.get("flops_per_s") or {}).items():
        f = f"{k} {human_flop_rate(v)}"
        s = runs(k)
        if s:
            f += f" (middle half {s['q1'] / 1e9:,.4g}–{s['q3'] / 1e9:,.4g})"
        parts.append(f)
    what = peaks.get("note") or peaks.get("source") or "peaks"
    best = " (the best run of each)" if peaks.get("source") == "calibrated" else ""
    return f"Roofs{best}: {', '.join(parts)}. {what}."
