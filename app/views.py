"""Pieces of the explorer page drawn with Streamlit, each a function of a Bundle (and the
selection): the summary strip, the legend and styles, the graph component (one graph, a pair,
the explorer's two graphs with details and source), the details panel, the text views and the
downloads. What they draw is made elsewhere: the graph payload in ``app.graph_payload``, the
layouts in ``analysis.render.layout_cache``, the ops of a line or a search in ``app.queries``.

The component is declared here: Streamlit names it after this module (``app.views.xla_graph``,
the frame's title) and serves its folder, ``analysis/render/assets/`` (``analysis.render.web_assets``):
its ``index.html`` and the scripts and style sheets the HTML report inlines too."""

from __future__ import annotations

import functools
import hashlib
import html
import json
import re

import streamlit as st
import streamlit.components.v1 as components

from analysis.bundle.core import STAGE_LABELS, STAGES, Bundle
from analysis.program.kernels import ROUTE_COLORS, ROUTE_LABELS, ROUTES, tile_text
from analysis.render.details import HOW_WORDS, how_hint, measured_kernels, time_fact
from analysis.render.format import human_bytes
from analysis.render.graph import GraphSpec
from analysis.render.layout_cache import layout_svg
from analysis.render.summary import summarize
from analysis.render.web_assets import COMPONENT_DIR
from analysis.text_search import matcher
from app.graph_payload import (add_code, add_code_kernel, add_details, code_since, details_since, graphs_since,
                               packed_args, route_legend,
                               variant_specs)
from app.page_helpers import show_error
from app.queries import find_instruction, node_source_lines, ops_on_line

_COMPONENT = components.declare_component("xla_graph", path=COMPONENT_DIR)


# ----------------------------------------------------------------------------- summary


def summary_strip(b: Bundle) -> None:
    """The summary cards (``analysis.render.summary``: the same numbers as the CLI and the report)."""
    s = summarize(b)
    cards = s.cards()[:5]
    for col, c in zip(st.columns(len(cards)), cards):
        col.metric(c.label, c.value, delta=c.delta, delta_color="inverse" if c.delta else "normal",
                   help=c.note or None)
    parts = [f"<b>{n}</b> {html.escape(ROUTE_LABELS[r].lower())}" for r, n in s.route_counts()]
    if parts:
        st.markdown("<div class='xe-routes'>Kernels: " + " · ".join(parts) + "</div>", unsafe_allow_html=True)




def legend() -> None:
    chips = "".join(
        f"<span class='xe-chip'><span class='xe-sw' style='background:{ROUTE_COLORS[r]}'></span>{ROUTE_LABELS[r]}</span>"
        for r in ROUTES)
    chips += ("<span class='xe-chip' title='a copy or transpose kernel, or an edge whose layout differs between "
              "producer and consumer (non-default layout)'><span class='xe-sw' "
              "style='border:2px dashed #D62728;background:white'></span>layout change</span>"
              "<span class='xe-chip'><span class='xe-sw' style='border:3px solid #FF7F0E;background:white'></span>"
              "selected / linked</span>")
    st.markdown(f"<div class='xe-legend'>{chips}</div>", unsafe_allow_html=True)


CSS = """
<style>
.xe-legend { position: sticky; top: 2.8rem; z-index: 50; background: white; padding: 4px 0 6px 0;
             border-bottom: 1px solid #eee; margin-bottom: 4px; }
.xe-chip { display: inline-flex; align-items: center; margin-right: 12px; font-size: 0.85rem; white-space: nowrap; }
[data-testid="stMetricValue"] { font-size: 1.9rem; }
.xe-sw { display: inline-block; width: 14px; height: 14px; border-radius: 3px; margin-right: 5px; }
.xe-routes { font-size: 0.9rem; color: #444; margin-top: -6px; }
.xe-code { font-family: "DejaVu Sans Mono", monospace; font-size: 12.5px; line-height: 1.45; border: 1px solid #e6e6e6;
           border-radius: 6px; padding: 6px 0; overflow-x: auto; max-height: 420px; overflow-y: auto; }
.xe-code div { white-space: pre; padding: 0 10px; }
.xe-code div.hl { background: #FFF1D6; border-left: 3px solid #FF7F0E; }
.xe-code div.gap { color: #aaa; padding-left: 4.5em; }
.xe-wrap div { white-space: pre-wrap; padding-left: 4.4em; text-indent: -4.4em; }
.xe-code span.ln { color: #999; display: inline-block; width: 3.2em; text-align: right; margin-right: 1em; user-select: none; }
.xe-ktag { font-family: "DejaVu Sans", sans-serif; font-size: 11.5px; border: 2px solid; border-radius: 9px;
           padding: 0 5px; margin-left: 6px; background: #fff; }
.block-container { padding: 1.6rem 1.6rem 2rem 1.6rem; max-width: 100%; }
</style>
"""



