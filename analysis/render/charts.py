"""Charts of a Bundle's kernels: five plotly figures (top kernels, treemap,
one-step timeline, roofline, fusion comparison).

Pure: Bundle in, plotly figure out (no Streamlit, no JAX), so they are tested directly and used
by both the app (``app.kernels_view``) and the HTML report (``analysis.render.report``).
Colours are the routes' (``analysis.program.kernels.ROUTE_COLORS``) everywhere.
"""

from __future__ import annotations

import math
from typing import Callable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis import measures
from analysis.bundle.core import Bundle
from analysis.program.kernels import ROUTE_COLORS, ROUTE_LABELS, ROUTES
from analysis.render.format import human_bandwidth, human_bytes, human_flop_rate, human_seconds
from analysis.render.rows import kernel_rows  # noqa: F401 - the table's rows, re-exported

UNKNOWN_COLOR = "#777777"
FONT = dict(size=14)  # no chart text under 14 px (presentation mode makes it 16)


SELECTED = "#FF7F0E"  # the selection colour every view shares (analysis.render.graph.HIGHLIGHT)


def _color(route: str) -> str:
    return ROUTE_COLORS.get(route, UNKNOWN_COLOR)


def route_label(route: str) -> str:
    return ROUTE_LABELS.get(route, route)


def _us(s) -> float | None:
    return None if s is None else s * 1e6


def measured(bundle: Bundle) -> bool:
    return bool(bundle.timings and bundle.timings.get("kernels"))


# ----------------------------------------------------------------------------- table


def _leaf_rows(bundle: Bundle) -> list[dict]:
    """Measured rows of kernels that do work themselves (control flow's inclusive time left out)."""
    t = bundle.timings or {}
    rows = t.get("kernels") or {}
    # the most time first (share x step: analysis.measures.kernel_times)
    return [rows[name] for name, kt in measures.kernel_times(t).items() if not kt.inclusive]


# ----------------------------------------------------------------------------- figures


