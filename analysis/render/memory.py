"""Drawing ``bundle.memory``: live bytes over the schedule with the peak marked, the buffers
live at the peak (biggest first), the fusion-off comparison; as plotly figures (the app draws them
with plotly.js, the report as SVG: ``analysis.render.chart_svg``),
table rows, an HTML section for the report and text for the CLI. Reads the core
(``analysis.program.memory``) only; every string from the bundle is escaped in HTML."""

from __future__ import annotations

import html

from analysis.program import memory as core
from analysis.render.format import human_bytes

KIND_COLORS = {"parameter": "#4C78A8", "output": "#54A24B", "constant": "#9D9D9D", "temp": "#E45756"}
KIND_LABELS = {"parameter": "parameters", "output": "outputs", "constant": "constants", "temp": "temporaries"}
PEAK_COLOR = "#D62728"


def usable(mem: dict | None) -> bool:
    return bool(mem) and not mem.get("error") and bool(mem.get("values"))


def why_missing(bundle) -> str:
    mem = bundle.memory
    if mem and mem.get("error"):
        return f"The buffer assignment could not be read: {mem['error']}"
    if bundle.environment.get("deviceless") or bundle.environment.get("gpu_target"):
        return ("This compile was recorded before buffer assignments were kept; re-record it "
                "(scripts/record_gpu_target.py) to see its memory.")
    return ("No buffer assignment in this bundle: it comes from a compile that kept none (an older "
            "bundle, a plain HLO text, or a dump without *-buffer-assignment.txt). Compile it again to see one.")


def _source(v: dict) -> str:
    s = v.get("source")
    if not s:
        return ""
    f, line = s
    return f"{f.rsplit('/', 1)[-1]}:{line}"


def peak_rows(mem: dict, n: int | None = None) -> list[dict]:
    """One row per buffer live at the peak, biggest first: what a table shows."""
    rows = []
    for r in core.peak_buffers(mem)[:n]:
        rows.append({"buffer": r["name"], "kernel": r.get("kernel") or "", "kind": r["kind"],
                     "shape": r["shape"].split("{")[0], "size": human_bytes(r["size"]), "bytes": r["size"],
                     "op": r.get("op_name") or "", "line": _source(r),
                     "shares with": ", ".join(r.get("aliases") or [])})
    return rows


def headline(mem: dict) -> dict:
    """The numbers a summary strip shows."""
    p, t = mem.get("peak") or {}, mem.get("totals") or {}
    return {"peak": p.get("bytes"), "peak_step": p.get("step"), "peak_instruction": p.get("instruction"),
            "temp_peak": p.get("temp_peak_bytes"), "temp_at_peak": p.get("temp_bytes"), "temp": t.get("temp"), "argument": t.get("argument"),
            "output": t.get("output"), "allocations": len(mem.get("allocations") or []),
            "values": len(mem.get("values") or [])}


def _unit(top: int) -> tuple[str, int]:
    """The binary unit an axis whose largest value is ``top`` bytes is drawn in."""
    return next(((u, f) for u, f in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)) if top >= f), ("B", 1))


PERSISTENT = ("parameter", "constant", "output")  # live for (nearly) the whole program: fusion does not change them


