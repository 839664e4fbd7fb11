"""A Bundle as one self-contained HTML file, and the Bundle's other downloads.

``html_report(bundle)`` writes everything a class needs to look at one compile offline, in one
file that loads nothing from the network (no CDN, no fonts, no server): the title and
environment, the summary numbers, the legend, both graphs as inline SVG (drag to pan, wheel to
zoom, click a kernel to light up the ops it absorbed), the kernel table (with timings when
measured), the charts (drawn as SVG: no chart library in the page), the fusion comparison, the source
with line anchors (``#L12``) that the kernel table links to, and the stage texts.

``graph_exports(bundle)`` and ``exports(bundle)`` give the same pieces as files
(``{file name: (mime type, bytes)}``) for download buttons and the CLI.

Reads a Bundle only: no JAX, no Streamlit. The charts are ``analysis.render.charts``' plotly figures
(the same the app draws with plotly.js), drawn here as SVG by ``analysis.render.chart_svg``: a small
program's page is a few hundred KB, where plotly.js alone is 4.8 MB (docs/performance.md); without
plotly the report simply has no charts.
"""

from __future__ import annotations

import base64
import html
import json
import re
import zlib

from analysis import tuning
from analysis.bundle.content import ContentCache
from analysis.bundle.core import STAGE_LABELS, STAGES, Bundle, device_label, missing_stage_text
from analysis.measures import kernel_times
from analysis.program.kernels import ROUTE_COLORS, ROUTE_LABELS, Kernel
from analysis.render import web_assets
from analysis.render.decisions import html_section as decisions_html_section
from analysis.render.format import human_bytes, human_flops, human_seconds, peaks_sentence
from analysis.render.report_layers import LayersAhead
from analysis.render.rows import fused_text, kernel_rows, user_lines
from analysis.render.summary import route_chips_html, summary_html

MAX_STAGE_CHARS = 1_000_000  # longer stage texts are cut in the report (the bundle keeps them)
MAX_EMBEDDED_BUNDLE = 8 * 2 ** 20  # embed the bundle JSON (for "download") up to this size


def _e(s) -> str:
    return html.escape("" if s is None else str(s), quote=True)