# ----------------------------------------------------------------------------- graphs


def graph_widget(spec: GraphSpec, key: str, height: int = 640, focus: str | None = None,
                 view_key: str | None = None, present: bool = False) -> dict | None:
    """Draw one GraphSpec (Compare, Pass pipeline); returns {"id": clicked node id, "n": click
    counter} or None. Zoom and pan are kept across reruns while ``view_key`` (default: the
    graph's title) stays the same."""
    dot = spec.to_dot()
    try:
        svg = layout_svg(dot)
    except RuntimeError as e:
        show_error(e)
        return None
    return _COMPONENT(single=True, svg=svg, title=spec.title, height=height, focus=focus,
                      view_key=view_key or spec.title, legend=route_legend(spec), present=present,
                      min_scale=MIN_SCALE["present" if present else "normal"], key=key, default=None)


def pair_widget(specs: dict, related: dict, fused: dict, selected: dict, key: str, height: int = 620,
                missing: dict | None = None, present: bool = False) -> dict | None:
    """Two optimized graphs side by side (Compare), linked in the browser: ``specs`` and
    ``fused`` by side ("a", "b"; a spec may be None), ``related[side][kernel]`` = the other
    side's kernels doing its ops. Returns {"sel": {"side", "name"}, "n": click counter} or None.
    The SVGs carry no selection, so a click never re-lays a graph out and the zoom stays."""
    pair = {}
    for side, spec in specs.items():
        if spec is None:
            pair[side] = {"svg": None, "title": "", "legend": [], "missing": (missing or {}).get(side, "")}
            continue
        try:
            svg = layout_svg(spec.to_dot())
        except RuntimeError as e:
            show_error(e)
            svg = None
        pair[side] = {"svg": svg, "title": spec.title, "legend": route_legend(spec)}
    data_key = hashlib.sha1(json.dumps(pair, sort_keys=True).encode()).hexdigest()[:16]
    return _COMPONENT(pair=pair, related=related, fused=fused, selected=selected or {}, data_key=data_key,
                      min_scale=MIN_SCALE["present" if present else "normal"], max_scale=1.6, height=height,
                      present=present, key=key, default=None)


# Pixels per point at which the graphs open, at least: labels are FONT (14) and EDGE_FONT (12)
# points, so presentation mode's minimum puts every label at 14 px or more.
MIN_SCALE = {"normal": 0.85, "present": 14 / 12}