def _empty(title: str, text: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=text, showarrow=False, font=dict(size=14), xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_layout(title=title, xaxis_visible=False, yaxis_visible=False, height=260, font=FONT)
    return fig


def top_kernels_figure(bundle: Bundle, n: int = 15, selected: str | None = None) -> go.Figure:
    """Horizontal bars of the kernels with the most time per step (median), coloured by route.
    Unmeasured bundles show bytes moved instead. The ``selected`` kernel's bar is outlined."""
    if measured(bundle):
        # time = share x step, as the table and the graph write it (analysis.measures.KernelTime)
        kts = measures.kernel_times(bundle.timings)
        rows = [r for r in _leaf_rows(bundle) if r["name"] in kts][:n]
        vals = [kts[r["name"]].time_s * 1e6 for r in rows]
        names = [r["name"] for r in rows]
        routes = [r["route"] for r in rows]
        text = [f"{human_seconds(kts[r['name']].time_s)} · {kts[r['name']].share:.0%}"
                + (f" · ×{r['calls']:g}" if r["calls"] != 1 else "") for r in rows]
        xtitle, title = "time per step (µs: share × step)", f"Top {len(rows)} kernels by time"
    else:
        ks = sorted((k for k in bundle.kernels if k.route != "control"), key=lambda k: -k.bytes)[:n]
        vals = [k.bytes / 2 ** 20 for k in ks]
        names, routes = [k.name for k in ks], [k.route for k in ks]
        text = [human_bytes(k.bytes) for k in ks]
        xtitle, title = "bytes moved (MiB, estimate)", f"Top {len(ks)} kernels by bytes (not measured)"
    if not names:
        return _empty(title, "no kernels")
    fig = go.Figure()
    for route in ROUTES + ("unknown",):
        idx = [i for i, r in enumerate(routes) if r == route]
        if not idx:
            continue
        fig.add_bar(y=[names[i] for i in idx], x=[vals[i] for i in idx], orientation="h",
                    marker=dict(color=_color(route),
                                line=dict(color=[SELECTED if names[i] == selected else _color(route) for i in idx],
                                          width=[4 if names[i] == selected else 0 for i in idx])),
                    name=route_label(route), text=[text[i] for i in idx],
                    textposition="auto", customdata=[names[i] for i in idx],
                    hovertemplate="%{y}<br>%{text}<extra>" + route_label(route) + "</extra>")
    fig.update_layout(title=title, xaxis_title=xtitle, barmode="stack", font=FONT,
                      yaxis=dict(categoryorder="array", categoryarray=names[::-1]),
                      height=max(260, 28 * len(names) + 120), legend_title_text="route",
                      margin=dict(l=10, r=10, t=50, b=40))
    return fig


TREEMAP_KERNELS = 300  # kernels drawn as their own box in the treemap
TIMELINE_LABELS = 300  # launches in a step up to which the timeline names each bar


def treemap_figure(bundle: Bundle) -> go.Figure:
    """Route -> library -> kernel, sized by measured time (or bytes when not measured)."""
    if measured(bundle):
        kts = measures.kernel_times(bundle.timings)
        items = [(r["route"], r.get("library") or route_label(r["route"]), r["name"], kts[r["name"]].time_s * 1e6)
                 for r in _leaf_rows(bundle) if kts[r["name"]].time_s > 0]
        unit, title = "µs", "Where the step's time goes"
    else:
        items = [(k.route, k.library or route_label(k.route), k.name, k.bytes / 2 ** 20)
                 for k in bundle.kernels if k.route != "control" and k.bytes]
        unit, title = "MiB", "Where the bytes go (not measured)"
    if not items:
        return _empty(title, "no kernels")
    if len(items) > TREEMAP_KERNELS:
        # thousands of boxes (and their labels) stall the browser for seconds: the biggest
        # kernels each, the rest of each library as one box
        items.sort(key=lambda it: -it[3])
        rest: dict[tuple[str, str], list] = {}
        for route, lib, name, v in items[TREEMAP_KERNELS:]:
            r = rest.setdefault((route, lib), [0, 0.0])
            r[0] += 1
            r[1] += v
        items = items[:TREEMAP_KERNELS] + [(route, lib, f"{n:,} smaller kernels", v)
                                            for (route, lib), (n, v) in rest.items()]
    ids, labels, parents, values, colors, custom = [], [], [], [], [], []
    routes: dict[str, float] = {}
    libs: dict[tuple[str, str], float] = {}
    for route, lib, name, v in items:
        routes[route] = routes.get(route, 0) + v
        libs[(route, lib)] = libs.get((route, lib), 0) + v
    for route, v in routes.items():
        ids.append(route), labels.append(route_label(route)), parents.append(""), values.append(v)
        colors.append(_color(route)), custom.append("")
    for (route, lib), v in libs.items():
        ids.append(f"{route}/{lib}"), labels.append(lib), parents.append(route), values.append(v)
        colors.append(_color(route)), custom.append("")
    for route, lib, name, v in items:
        ids.append(f"{route}/{lib}/{name}"), labels.append(name), parents.append(f"{route}/{lib}")
        values.append(v), colors.append(_color(route)), custom.append(name)
    fig = go.Figure(go.Treemap(ids=ids, labels=labels, parents=parents, values=values, branchvalues="total",
                               marker=dict(colors=colors), customdata=custom,
                               hovertemplate="%{label}<br>%{value:.3g} " + unit + " · %{percentRoot:.1%}<extra></extra>",
                               texttemplate="%{label}<br>%{percentRoot:.0%}"))
    fig.update_layout(title=title, margin=dict(l=5, r=5, t=50, b=5), height=460, font=FONT)
    return fig


def timeline_figure(bundle: Bundle) -> go.Figure:
    """A Gantt chart of one (median) step: one row per thread/stream, one bar per kernel
    launch; control flow (which spans the kernels it runs) on its own row."""
    t = bundle.timings or {}
    events = (t.get("timeline") or {}).get("events") or []
    if not events:
        return _empty("One step", "not measured" if not t else "no events recorded")
    lines = sorted({e["line"] for e in events})
    short = {ln: (f"thread {i + 1}" if not ln.startswith("/device") else ln.split(" ", 1)[-1]) for i, ln in enumerate(lines)}
    # a name inside every bar is what costs the browser (each is measured to fit): only for a
    # step of a few hundred launches; a longer one names them on hover
    named = len(events) <= TIMELINE_LABELS
    fig = go.Figure()
    for route in ROUTES + ("unknown",):
        evs = [e for e in events if e["route"] == route]
        if not evs:
            continue
        rows = [short[e["line"]] + (" · control" if route == "control" else "") for e in evs]
        fig.add_bar(base=[e["start_s"] * 1e6 for e in evs], x=[max(e["duration_s"] * 1e6, 1e-3) for e in evs],
                    y=rows, orientation="h", name=route_label(route), marker_color=_color(route),
                    opacity=0.45 if route == "control" else 1.0, customdata=[e["name"] for e in evs],
                    text=[e["name"] for e in evs] if named else None, textposition="inside" if named else "none",
                    insidetextanchor="middle",
                    hovertemplate="%{customdata}<br>start %{base:.1f} µs, %{x:.2f} µs<extra></extra>")
    fig.update_layout(title="One step, kernel by kernel (median step)", xaxis_title="µs from the step's first kernel",
                      barmode="overlay", height=220 + 40 * len(lines), font=FONT, legend_title_text="route",
                      margin=dict(l=10, r=10, t=50, b=40))
    return fig


def roofline_figure(bundle: Bundle, selected: str | None = None) -> go.Figure:
    """Arithmetic intensity (FLOP/byte) against achieved FLOP/s per kernel, log-log, under the
    device's roofs: memory's and each calibrated cache's bandwidth × intensity, capped by each
    compute peak. A kernel's rates are over its own time (``measures.kernel_rates``, the numbers
    the table shows); its hover names the roof it is measured against."""
    t = bundle.timings or {}
    rates = measures.kernel_rates(t)
    kts = measures.kernel_times(t)
    routes = {r.get("name"): r.get("route", "unknown") for r in _leaf_rows(bundle)}
    pts = [r for r in rates.values() if r.flops_per_s and r.intensity and r.name in routes]
    if not pts:
        return _empty("Roofline", "not measured" if not t else "no kernel with both FLOPs and bytes")
    peaks = t.get("peaks") or {}
    ai = [r.intensity for r in pts]
    lo = 10 ** math.floor(math.log10(min(ai)) - 0.5)
    hi = 10 ** math.ceil(math.log10(max(ai)) + 0.5)
    fig = go.Figure()
    fpeaks = peaks.get("flops_per_s") or {}
    top = max(fpeaks.values()) if fpeaks else None
    for name, size, bw in measures.memory_roofs(peaks):
        label = "memory" if name == "memory" else f"{name} ({human_bytes(size)})"
        xs = [lo, max(lo, min(top / bw, hi)), hi] if top else [lo, hi]
        ys = [min(top, x * bw) if top else x * bw for x in xs]
        fig.add_scatter(x=xs, y=ys, mode="lines", line=dict(color="#444" if name == "memory" else "#999", width=1.5,
                                                             dash="solid" if name == "memory" else "dash"),
                        name=f"roof: {label} {human_bandwidth(bw)}", hoverinfo="name")
    for name, fp in sorted(fpeaks.items(), key=lambda kv: -kv[1]):
        fig.add_scatter(x=[lo, hi], y=[fp, fp], mode="lines", line=dict(color="#444", width=1, dash="dot"),
                        name=f"roof: {name} {human_flop_rate(fp)}", hoverinfo="name")
    tot = max(kts[r.name].time_s for r in pts) or 1.0
    for route in ROUTES + ("unknown",):
        rs = [r for r in pts if routes.get(r.name) == route]
        if not rs:
            continue
        fig.add_scatter(x=[r.intensity for r in rs], y=[r.flops_per_s for r in rs], mode="markers",
                        marker=dict(color=_color(route), size=[8 + 22 * math.sqrt(kts[r.name].time_s / tot) for r in rs],
                                    line=dict(color=[SELECTED if r.name == selected else "white" for r in rs],
                                              width=[4 if r.name == selected else 1 for r in rs])),
                        name=route_label(route), customdata=[r.name for r in rs],
                        text=[_rate_hover(r, kts[r.name]) for r in rs],
                        hovertemplate="%{text}<br>%{x:.3g} FLOP/byte<extra></extra>")
    src = peaks.get("source")
    fig.update_layout(title="Roofline" + (f" ({'data-sheet peaks' if src == 'table' else 'calibrated roofs'})" if src else ""),
                      # SI prefixes on the ticks ("100G", not plotly's default "100B", which reads as bytes)
                      # a label a decade (dtick 1): plotly's 2 and 5 between them are drawn at 3/4 size
                      xaxis=dict(type="log", title="arithmetic intensity (FLOP per byte moved)", exponentformat="SI", dtick=1),
                      yaxis=dict(type="log", title="achieved FLOP/s (over its own time)", exponentformat="SI", dtick=1),
                      height=480, font=FONT, margin=dict(l=10, r=10, t=70, b=40), title_y=0.97)
    return fig


def _rate_hover(r: measures.KernelRate, kt: measures.KernelTime) -> str:
    """A roofline point's hover: the time the table shows, and the rates over its own time."""
    out = f"{r.name}<br>{human_seconds(kt.time_s)} ({kt.share:.1%} of the step)"
    if kt.own_shown(human_seconds):
        out += f", own time {human_seconds(kt.own_s)}"
    out += f"<br>{human_bandwidth(r.bytes_per_s)}, {human_flop_rate(r.flops_per_s)} over its own time"
    if r.pct_of_roof is not None:
        out += f"<br>{r.pct_of_roof:.0f}% of the {r.roof} roof"
    elif r.roof_note:
        out += "<br>" + r.roof_note
    return out


def fusion_table(bundle: Bundle) -> list[dict]:
    """Fusion off against on, one row per number (``measures.fusion_rows``: the same rows the CLI
    and the report print)."""
    return [{"": r["what"], "fusion off": r["off"], "fusion on": r["on"], "change": r["change"],
             "verdict": r["verdict"]}
            for r in measures.fusion_rows(bundle.fusion_comparison, human_seconds, _count, human_bytes)]


def _count(v) -> str:
    return "–" if v is None else f"{v:d}"


def fusion_figure(bundle: Bundle) -> go.Figure:
    """Fusion off vs on, side by side: kernels, bytes and (when measured) the untraced call with
    its interquartile range as an error bar."""
    fc = bundle.fusion_comparison
    if not fc:
        return _empty("What fusion saved", "not compared: compile with fusion comparison on")
    d, u = fc["default"], fc["unfused"]
    panels = [("kernels", u["kernels"], d["kernels"], lambda v: f"{v:d}", None),
              ("bytes moved (MiB)", u["bytes"] / 2 ** 20, d["bytes"] / 2 ** 20, lambda v: f"{v:.2f}", None)]
    cu, cd = measures.call(u), measures.call(d)
    if fc.get("measured") and cu and cd:
        panels.append(("call, no profiler (µs)", cu.median * 1e6, cd.median * 1e6, lambda v: f"{v:.0f}",
                       ((cu.q1 * 1e6, cu.q3 * 1e6), (cd.q1 * 1e6, cd.q3 * 1e6))))
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[0] for p in panels])
    for i, (name, a, b, fmt, iqr) in enumerate(panels, start=1):
        err = None
        if iqr:
            err = dict(type="data", symmetric=False, array=[iqr[0][1] - a, iqr[1][1] - b],
                       arrayminus=[a - iqr[0][0], b - iqr[1][0]], color="#333", thickness=2, width=10)
        # the values under the bars, in the axis's labels, where no error bar can cover them
        fig.add_bar(x=[f"off<br><b>{fmt(a)}</b>", f"on<br><b>{fmt(b)}</b>"], y=[a, b],
                    marker_color=["#BBBBBB", ROUTE_COLORS["emitter"]], text=[fmt(a), fmt(b)],
                    textposition="none", showlegend=False, row=1, col=i,
                    error_y=err, hovertemplate="%{text}<extra>" + name + "</extra>")
        top = max(a, b, *(iqr[0][1], iqr[1][1]) if iqr else (0,))
        fig.update_yaxes(range=[0, top * 1.1 or 1], visible=False, row=1, col=i)
    head = f"Fusion: {u['kernels']} → {d['kernels']} kernels, {human_bytes(u['bytes'])} → {human_bytes(d['bytes'])}"
    if len(panels) == 3:
        head += f", {human_seconds(cu.median)} → {human_seconds(cd.median)}<br>{measures.fusion_verdict(fc)}"
    fig.update_layout(title=head, height=380, font=FONT, margin=dict(l=10, r=10, t=90, b=30))
    fig.update_annotations(font_size=FONT["size"])  # the panels' titles, at the figure's size
    return fig


def figure_makers(bundle: Bundle, selected: str | None = None) -> dict[str, Callable[[], go.Figure]]:
    """Each chart of the view by tab name, as a function that makes it (a view draws only the
    tab that is open: a big program's roofline takes long to build, docs/performance.md)."""
    return {"Top kernels": lambda: top_kernels_figure(bundle, selected=selected),
            "Treemap": lambda: treemap_figure(bundle), "Timeline": lambda: timeline_figure(bundle),
            "Roofline": lambda: roofline_figure(bundle, selected=selected),
            "Fusion off": lambda: fusion_figure(bundle)}


def figures(bundle: Bundle, selected: str | None = None) -> dict[str, go.Figure]:
    """Every chart of the view, by tab name; the ``selected`` kernel is outlined where it shows."""
    return {name: make() for name, make in figure_makers(bundle, selected=selected).items()}
