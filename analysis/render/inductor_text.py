"""XLA beside Inductor in words: the CLI's text of ``analysis.studies.inductor.beside_inductor``
(layer by layer, each side's kernels with the torch ops of that layer they fused, the layers they
also hold, and their times; the whole calls with their spreads and a verdict only where the
spreads part)."""

from __future__ import annotations

from analysis.measures import spread_text
from analysis.render.format import human_seconds
from analysis.studies.inductor import BesideInductor, SideKernel, differences

MAX_OPS_SHOWN = 6


def _ops(k: SideKernel) -> str:
    ops = list(k.ops[:MAX_OPS_SHOWN]) + ([f"+{len(k.ops) - MAX_OPS_SHOWN} more"] if len(k.ops) > MAX_OPS_SHOWN else [])
    text = ", ".join(ops) if ops else "(no torch op in its ops' names)"
    if k.also:
        text += f"  [also {', '.join(k.also[:4])}{' ...' if len(k.also) > 4 else ''}]"
    return text


def _time(k: SideKernel) -> str:
    if k.time is None:
        return ""
    t = spread_text(k.time, human_seconds)
    return t if k.home else f"({t}, counted in its own layer)"


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def inductor_text(r: BesideInductor, width: int = 40) -> str:
    out = [f"XLA beside Inductor (torch {r.torch or '?'}, CPU, default mode; {r.graphs} graph"
           f"{'s' if r.graphs != 1 else ''} compiled by Inductor)",
           f"  XLA: {_n(r.xla_kernels, 'kernel')}; Inductor: {_n(r.inductor_kernels, 'call')} "
           f"({_n(r.inductor_cpp, 'C++ kernel')}, {_n(r.inductor_library, 'ATen op')} run as library calls or as they are)"]
    if r.xla_call is not None and r.inductor_call is not None:
        out.append(f"  whole call, alternated ({r.xla_call.n} calls each): XLA {spread_text(r.xla_call, human_seconds)}, "
                   f"Inductor {spread_text(r.inductor_call, human_seconds)}: {r.verdict}")
    else:
        out.append("  not measured (--measure times each kernel and the two whole calls, alternated)")
    for row in r.rows:
        sums = ""
        if row.xla_s is not None or row.inductor_s is not None:
            sums = f"   (XLA {human_seconds(row.xla_s)}, Inductor {human_seconds(row.inductor_s)})"
        out += ["", f"{row.layer}{sums}"]
        for side, ks in (("XLA", row.xla), ("Inductor", row.inductor)):
            if not ks:
                out.append(f"  {side:9s}(no kernel holds an op of this layer)")
            for i, k in enumerate(ks):
                label = side if i == 0 else ""
                name = k.name if len(k.name) <= width else k.name[:width // 2] + "..." + k.name[-(width - width // 2 - 3):]
                out.append(f"  {label:9s}{name:{width}s} {k.what:24s} {_ops(k)}"
                           + (f"  {_time(k)}" if _time(k) else ""))
    diff = differences(r)
    if diff:
        out += ["", "Where the two compilers group the ops differently:"]
        out += [f"  - {d.replace('`', '')}" for d in diff]
    return "\n".join(out)