def explorer_graphs(b: Bundle, payload: dict, sel: dict, key: str = "graphs", present: bool = False,
                    show_source: bool = False, tell_drawn: bool = False, show_code: bool = False) -> dict | None:
    """The explorer's two graphs, details and source as one component; returns what the user
    selected there ({"sel": {...}, "n": counter}) or None; with ``tell_drawn``, the frame says
    when it has drawn a payload ({"drawn": true, "n": counter}); with ``show_code``, the Code pane
    opens (a link's ``view=code``). In presentation mode the summary
    cards (``analysis.render.summary``) are drawn large in the details panel while nothing is
    selected, so the graphs get the screen's height."""
    cards = [{"label": c.label, "value": c.value, "delta": c.delta or ""} for c in summarize(b).cards()[:5]] \
        if present else []
    # Once the frame has said it holds this payload (at this revision), a rerun sends a stub:
    # Streamlit sends a component's arguments on every rerun, and a click reruns the page.
    # After a view was laid out on request (a new revision) only the graphs go again.
    held = st.session_state.get(key)
    if sel and sel.get("name") and sel.get("side") in ("pre", "post"):
        # a big program: what is selected outside the drawn views gets its full details now
        prefix = "op:" if sel["side"] == "pre" else "k:"
        add_details(b, payload, [prefix + str(sel["name"]), "p:" + str(sel["name"])])
    rev = payload.get("rev", 0)
    have = held.get("have") if isinstance(held, dict) and "need" not in held else None
    if isinstance(have, list) and len(have) in (2, 3) and have[0] == payload["data_key"]:
        data = {"data_key": payload["data_key"], "rev": rev, "stub": True}
        if have[1] != rev:
            data.update(graphs=graphs_since(payload["graphs"], have[2] if len(have) == 3 else None),
                        lazy=payload["lazy"], details_add=details_since(payload, have[1]))
            code = code_since(payload, have[1])
            if code is not None:
                data["code"] = code
    else:
        data = packed_args({k: v for k, v in payload.items() if k not in ("details_log", "code_sent", "code_log")}, rev)
    return _COMPONENT(**data, selected=sel or {}, present=present, show_source=show_source, show_code=show_code,
                      cards=cards,
                      tell_drawn=tell_drawn,
                      min_scale=MIN_SCALE["present" if present else "normal"], max_scale=1.6,
                      height=600 if present else 560, key=key, default=None)


def waiting_graphs(key: str = "graphs", present: bool = False) -> None:
    """The explorer's graphs' frame before there is anything to draw in it: made while a
    session's first compile runs, so the frame's page and scripts are loaded when the graphs
    come (the run after the compile sends them to this same frame: same key, same place)."""
    _COMPONENT(waiting=True, height=600 if present else 560, key=key, default=None)


def code_pane_open(b: Bundle, payload: dict, asked, was: bool, follows: str | None = None) -> bool:
    """Whether the graphs' Code pane is open, from the frame's last message (``asked``, which
    says so every time; ``was`` when it does not); while it is open the payload carries the code
    (``add_code``, once). Not only on the frame's ``want``: a frame that opens the pane as it
    draws (a link's ``view=code``) says at once that it has drawn, and Streamlit keeps only the
    last of two values sent in a row. ``follows``: why ``b`` has no code yet, where it
    was to come with its timings (``graph_payload.add_code``)."""
    if not isinstance(asked, dict) or "code_open" not in asked:
        return was
    if asked["code_open"] is True:
        add_code(b, payload, follows)
        # a big compile's kernel shown whose code is not sent yet (every message names it until it is here)
        add_code_kernel(b, payload, asked.get("code_want"))
    return asked["code_open"] is True


def focus_id(spec: GraphSpec, sel: dict, side: str) -> str | None:
    """The SVG element to centre on: the selected node, else the first linked one."""
    name = sel.get("name")
    if name and sel.get("side") == side:
        for nid in (f"k:{name}", f"f:{name}", f"op:{name}", f"p:{name}"):
            if nid in spec.nodes or nid in spec.clusters:
                return nid
    for c in spec.clusters.values():
        if c.highlighted:
            return c.id
    for n in spec.nodes.values():
        if n.highlighted:
            return n.id
    return None


# ----------------------------------------------------------------------------- details


def code_html(source: str, highlight_lines: set[int], anchor_prefix: str = "src", context: int | None = None,
              tags: dict[int, list] | None = None) -> str:
    """Source with line numbers and the given lines highlighted; with ``context``, only the
    highlighted lines and that many around each (wrapped, for a narrow column); with ``tags``,
    each line followed by the kernels it produced, outlined in their route's colour."""
    lines = source.splitlines()
    keep = None
    if context is not None and highlight_lines:
        keep = {j for i in highlight_lines for j in range(i - context, i + context + 1)}
    rows = []
    skipped = False
    for i, line in enumerate(lines, 1):
        if keep is not None and i not in keep:
            if not skipped:
                rows.append("<div class='gap'>⋯</div>")
            skipped = True
            continue
        skipped = False
        cls = " class='hl'" if i in highlight_lines else ""
        chips = "".join(f"<span class='xe-ktag' style='border-color:{html.escape(str(c))}'>{html.escape(str(k))}</span>"
                        for k, c in (tags or {}).get(i, [])[:5])
        rows.append(f"<div id='{anchor_prefix}-{i}'{cls}><span class='ln'>{i}</span>{html.escape(line) or ' '}{chips}</div>")
    wrap = " xe-wrap" if keep is not None else ""
    return f"<div class='xe-code{wrap}'>" + "".join(rows) + "</div>"