def curve_figure(mem: dict, selected_step: int | None = None, font_size: int = 13):
    """Live bytes at each step of the schedule, in two panels on one step axis: the
    temporaries on top (what fusion changes), each on its own scale, and below them what lives
    for the whole program (parameters, constants, outputs, stacked); the peak marked on both.
    Apart, the parameters (often most of the peak) no longer flatten the temporaries' curve."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    import numpy as np

    curve = core.live_curve(mem)
    # (arrays: plotly checks a list value by value, which was most of this figure's time)
    steps = np.array([r["step"] for r in curve])
    names = np.array([r["instruction"] for r in curve], dtype=object)
    t_unit, t_scale = _unit(max((r["temp"] for r in curve), default=0))
    p_unit, p_scale = _unit(max((sum(r[k] for k in PERSISTENT) for r in curve), default=0))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12, row_heights=[0.6, 0.4],
                        subplot_titles=("temporaries (what fusion changes)",
                                        "parameters, constants and outputs (live throughout)"))
    panels = (("temp",), PERSISTENT)
    for row, (kinds, unit, scale) in enumerate(((panels[0], t_unit, t_scale), (panels[1], p_unit, p_scale)), start=1):
        for kind in kinds:
            ys = np.array([r[kind] / scale for r in curve], dtype=float)
            if not ys.any():
                continue
            fig.add_trace(go.Scatter(
                x=steps, y=ys, name=KIND_LABELS[kind], stackgroup=f"live{row}", mode="lines",
                line=dict(width=0.5, color=KIND_COLORS[kind]), customdata=names,
                hovertemplate="step %{x}: %{customdata}<br>" + KIND_LABELS[kind] + " %{y:.3~f} " + unit
                + "<extra></extra>"), row=row, col=1)
        fig.update_yaxes(title_text=unit, rangemode="tozero", row=row, col=1)
    p = mem.get("peak")
    if p:
        for row in (1, 2):
            fig.add_vline(x=p["step"], line=dict(color=PEAK_COLOR, dash="dash", width=1.5), row=row, col=1)
        fig.add_annotation(x=p["step"], y=(p.get("temp_bytes") or 0) / t_scale, xref="x", yref="y",
                           text=f"peak {human_bytes(p['bytes'])} at {p['instruction']} "
                                f"({human_bytes(p.get('temp_bytes'))} of it temporaries)",
                           showarrow=True, arrowhead=2, ax=40, ay=-30, font=dict(color=PEAK_COLOR, size=font_size),
                           bgcolor="rgba(255,255,255,0.85)")
    if selected_step is not None and (not p or selected_step != p["step"]):
        fig.add_vline(x=selected_step, line=dict(color="#FF7F0E", width=1.5))
    fig.update_layout(title="Live memory over the schedule", font=dict(size=font_size), height=420,
                      margin=dict(l=60, r=20, t=60, b=40), legend=dict(orientation="h", y=-0.16, font=dict(size=font_size)),
                      hovermode="x unified")
    fig.update_annotations(font_size=font_size)  # the panels' titles too
    fig.update_xaxes(title_text="step of the schedule (instruction order)", row=2, col=1)
    fig.update_xaxes(tickfont=dict(size=font_size - 1), title_font=dict(size=font_size))
    fig.update_yaxes(tickfont=dict(size=font_size - 1), title_font=dict(size=font_size))
    return fig


def peak_figure(mem: dict, n: int = 15, selected: str | None = None, font_size: int = 13):
    """The buffers live at the peak as bars, biggest on top, coloured by kind; a bar's
    ``customdata`` is the kernel that writes it (empty for parameters)."""
    import plotly.graph_objects as go

    rows = core.peak_buffers(mem)[:n][::-1]
    top = max((r["size"] for r in rows), default=0)
    unit, scale = _unit(top)
    labels = [f"{r['name']} {r['shape'].split('{')[0]}" for r in rows]
    fig = go.Figure(go.Bar(
        x=[r["size"] / scale for r in rows], y=labels, orientation="h",
        marker=dict(color=[KIND_COLORS.get(r["kind"], "#777") for r in rows],
                    line=dict(color=["#FF7F0E" if selected and r.get("kernel") == selected else "rgba(0,0,0,0)"
                                     for r in rows], width=3)),
        customdata=[r.get("kernel") or "" for r in rows],
        # beside the bar, at the chart's size ("auto" shrank a label to fit inside its bar)
        text=[human_bytes(r["size"]) for r in rows], textposition="outside", cliponaxis=False,
        constraintext="none",  # a label at the chart's size even where its bar is thinner than the text
        textfont=dict(size=font_size - 1),
        hovertemplate="%{y}<br>%{text}<br>kernel: %{customdata}<extra></extra>"))
    fig.update_layout(title="Buffers live at the peak", font=dict(size=font_size),
                      height=max(240, 40 + (2 * font_size) * len(rows)),
                      margin=dict(l=10, r=90, t=50, b=30), xaxis_title=unit, yaxis=dict(automargin=True))
    fig.update_xaxes(tickfont=dict(size=font_size - 1), title_font=dict(size=font_size))
    fig.update_yaxes(tickfont=dict(size=font_size - 1))
    return fig


def comparison_rows(cmp: dict) -> list[dict]:
    d, u = cmp.get("default") or {}, cmp.get("unfused") or {}
    rows = []
    for label, key in (("peak live memory", "peak_bytes"), ("temporary allocation", "temp_bytes"),
                       ("temporaries live at once (most)", "temp_peak_bytes")):
        a, b = u.get(key), d.get(key)
        rows.append({"": label, "fusion off": human_bytes(a), "default": human_bytes(b),
                     "saved": human_bytes(a - b) if a is not None and b is not None else "-"})
    return rows


def comparison_sentence(cmp: dict) -> str:
    n, size = cmp.get("only_unfused_count") or 0, cmp.get("only_unfused_bytes") or 0
    if not n:
        return "Every intermediate the fusion-off compile writes is written with fusion on too."
    return f"These {n} arrays, {human_bytes(size)}, were never written with fusion on."


def comparison_figure(cmp: dict, font_size: int = 13):
    import plotly.graph_objects as go

    d, u = cmp.get("default") or {}, cmp.get("unfused") or {}
    cats = ["peak live", "temporary allocation"]
    fig = go.Figure([
        go.Bar(name="fusion off", x=cats, y=[u.get("peak_bytes"), u.get("temp_bytes")], marker_color="#9D9D9D"),
        go.Bar(name="default", x=cats, y=[d.get("peak_bytes"), d.get("temp_bytes")], marker_color="#4C78A8"),
    ])
    fig.update_layout(barmode="group", title="Memory with fusion off and on", font=dict(size=font_size), height=300,
                      margin=dict(l=60, r=20, t=50, b=30), yaxis_title="bytes", legend=dict(font=dict(size=font_size)))
    fig.update_xaxes(tickfont=dict(size=font_size - 1))
    fig.update_yaxes(tickfont=dict(size=font_size - 1), title_font=dict(size=font_size))
    return fig


def agreement_note(mem: dict) -> str:
    """One sentence on how these numbers sit next to ``compiled.memory_analysis()``."""
    ag = mem.get("agreement") or {}
    if not ag:
        return ""
    same = [k for k in ("argument", "output", "temp", "alias") if k in ag and ag[k]["diff"] == 0]
    off = [f"{k} ({ag[k]['diff']:+,} B)" for k in ("argument", "output", "temp", "alias") if k in ag and ag[k]["diff"]]
    text = (f"Argument, output, temporary and alias bytes match compiled.memory_analysis() to the byte."
            if not off else f"Matches memory_analysis() for {', '.join(same) or 'nothing'}; differs for {', '.join(off)}.")
    p = ag.get("peak")
    if p:
        if p["xla"] == p["persistent"]:
            text += (f" XLA's peak_memory_in_bytes ({human_bytes(p['xla'])}) counts arguments, outputs and constants "
                     "only; the peak here adds the temporaries live at that step.")
        elif abs(p["xla"] - p.get("persistent_plus_temp_peak", -1)) <= 128:
            text += (f" XLA's peak_memory_in_bytes ({human_bytes(p['xla'])}) holds arguments, outputs and constants "
                     f"for the whole program plus the most temporaries live at once "
                     f"({p['xla'] - p['persistent_plus_temp_peak']:+,} B); the peak here counts an output only "
                     "from when it is written.")
        else:
            text += f" XLA's peak_memory_in_bytes is {human_bytes(p['xla'])}."
    return text


# ----------------------------------------------------------------------------- CLI and report


def memory_text(bundle, top: int = 10) -> str:
    """The CLI's ``memory`` output: the peak, the top buffers at it, the fusion-off comparison."""
    mem = bundle.memory
    if not usable(mem):
        return why_missing(bundle)
    h = headline(mem)
    lines = [f"{bundle.title}: peak {human_bytes(h['peak'])} live at step {h['peak_step']} ({h['peak_instruction']}); "
             f"arguments {human_bytes(h['argument'])}, outputs {human_bytes(h['output'])}, "
             f"temporary allocation {human_bytes(h['temp'])} ({human_bytes(h['temp_peak'])} live at most)"]
    note = agreement_note(mem)
    if note:
        lines.append(note)
    rows = peak_rows(mem, top)
    lines.append("")
    lines.append(f"Buffers live at the peak (top {len(rows)}):")
    w = max([len(r["buffer"]) for r in rows] + [6])
    for r in rows:
        lines.append(f"  {r['size']:>10}  {r['kind']:<9}  {r['buffer']:<{w}}  {r['shape']:<22} "
                     f"{('kernel ' + r['kernel']) if r['kernel'] else '':<28} {r['line']}".rstrip())
    cmp = (bundle.fusion_comparison or {}).get("memory")
    if cmp:
        lines.append("")
        lines.append("Fusion off vs on:")
        for r in comparison_rows(cmp):
            lines.append(f"  {r['']:<32} off {r['fusion off']:>10}   on {r['default']:>10}   saved {r['saved']:>10}")
        lines.append("  " + comparison_sentence(cmp))
        for v in cmp.get("only_unfused", [])[:top]:
            lines.append(f"    {human_bytes(v['size']):>10}  {v['name']}  {v['shape'].split('{')[0]}  {v.get('op_name') or ''}")
    return "\n".join(lines)


