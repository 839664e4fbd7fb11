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