def details_panel(b: Bundle, sel: dict) -> None:
    side, name = sel.get("side"), sel.get("name")
    if sel.get("line") is not None:
        ops = ops_on_line(b, sel["line"])
        kern = sorted({k for op in ops for k in (b.provenance.pre_to_kernels.get(op, []) if b.provenance else [])})
        st.markdown(f"**Source line {sel['line']}** produced {len(ops)} op(s) before optimization, "
                    f"now inside {len(kern)} kernel(s): " + ", ".join(f"`{k}`" for k in kern))
        return
    if not name:
        st.info("Click a node in either graph to see its details here. A kernel lights up the ops it absorbed; "
                "an op lights up the kernel it ended in.")
        return
    inst = find_instruction(b, side, name)
    if inst is None:
        st.warning(f"{name} is not in this module")
        return
    k = b.kernel(name) if side == "post" else None
    left, right = st.columns([3, 2])
    with left:
        title = f"#### `{name}` — {inst.opcode}"
        if k is not None:
            title += f" · {ROUTE_LABELS[k.route]}" + (f" ({k.library})" if k.library else "")
        st.markdown(title)
        st.code(inst.text, language=None, wrap_lines=True)
        try:
            shape = inst.shape
            st.markdown(f"**Shape** `{inst.shape_text}` — {shape.describe_layout()}.")
        except Exception:  # noqa: BLE001
            st.markdown(f"**Shape** `{inst.shape_text}`")
        if k is not None:
            facts = [f"moves ~{human_bytes(k.bytes)}", f"{k.flops:,} FLOPs (from shapes)"]
            if k.triton_config:
                facts.append("Triton " + tile_text(k.triton_config, full=True))
            if k.context:
                facts.append(f"runs inside {k.context}")
            kt = measured_kernels(b).get(name)
            if kt is not None:
                facts.append(time_fact(kt))
            st.markdown("**Kernel:** " + "; ".join(facts))
        bc = inst.backend_config
        if bc:
            with st.expander("backend_config", expanded=False):
                st.code(json.dumps(bc, indent=2), language="json")
        if inst.opcode == "fusion" and inst.called_computations:
            mod = b.module("hlo_after")
            fused = mod.by_name.get(inst.called_computations[0])
            if fused is not None:
                with st.expander(f"fused computation {fused.name} ({len(fused.instructions)} instructions)",
                                 expanded=len(fused.instructions) <= 12):
                    st.code("\n".join(i.text for i in fused.instructions), language=None)
    with right:
        prov = b.provenance
        if prov is not None:
            if side == "post":
                from analysis.program.links import kernel_ops

                absorbed = kernel_ops(prov, name)  # the one op count (graph, Compare, Pass pipeline)
                st.markdown(f"**Absorbed {len(absorbed)} op(s) from before optimization**")
                rows = []
                for op in absorbed[:60]:
                    pi = find_instruction(b, "pre", op)
                    if pi is not None:
                        rows.append(f"`{op}` {pi.opcode} — {pi.metadata.op_name or ''}"
                                    + (f" _({how_hint(prov.how.get(op))})_" if how_hint(prov.how.get(op)) else ""))
                st.markdown("\n".join(f"- {r}" for r in rows) or "_none matched_")
            else:
                from analysis.program.links import op_kernels

                ks = op_kernels(prov, name)
                how = prov.how.get(name)
                st.markdown(f"**Ended in {len(ks)} kernel(s)**" + (f" (matched by {HOW_WORDS.get(how, how)})" if how else ""))
                st.markdown("\n".join(f"- `{kn}`" for kn in ks) or "_optimized away (folded or eliminated)_")
        src_lines = node_source_lines(b, side, name, k)
        code = b.source.get("code")
        if code and src_lines:
            st.markdown("**Source** (lines " + ", ".join(map(str, sorted(src_lines))) + ")")
            st.markdown(code_html(code, src_lines, "d", context=2), unsafe_allow_html=True)
        elif inst.metadata.source is not None:
            st.markdown(f"**Source** {inst.metadata.source}")



