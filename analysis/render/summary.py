"""The one-screen text summary of a Bundle (the CLI's view; the app shows the same numbers)."""

from __future__ import annotations

from analysis.bundle import Bundle, device_label
from analysis.kernels import ROUTE_LABELS, ROUTES


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
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e9:.0f} ns"


def summary_text(b: Bundle) -> str:
    m = b.metrics
    env = b.environment
    lines = [f"{b.title}  ·  {device_label(env)} "
             f"({env.get('backend', '?')}{', jax ' + env['jax'] if env.get('jax') else ''})"]
    if "compute_ops_before" in m:
        lines.append(f"  ops before optimization : {m['compute_ops_before']}")
    if "kernels_after" in m:
        lines.append(f"  kernels after           : {m['kernels_after']}"
                     + (f" (+{m['control_ops_after']} control-flow ops)" if m.get("control_ops_after") else ""))
    if "fusion_coverage" in m:
        lines.append(f"  fusion coverage         : {m['fusion_coverage']:.0%} of ops ended inside a multi-op fusion")
    if "unfused_bytes" in m:
        lines.append(f"  memory traffic (est.)   : {human_bytes(m['unfused_bytes'])} unfused -> "
                     f"{human_bytes(m['fused_bytes'])} fused, "
                     + (f"{human_bytes(m['bytes_saved'])} saved ({m['bytes_saved_fraction']:.0%})"
                        if m["bytes_saved"] >= 0 else
                        f"{human_bytes(-m['bytes_saved'])} more ({-m['bytes_saved_fraction']:.0%})"))
    by_route = m.get("kernels_by_route", {})
    if by_route:
        parts = [f"{ROUTE_LABELS[r]} {by_route[r]}" for r in ROUTES if by_route.get(r)]
        lines.append("  kernels by route        : " + (", ".join(parts) or "none"))
    libs = library_calls(m)
    if libs:
        lines.append("  library calls           : " + ", ".join(f"{k} {v}" for k, v in libs.items()))
    if b.phase_seconds:
        lines.append("  time per phase          : " + ", ".join(f"{k} {human_seconds(v)}" for k, v in b.phase_seconds.items()))
    t = b.timings
    if t and t.get("kernels"):
        lines.append(f"  measured step (median)  : {human_seconds(t.get('step_median_s'))} wall-clock over "
                     f"{t.get('iterations')} calls; kernels busy {human_seconds(t.get('device_busy_s'))} "
                     f"({t.get('busy_fraction', 0):.0%}), {t.get('attributed_fraction', 0):.0%} of that attributed")
        peaks = t.get("peaks") or {}
        if peaks.get("memory_bytes_per_s"):
            fl = ", ".join(f"{k} {human_flops(v)}/s" for k, v in (peaks.get("flops_per_s") or {}).items())
            lines.append(f"  {'peaks (' + str(peaks.get('source', '?')) + ')':24s}: {human_bytes(peaks['memory_bytes_per_s'])}/s memory, {fl}")
        lines.append("  top kernels             :")
        lines.append(f"    {'kernel':34s} {'route':10s} {'median':>10s} {'calls':>6s} {'share':>6s}  {'GB/s':>8s} {'% peak':>7s}")
        rows = sorted(t["kernels"].values(), key=lambda r: -r.get("total_s", 0))
        for row in rows[:10]:
            gbps = row.get("gbps")
            pct = row.get("pct_of_peak")
            calls = row.get("calls", 0)
            lines.append(f"    {row['name'][:34]:34s} {row.get('route', ''):10s} {human_seconds(row.get('median_s')):>10s}"
                         f" {calls:6.4g} {row.get('share', 0):6.1%}{'*' if row.get('inclusive') else ' '}"
                         f" {('%8.1f' % gbps) if gbps is not None else '       -'}"
                         f" {('%6.0f%%' % pct) if pct is not None else '      -'}")
        if len(rows) > 10:
            lines.append(f"    ... {len(rows) - 10} more")
        if any(r.get("inclusive") for r in rows[:10]):
            lines.append("    * control flow: its time includes the kernels it runs")
        if t.get("coverage_note"):
            lines.append(f"  note                    : {t['coverage_note']}")
        from analysis.compile.measure import over_peak_note

        if over_peak_note(t):
            lines.append(f"  note                    : {over_peak_note(t)}")
        if t.get("command_buffer_note"):
            lines.append(f"  note                    : {t['command_buffer_note']}")
    fc = b.fusion_comparison
    if fc:
        d, u = fc.get("default", {}), fc.get("unfused", {})
        lines.append(f"  fusion off ({', '.join(fc.get('disabled_passes', []))}):")
        lines.append(f"    kernels               : {u.get('kernels')} unfused -> {d.get('kernels')} default "
                     f"({fc.get('kernels_saved'):+d} saved)")
        lines.append(f"    bytes (est.)          : {human_bytes(u.get('bytes'))} unfused -> {human_bytes(d.get('bytes'))} default")
        if fc.get("measured") and u.get("step_median_s") and d.get("step_median_s"):
            lines.append(f"    step (median)         : {human_seconds(u['step_median_s'])} unfused -> "
                         f"{human_seconds(d['step_median_s'])} default ({fc.get('speedup') or 0:.2f}x)")
    return "\n".join(lines)
