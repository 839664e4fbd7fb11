"""The kernel table's rows, one definition for the app's table and the HTML report's.

Pure (Bundle in, dicts out; no plotly, no Streamlit). Each row says what a person reading a
kernel table asks: what it is (route, library, what it does), what it fused (its ops and how
many ops of the program it does (``analysis.program.links.op_count``, the count every view prints), through provenance: ``analysis.program.links``), where in the
model's own file it came from, and when measured, its time, share, throughput and calls: the
time and share of ``analysis.measures.KernelTime`` (time = share x step), its own time only where
that differs as written.
"""

from __future__ import annotations

from analysis import measures
from analysis.bundle.core import Bundle
from analysis.program.kernels import Kernel
from analysis.program.links import op_count
from analysis.render.format import human_seconds
from analysis.render.module_graphs import kernel_label


def user_lines(b: Bundle, k: Kernel | None) -> tuple[list[int], list[str]]:
    """(lines of the model's own file, other places as ``file:line``) that a kernel came from.
    A line counts as the model's own when the bundle carries the model's code and the place is
    in that file (or names no file)."""
    if k is None:
        return [], []
    user_file = b.source.get("file")
    mine, other = [], []
    for f, ln in k.source_lines:
        if b.source.get("code") and (not user_file or not f or f == user_file):
            mine.append(ln)
        else:
            other.append(f"{str(f).rsplit('/', 1)[-1]}:{ln}")
    return sorted(set(mine)), list(dict.fromkeys(other))


def what(k: Kernel, prov=None) -> str:
    """The second line of the kernel's graph label: what runs it (library and call, Triton
    tiles, fusion kind and op count)."""
    return kernel_label(k, n_ops=op_count(prov, k) if prov is not None else None).split("\n", 1)[1]


def fused_ops(k: Kernel | None) -> list[str]:
    """The opcodes a kernel's fusion holds, in order (parameters left out)."""
    return [o for o in (k.fused_opcodes if k is not None else ()) if o != "parameter"]


def fused_text(ops: list[str], most: int = 6) -> str:
    """``"3: dot, add, maximum"``; past ``most`` ops, ``", +N"``. Empty for no ops."""
    if not ops:
        return ""
    shown = ", ".join(ops[:most]) + (f", +{len(ops) - most}" if len(ops) > most else "")
    return f"{len(ops)}: {shown}"


def _times(kt: measures.KernelTime | None) -> dict:
    """A row's time, share and own time (µs; own None where it is written as the time is)."""
    if kt is None:
        return {"time_us": None, "share": None, "own_us": None}
    return {"time_us": kt.time_s * 1e6, "share": kt.share,
            "own_us": kt.own_s * 1e6 if kt.own_shown(human_seconds) else None}


def _rates(kr: measures.KernelRate | None) -> dict:
    """A row's throughput columns from the one object (``measures.KernelRate``): GiB/s and GFLOP/s
    over the kernel's own time, and its % of the roof that applies to it (never above 100%)."""
    if kr is None:
        return {"gib_s": None, "gflops": None, "pct_of_roof": None, "roof": None, "roof_note": ""}
    return {"gib_s": kr.bytes_per_s / 2 ** 30 if kr.bytes_per_s is not None else None,
            "gflops": kr.flops_per_s / 1e9 if kr.flops_per_s is not None else None,
            "pct_of_roof": kr.pct_of_roof, "roof": kr.roof, "roof_note": kr.roof_note}


def kernel_rows(bundle: Bundle) -> list[dict]:
    """One row per kernel. Measured columns are None when the bundle carries no timings;
    kernels that did not run have calls 0. Measured rows come slowest first, control flow
    (whose time includes the kernels it runs) last."""
    t = bundle.timings or {}
    timed = t.get("kernels") or {}
    kts = measures.kernel_times(t)
    rates = measures.kernel_rates(t)
    prov = bundle.provenance
    rows = []
    seen = set()
    for k in bundle.kernels:
        r = timed.get(k.name)
        seen.add(k.name)
        mine, other = user_lines(bundle, k)
        rows.append({
            "kernel": k.name, "route": k.route, "library": k.library or "",
            "what": what(k, prov), "fused_ops": fused_ops(k), "absorbed": op_count(prov, k),
            "lines": mine, "other_lines": other,
            "calls": r["calls"] if r else (0 if timed else None),
            **_times(kts.get(k.name) if r else None),
            **_rates(rates.get(k.name) if r else None),
            "bytes": k.bytes, "flops": k.flops,
            "inclusive": bool(r and r.get("inclusive")),
            "context": k.context,
        })
    for name, r in timed.items():  # measured compile differed (GPU): rows the bundle lacks
        if name not in seen:
            rows.append({"kernel": name, "route": r.get("route", "unknown"), "library": r.get("library") or "",
                         "what": r.get("library") or "", "fused_ops": [], "absorbed": 0, "lines": [],
                         "other_lines": [],
                         "calls": r["calls"], **_times(kts.get(name)),
                         **_rates(rates.get(name)), "bytes": r.get("bytes"), "flops": r.get("flops"),
                         "inclusive": bool(r.get("inclusive")), "context": r.get("context", "")})
    if timed:
        rows.sort(key=lambda r: (r["inclusive"], -(r["time_us"] or 0)))
    return rows