# ----------------------------------------------------------------------------- text views


SHOWN_LINES = 3000  # lines of a stage text drawn at once (search and download reach all of them)
SHOWN_CONTEXT = 20  # lines drawn around each highlighted line of a longer text


def stage_text(b: Bundle, stage: str) -> str:
    """A stage's text, made when its download is clicked."""
    return b.stages.get(stage) or ""


def text_views(b: Bundle, sel: dict) -> None:
    present = [s for s in STAGES if b.stages.get(s)]
    if not present:
        st.info("This bundle has no stage texts.")
        return
    tabs = st.tabs([STAGE_LABELS[s] for s in present])
    hl_names = set()
    if sel.get("line") is not None:
        hl_names = set(ops_on_line(b, sel["line"]))
    for tab, stage in zip(tabs, present):
        with tab:
            text = b.stages[stage]
            c1, c2 = st.columns([3, 1])
            q = c1.text_input("Search", key=f"q_{stage}", placeholder="filter lines (text or regex)")
            c2.download_button(f"Download {STAGE_LABELS[stage]}", functools.partial(stage_text, b, stage),
                               file_name=f"{b.title}.{stage}.txt", key=f"dl_{stage}", width="stretch")
            lines = text.splitlines()
            if q:
                # RE2 (linear time, analysis.text_search), never Python's re on what a user typed
                hit = matcher(q)
                hits = [(i, ln) for i, ln in enumerate(lines, 1) if hit(ln)]
                st.caption(f"{len(hits)} matching line(s)")
                st.code("\n".join(f"{i:5d}  {ln}" for i, ln in hits[:2000]) or "(no match)", language=None)
            elif hl_names and stage == "hlo_before":
                marks = {i for i, ln in enumerate(lines, 1)
                         if any(re.search(rf"(^|\s)%?{re.escape(n)} = ", ln) for n in hl_names)}
                st.caption(f"{len(marks)} op(s) from source line {sel['line']} highlighted"
                           + (f" (and {SHOWN_CONTEXT} lines around each)" if len(lines) > SHOWN_LINES else ""))
                st.markdown(code_html(text, marks, stage, context=SHOWN_CONTEXT if len(lines) > SHOWN_LINES else None),
                            unsafe_allow_html=True)
            elif len(lines) > SHOWN_LINES:
                # a browser draws a code block of a few thousand lines at once, and stalls for
                # tens of seconds on the 24,000 of a big program: its start, then search or download
                st.caption(f"Lines 1–{SHOWN_LINES:,} of {len(lines):,}: search for the rest, or download it all.")
                st.code("\n".join(lines[:SHOWN_LINES]), language="python" if stage == "jaxpr" else None,
                        line_numbers=True)
            else:
                st.code(text, language="python" if stage == "jaxpr" else None, line_numbers=True)


# ----------------------------------------------------------------------------- downloads


def report_of(b: Bundle) -> str:
    """The offline HTML report of a bundle, made when the download is clicked (from a copy)."""
    return report_html(b.to_json())


def bundle_json(b: Bundle) -> str:
    """The bundle as JSON, made when the download is clicked."""
    return b.to_json()


def graph_file(b: Bundle, side: str, fmt: str, layered: bool) -> bytes:
    """One graph as a download (``fmt`` "dot" or "svg"), made when it is clicked: the view the
    explorer opened with (a big program's layers view, else the default one), laid out from the
    shared cache; an SVG that cannot be laid out is the error's text."""
    name = "layers" if layered else "default"
    spec = (variant_specs(b, [name]).get(side) or {}).get(name)
    if spec is None:
        return b""
    dot = spec.to_dot()
    if fmt == "dot":
        return dot.encode()
    try:
        svg = layout_svg(dot)
    except RuntimeError as e:
        return str(e).encode()
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + svg).encode()


@st.cache_data(show_spinner=False, max_entries=8)
def report_html(bundle_json: str) -> str:
    """The offline HTML report of a bundle (its JSON), made when the download is clicked."""
    from analysis.render import report

    return report.html_report(Bundle.from_json(bundle_json))