def slug_of(title: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", title).strip("_") or "bundle"


def deflated(text: str) -> str:
    """``text`` deflated (zlib, level 1) in base64, for a ``<script type='application/octet-stream'>``
    the page inflates with the browser's own ``DecompressionStream`` (``XEHelpers.inflate``): the
    bundle's JSON and the DOT texts, read only when their download is asked for, travel in a
    fifth to a third of their size."""
    return base64.b64encode(zlib.compress(text.encode(), 1)).decode("ascii")


def _script_json(obj) -> str:
    """JSON safe inside <script type="application/json">: no ``</`` can close the tag."""
    return json.dumps(obj, default=str).replace("<", "\\u003c")


# ----------------------------------------------------------------------------- graphs


def graph_specs(bundle: Bundle):
    """(pre GraphSpec or None, post GraphSpec or None), the view the app opens at
    (``view_model.graph_views``) with nothing selected: a big program's collapsed to its layers
    (``report_layers``)."""
    from analysis.render.module_graphs import post_graph, pre_graph
    from analysis.render.view_model import graph_views, variant_specs

    if graph_views(bundle).as_layers:
        layered = variant_specs(bundle, ["layers"])
        return tuple((layered.get(side) or {}).get("layers") for side in ("pre", "post"))

    pre_mod, post_mod = bundle.module("hlo_before"), bundle.module("hlo_after")
    timed = kernel_times(bundle.timings) or None
    pre = pre_graph(pre_mod) if pre_mod is not None else None
    post = post_graph(post_mod, bundle.kernels, timings=timed, provenance=bundle.provenance) \
        if post_mod is not None else None
    return pre, post


def graph_exports(bundle: Bundle, layout=None) -> dict[str, tuple[str, bytes]]:
    """Both graphs as Graphviz DOT and SVG: ``{file name: (mime type, bytes)}``. SVG needs
    Graphviz's ``dot``; without it only the DOT files are returned. ``layout(dot) -> svg``
    (default: a fresh Graphviz run) lets the app reuse the layouts it already has."""
    out: dict[str, tuple[str, bytes]] = {}
    slug = slug_of(bundle.title)
    for side, spec in zip(("before", "after"), graph_specs(bundle)):
        if spec is None:
            continue
        dot = spec.to_dot()
        out[f"{slug}.{side}.dot"] = ("text/vnd.graphviz", dot.encode())
        try:
            from analysis.render.graphviz_runner import render_svg

            svg = (layout or render_svg)(dot)
        except RuntimeError:
            continue
        out[f"{slug}.{side}.svg"] = ("image/svg+xml",
                                     ('<?xml version="1.0" encoding="UTF-8"?>\n' + svg).encode())
    return out


def exports(bundle: Bundle, report: bool = True) -> dict[str, tuple[str, bytes]]:
    """Every download of a bundle: the graphs (DOT, SVG), the Bundle JSON, the raw profiler
    trace when the bundle kept one, and (``report=True``) the HTML report."""
    from analysis.timing.profiles import trace_bytes

    slug = slug_of(bundle.title)
    out = graph_exports(bundle)
    out[f"{slug}.bundle.json"] = ("application/json", bundle.to_json(indent=1).encode())
    raw = trace_bytes(bundle.timings)
    if raw:
        out[f"{slug}.trace.json.gz"] = ("application/gzip", raw)
    if report:
        out[f"{slug}.report.html"] = ("text/html", html_report(bundle).encode())
    return out


def _inline_svg(spec, prefix: str) -> tuple[str, str]:
    """(SVG markup with element ids prefixed so two graphs can share one page, error text)."""
    from analysis.render.graphviz_runner import render_svg

    from analysis.render.report_layers import prefixed_svg

    try:
        return prefixed_svg(render_svg(spec.to_dot()), prefix), ""
    except RuntimeError as e:
        return "", str(e)


# ----------------------------------------------------------------------------- pieces


def _environment_rows(b: Bundle) -> list[tuple[str, str]]:
    env = b.environment
    rows = [("device", device_label(env)), ("backend", env.get("backend")),
            ("platform", env.get("platform")), ("jax", env.get("jax")), ("jaxlib", env.get("jaxlib")),
            ("python", env.get("python")), ("machine", env.get("machine")), ("origin", env.get("origin"))]
    opts = (b.options or {}).get("compiler_options") or {}
    if opts:
        rows.append(("compiler options", ", ".join(f"{k}={v}" for k, v in opts.items())))
    if b.source.get("file"):
        rows.append(("source", b.source.get("file")))
    if b.created:
        rows.append(("compiled", b.created))
    return [(k, str(v)) for k, v in rows if v not in (None, "")]


def _legend_html() -> str:
    chips = route_chips_html()
    chips += ("<span class='chip'><span class='sw' style='border:2px dashed #D62728;background:#fff'></span>"
              "layout change / non-default layout</span>"
              "<span class='chip'><span class='sw' style='border:3px solid #FF7F0E;background:#fff'></span>"
              "selected / linked</span>")
    return f"<div class='legend' id='legend'>{chips}</div>"


def _graph_pane(spec, prefix: str, heading: str, missing: str, laid_out: str | None = None) -> str:
    """One graph's pane. ``laid_out``: the SVG of a big program's layers view (laid out with
    every layer's, ``report_layers``), else ``spec`` is laid out here."""
    if spec is None:
        return f"<div class='pane'><h3>{_e(heading)}</h3><p class='muted'>{_e(missing)}</p></div>"
    if laid_out is None:
        svg, err = _inline_svg(spec, prefix)
    else:
        from analysis.render.report_layers import prefixed_svg

        ok = laid_out.startswith("<svg")
        svg, err = (prefixed_svg(laid_out, prefix), "") if ok else ("", html.unescape(re.sub("<[^>]*>", "", laid_out)))
    dot_id = f"dot-{prefix}"
    tools = (f"<span class='tools'><button data-act='fit'>fit</button><button data-act='in'>+</button>"
             f"<button data-act='out'>−</button><button data-act='svg'>SVG</button>"
             f"<button data-act='dot' data-src='{dot_id}'>DOT</button></span>")
    note = ""
    if spec.collapsed and laid_out is None:  # (a layers view: the layer bar says how to open them)
        note = (f"<p class='muted small'>{len(spec.collapsed)} "
                + ("fusion(s) drawn collapsed" if prefix == "post" else "name scope(s) collapsed")
                + " to keep the graph readable (open the bundle in XLA Explorer to expand them).</p>")
    layers = " data-layers='1'" if laid_out is not None else ""
    body = (f"<div class='view' data-prefix='{prefix}'{layers}>{svg}<div class='hint'>drag to pan · wheel to zoom · "
            f"click a node</div></div>") if svg else f"<pre class='err'>{_e(err)}</pre>"
    dot = f"<script type='application/octet-stream' id='{dot_id}'>{deflated(spec.to_dot())}</script>"
    return (f"<div class='pane' id='graph-{prefix}'><h3>{_e(heading)} {tools}</h3>"
            f"<div class='subtitle'>{_e(spec.title)}</div>{body}{note}{dot}</div>")


def _kernel_table(b: Bundle) -> str:
    rows = kernel_rows(b)
    if not rows:
        return "<p class='muted'>No kernels: this input has no optimized HLO.</p>"
    measured = bool((b.timings or {}).get("kernels"))
    head = ["#", "kernel", "route", "what", "fused ops", "bytes", "FLOPs", "source"]
    if measured:
        head += ["calls", "time / step", "share", "GiB/s", "% of roof"]
    out = ["<table class='kt' id='kernel-table'><thead><tr>" + "".join(f"<th>{h}</th>" for h in head)
           + "</tr></thead><tbody>"]
    for i, r in enumerate(rows, 1):
        color = ROUTE_COLORS.get(r["route"], "#777777")
        route = (f"<span class='chip'><span class='sw' style='background:{color}'></span>"
                 f"{_e(ROUTE_LABELS.get(r['route'], r['route']))}</span>")
        what = _e(r["what"])
        if r.get("context"):
            what += f"<div class='muted small'>inside {_e(r['context'])}</div>"
        ops = r["fused_ops"]
        fused = f"<span title='{_e(', '.join(ops))}'>{_e(fused_text(ops))}</span>" if ops else ""
        if r["absorbed"]:
            fused += f"<div class='muted small'>absorbs {r['absorbed']} op{'s' if r['absorbed'] != 1 else ''}</div>"
        mine, other = r["lines"], r["other_lines"]
        src = " ".join(f"<a href='#L{n}'>L{n}</a>" for n in mine)
        if other:
            src += " <span class='muted small'>" + _e(", ".join(other[:3])) + "</span>"
        cells = [str(i), f"<a class='kname' href='#graph-post' data-node='{_e(r['kernel'])}'>{_e(r['kernel'])}</a>",
                 route, what, fused or "<span class='muted'>–</span>",
                 _e(human_bytes(r.get("bytes"))), _e(human_flops(r.get("flops")) if r.get("flops") else "–"),
                 src or "<span class='muted'>–</span>"]
        if measured:
            share = r.get("share")
            cells += [
                _e(f"{r['calls']:g}" if r.get("calls") is not None else "–"),
                _e(human_seconds(r["time_us"] / 1e6) if r.get("time_us") is not None else "–")
                + ("<sup title='control flow: includes the kernels it runs'>*</sup>" if r.get("inclusive") else ""),
                (f"<div class='bar'><span style='width:{min(share, 1) * 100:.1f}%;background:{color}'></span></div>"
                 f"{share:.1%}") if share is not None else "–",
                _e(f"{r['gib_s']:.3g}" if r.get("gib_s") is not None else "–"),
                _e(f"{r['pct_of_roof']:.0f}% {r['roof']}" if r.get("pct_of_roof") is not None else "–"),
            ]
        num = {0, 5, 6} | ({8, 9, 11, 12} if measured else set())
        out.append(f"<tr id='kernel-{_e(r['kernel'])}' data-kernel='{_e(r['kernel'])}'>"
                   + "".join(f"<td{' class=num' if j in num else ''}>{c}</td>" for j, c in enumerate(cells))
                   + "</tr>")
    out.append("</tbody></table>")
    t = b.timings or {}
    notes = []
    if measured:
        notes.append(f"Measured: median over {t.get('iterations')} calls; time is per step (all calls summed).")
        if peaks_sentence(t.get("peaks")):
            notes.append(peaks_sentence(t.get("peaks")))
        for key in ("coverage_note", "command_buffer_note"):
            if t.get(key):
                notes.append(t[key])
        from analysis.timing.profiles import over_peak_note

        if over_peak_note(t):
            notes.append(over_peak_note(t))
    else:
        notes.append("Not measured: bytes and FLOPs are estimated from the optimized HLO's shapes.")
    return "".join(out) + "".join(f"<p class='muted small'>{_e(n)}</p>" for n in notes)


def _charts(b: Bundle) -> str:
    """The charts' HTML: each chart an SVG drawing of its figure."""
    try:
        from analysis.render.chart_svg import figure_svg
        from analysis.render.charts import figure_makers
    except ImportError as e:  # plotly not installed
        return f"<p class='muted'>Charts need plotly ({_e(e)}).</p>"
    measured = bool((b.timings or {}).get("kernels"))
    keep = ["Top kernels", "Treemap"] + (["Timeline", "Roofline"] if measured else [])
    # only the charts this page shows are made (a big program's roofline alone takes long)
    makers = figure_makers(b)
    figs = {name: makers[name]() for name in keep if name in makers}
    parts = [f"<div class='chart'>{figure_svg(figs[name], f'chart-{slug_of(name)}')}</div>"
             for name in keep if figs.get(name) is not None]
    return "<div class='charts'>" + "".join(parts) + "</div>"


def _fusion(b: Bundle) -> str:
    """The fusion comparison's HTML ("" without one): its table and chart."""
    if not b.fusion_comparison:
        return ""
    try:
        from analysis.render.chart_svg import figure_svg
        from analysis.render.charts import figure_makers, fusion_table
    except ImportError:  # plotly not installed
        return ""
    fc = b.fusion_comparison
    rows = fusion_table(b)
    tbl = ("<table class='kt narrow'><thead><tr><th></th><th>fusion off</th><th>fusion on</th><th>change</th>"
           "<th>verdict</th></tr></thead><tbody>")
    tbl += "".join(f"<tr><td>{_e(r[''])}</td><td class=num>{_e(r['fusion off'])}</td>"
                   f"<td class=num>{_e(r['fusion on'])}</td><td class=num>{_e(r['change'])}</td>"
                   f"<td>{_e(r['verdict'])}</td></tr>" for r in rows)
    tbl += "</tbody></table>"
    fig = figure_makers(b)["Fusion off"]()
    div = figure_svg(fig, "chart-fusion") if fig is not None else ""
    return (tbl + f"<p class='muted small'>Fusion off = the same program compiled with xla_disable_hlo_passes="
            f"{_e(','.join(fc.get('disabled_passes', [])))}. {_e(fc.get('note') or '')}</p>"
            + f"<div class='chart'>{div}</div>")


# The page's sections made of what a draft of the bundle holds too (its two modules, the fusion
# decisions, the timings and the source), by content: made on the draft beside the compile
# (``ReportAhead``), found by the bundle that follows. (The buffer assignment, the
# code and a fusion comparison come with the bundle alone: their sections are made with the page.)
DRAFT_SECTIONS = ContentCache(("before", "after", "decisions", "timings", "source"), size=4)


class ReportAhead(LayersAhead):
    """The report's work while the program compiles (``compile_model``'s and ``run_job``'s
    ``ahead``: the CLI's report, ``xe.show``): its layers (``report_layers.LayersAhead``), then on
    the draft the page's sections a draft holds all of (``draft_sections``), which the page
    finds by content."""

    def draft(self, bundle: Bundle) -> None:
        super().draft(bundle)
        draft_sections(bundle)


def draft_sections(b: Bundle) -> dict[str, str]:
    """``{"charts", "source", "kernels", "decisions", "links"}``: those sections of ``b``'s page,
    made once per content (callers must not change them)."""
    return DRAFT_SECTIONS.get(b, lambda: {
        "charts": _charts(b), "source": _source_html(b), "kernels": _kernel_table(b),
        "decisions": decisions_html_section(b.fusion_decisions),  # analysis.render.decisions: why (not) fused
        "links": _script_json(_link_data(b))})


def _source_html(b: Bundle) -> str:
    code = b.source.get("code")
    if not code:
        return ""
    by_line: dict[int, list[Kernel]] = {}
    for k in b.kernels:
        for ln in user_lines(b, k)[0]:
            by_line.setdefault(ln, []).append(k)
    rows = []
    for i, line in enumerate(code.splitlines(), 1):
        ks = by_line.get(i, [])
        tags = "".join(f"<a class='ktag' href='#kernel-{_e(k.name)}' style='border-color:{ROUTE_COLORS.get(k.route, '#777')}'"
                       f" title='{_e(ROUTE_LABELS.get(k.route, k.route))}'>{_e(k.name)}</a>" for k in ks[:6])
        if len(ks) > 6:
            tags += f"<span class='muted small'> +{len(ks) - 6}</span>"
        rows.append(f"<div id='L{i}' class='{'has' if ks else ''}'><a class='ln' href='#L{i}'>{i}</a>"
                    f"<span class='code'>{_e(line) or ' '}</span>{('<span class=tags>' + tags + '</span>') if tags else ''}</div>")
    return ("<p class='muted small'>Lines that produced kernels are marked; click a kernel to jump to its row, "
            "a line number to link to it.</p><div class='src'>" + "".join(rows) + "</div>")


def _stages_html(b: Bundle) -> str:
    out = []
    for s in STAGES:
        text = b.stages.get(s)
        if not text:
            continue
        cut = ""
        if len(text) > MAX_STAGE_CHARS:
            cut = f"\n… cut at {MAX_STAGE_CHARS:,} of {len(text):,} characters (the bundle has all of it)"
            text = text[:MAX_STAGE_CHARS]
        out.append(f"<details><summary>{_e(STAGE_LABELS.get(s, s))} <span class='muted small'>"
                   f"({len(b.stages[s].splitlines()):,} lines)</span></summary><pre class='stage'>{_e(text + cut)}</pre></details>")
    if b.pass_log:
        rows = "".join(f"<tr><td class=num>{_e(p.get('index'))}</td><td>{_e(p.get('pipeline'))}</td>"
                       f"<td>{_e(p.get('pass'))}</td><td class='muted small'>{_e(p.get('file'))}</td></tr>"
                       for p in b.pass_log if isinstance(p, dict))
        out.append(f"<details><summary>Pass log <span class='muted small'>({len(b.pass_log)} snapshots)"
                   f"</span></summary><table class='kt'><thead><tr><th>#</th><th>pipeline</th><th>after pass</th>"
                   f"<th>file</th></tr></thead><tbody>{rows}</tbody></table></details>")
    return "".join(out)


def _link_data(b: Bundle) -> dict:
    """What the page's script needs to link the graphs: kernel -> pre ops, pre op -> kernels."""
    from analysis.program.links import link_maps

    return link_maps(b.provenance, b.kernels)


# ----------------------------------------------------------------------------- the page


@tuning.building()  # an entry point of analysis.tuning: a big program's graphs, code and JSON, none garbage
def html_report(bundle: Bundle) -> str:
    """The whole report as one HTML document that needs no network and no server."""
    from analysis.render import report_code, report_layers

    b = bundle
    env = b.environment
    # a big program opens collapsed to its layers, as in the app, each layer laid out ahead
    # (in Graphviz's processes while the rest of the page is built here)
    layered = report_layers.layered_graphs_start(b)
    if layered is None:
        pre, post = graph_specs(b)
    desc = (b.source.get("description") or "").strip()
    lesson_title, _, lesson = desc.partition("\n")
    made = draft_sections(b)  # (made beside the compile, where it was a report's)
    charts, fusion, source = made["charts"], _fusion(b), made["source"]
    stages = _stages_html(b)
    # The bundle's JSON, embedded for its download, and its hash in the footer: made only where
    # it can be embedded (a big program's is past the limit: its JSON was made, 0.2 s at 96
    # layers, only for the hash; docs/performance.md). Its text and hash from one encoding.
    bundle_json, digest = "", None
    if b.json_size_at_least() <= MAX_EMBEDDED_BUNDLE:
        as_dict = b.to_dict()
        if sum(len(t) for t in b.stages.values() if isinstance(t, str)) + _code_chars(as_dict) <= MAX_EMBEDDED_BUNDLE:
            bundle_json, digest = b.json_and_hash(as_dict)
    kernels = made["kernels"]
    memory = _memory_section(b)  # analysis.render.memory
    decisions = made["decisions"]
    code = report_code.code_section(b, _e)
    lay = layered() if layered is not None else None
    svgs = {}
    if lay is not None:
        sides = lay["sides"]
        pre, post = ((sides[s]["layers"] if s in sides else None) for s in ("pre", "post"))
        svgs = {s: sides[s]["svg"] for s in sides}
    embed = bool(bundle_json) and len(bundle_json) <= MAX_EMBEDDED_BUNDLE
    sub = " · ".join(_e(x) for x in (device_label(env), env.get("backend"),
                                      ("jax " + env["jax"]) if env.get("jax") else None, b.created) if x)
    nav = [("summary", "Summary"), ("graphs", "Graphs"), ("kernels", "Kernels")]
    if charts:
        nav.append(("charts", "Charts"))
    if fusion:
        nav.append(("fusion", "Fusion off vs on"))
    if code:
        nav.append(("code", "Code"))
    if source:
        nav.append(("source", "Source"))
    if stages:
        nav.append(("stages", "Texts"))
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        # No network, ever: anything the page tried to fetch from elsewhere is refused.
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; script-src 'unsafe-inline' "
        "'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'\">",
        f"<title>{_e(b.title)} — XLA Explorer report</title><style>{web_assets.style(*_styles(lay, code))}"
        "</style></head><body>",
        f"<header><h1>{_e(b.title)}</h1><div class='sub'>{sub}</div>",
        "<nav>" + " ".join(f"<a href='#{i}'>{_e(t)}</a>" for i, t in nav)
        + ("<button id='dl-bundle'>Download bundle JSON</button>" if embed else "") + "</nav></header><main>",
    ]
    if lesson_title:
        parts.append(f"<section class='lesson'><b>{_e(lesson_title)}</b>"
                     + (f"<p>{_e(lesson).replace(chr(10) + chr(10), '</p><p>')}</p>" if lesson.strip() else "")
                     + "</section>")
    parts.append("<section id='summary'><h2>Summary</h2>" + summary_html(b))
    parts.append("<details class='env'><summary>Environment</summary><table class='kv'>"
                 + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in _environment_rows(b))
                 + "</table></details></section>")
    parts.append(_legend_html())
    parts.append("<section id='graphs'><h2>Before and after optimization</h2>"
                 "<p class='muted small'>Click a kernel (right) to light up the ops it absorbed (left), or an op to "
                 "light up the kernel it ended in. Each fusion is a box holding the ops it swallowed.</p>"
                 + (report_layers.layer_bar(lay, _e) if lay else "") + "<div class='graphs'>"
                 + _graph_pane(pre, "pre", "Before optimization", missing_stage_text(b, "pre"), svgs.get("pre"))
                 + _graph_pane(post, "post", "After optimization", missing_stage_text(b, "post"), svgs.get("post"))
                 + "</div></section>")
    parts.append(f"<section id='kernels'><h2>Kernels ({len(b.kernels)})</h2>{kernels}</section>")
    parts.append(code)  # analysis.render.report_code: the selected kernel's generated code
    parts.append(decisions)
    if charts:
        parts.append(f"<section id='charts'><h2>Charts</h2>{charts}</section>")
    if fusion:
        parts.append(f"<section id='fusion'><h2>What fusion saved</h2>{fusion}</section>")
    parts.append(memory)
    if source:
        parts.append(f"<section id='source'><h2>Source</h2>{source}</section>")
    if stages:
        parts.append(f"<section id='stages'><h2>Program texts</h2>{stages}</section>")
    kept = f"bundle {_e(digest)}" if digest else "its bundle"
    if not embed:  # (its download: the same compile's ``xla-explorer analyze MODEL --out FILE.json``)
        kept += (f" (over {MAX_EMBEDDED_BUNDLE // 2 ** 20} MiB of JSON: not in this file; "
                 "xla-explorer analyze MODEL --out FILE.json writes it)")
    parts.append(f"</main><footer>Made with XLA Explorer · {kept} · schema "
                 f"{b.schema_version}. This file is self-contained: it works offline.</footer>")
    parts.append(f"<script type='application/json' id='xe-links'>{made['links']}</script>")
    if embed:
        parts.append(f"<script type='application/octet-stream' id='xe-bundle' data-name='{_e(slug_of(b.title))}"
                     f".bundle.json'>{deflated(bundle_json)}</script>")
    if lay:
        parts.append(f"<script type='application/octet-stream' id='xe-layers'>{report_layers.page_data(lay)}</script>")
    parts.append(f"<script>{web_assets.script(*_scripts(lay, code))}</script></body></html>")
    return "".join(parts)


def _styles(lay, code) -> list[str]:
    """The page's style sheets (``assets/``): its own, its layers', its Code section's."""
    return ["report.css"] + (["report_layers.css"] if lay else []) + (["code_pane.css", "report_code.css"] if code else [])


def _scripts(lay, code) -> list[str]:
    """The page's scripts (``assets/``), each after those it uses: the helpers and pan/zoom every
    graph view shares, the report's own, its layers', and the app's Code pane with the report's
    data."""
    return (["helpers.js", "graph.js", "report.js"] + (["report_layers.js"] if lay else [])
            + (["code_pane.js", "report_code.js"] if code else []))


def _code_chars(d: dict) -> int:
    """The characters of the deflated code texts in a bundle's ``to_dict`` (a part of its JSON)."""
    kernels = (d.get("code") or {}).get("kernels") or {}
    return sum(len(v.get("z", "")) for k in kernels.values() if isinstance(k, dict)
               for v in (k.get("stages") or {}).values() if isinstance(v, dict))


def _memory_section(b: Bundle) -> str:
    from analysis.render.memory import memory_section_html

    return memory_section_html(b)