def _e(s) -> str:
    return html.escape("" if s is None else str(s), quote=True)


def memory_section_html(bundle) -> str:
    """The report's memory section ("" when the bundle has no buffer assignment), its charts
    drawn as SVG (``analysis.render.chart_svg``, as the report's others)."""
    mem = bundle.memory
    if not usable(mem):
        return ""
    h = headline(mem)
    parts = ["<section id='memory'><h2>Memory</h2>",
             f"<p>Peak <b>{_e(human_bytes(h['peak']))}</b> live at step {_e(h['peak_step'])} "
             f"(<code>{_e(h['peak_instruction'])}</code>); temporary allocation {_e(human_bytes(h['temp']))}.</p>",
             f"<p class='muted small'>{_e(agreement_note(mem))}</p>"]
    try:
        from analysis.render.chart_svg import figure_svg

        for i, fig in enumerate((curve_figure(mem), peak_figure(mem))):
            parts.append(f"<div class='chart'>{figure_svg(fig, f'chart-memory-{i}')}</div>")
    except ImportError:  # plotly not installed
        pass
    rows = peak_rows(mem, 20)
    parts.append("<table class='kt'><thead><tr><th>buffer</th><th>kind</th><th>shape</th><th>size</th>"
                 "<th>kernel</th><th>source</th></tr></thead><tbody>")
    parts += [f"<tr><td>{_e(r['buffer'])}</td><td>{_e(r['kind'])}</td><td>{_e(r['shape'])}</td>"
              f"<td class=num>{_e(r['size'])}</td><td>{_e(r['kernel'])}</td><td>{_e(r['line'])}</td></tr>" for r in rows]
    parts.append("</tbody></table>")
    cmp = (bundle.fusion_comparison or {}).get("memory")
    if cmp:
        parts.append("<h3>Fusion off vs on</h3><table class='kt narrow'><thead><tr><th></th><th>fusion off</th>"
                     "<th>default</th><th>saved</th></tr></thead><tbody>")
        parts += [f"<tr><td>{_e(r[''])}</td><td class=num>{_e(r['fusion off'])}</td><td class=num>{_e(r['default'])}"
                  f"</td><td class=num>{_e(r['saved'])}</td></tr>" for r in comparison_rows(cmp)]
        parts.append(f"</tbody></table><p>{_e(comparison_sentence(cmp))}</p><ul class='small'>")
        parts += [f"<li>{_e(human_bytes(v['size']))} <code>{_e(v['name'])}</code> {_e(v['shape'].split('{')[0])} "
                  f"{_e(v.get('op_name') or '')}</li>" for v in cmp.get("only_unfused", [])[:15]]
        parts.append("</ul>")
    parts.append("</section>")
    return "".join(parts)
