"""Pieces of the explorer page, each a function of a Bundle (and the selection) that draws
itself with Streamlit: summary strip, legend, graphs, details panel, text and source views."""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
import os
import re
import threading
import time
import zlib
from collections import OrderedDict
from typing import Callable

import streamlit as st
import streamlit.components.v1 as components

from analysis.bundle import STAGE_LABELS, STAGES, Bundle
from analysis import tuning
from analysis.render.graph import GraphSpec, post_graph, pre_graph, render_svgs_each, render_svgs_start
from analysis.hlo import Instruction
from analysis.kernels import ROUTE_COLORS, ROUTE_LABELS, ROUTES, tile_text
from analysis.render.format import human_bytes, human_seconds
from analysis.render.summary import summarize
from analysis.text_search import matcher
from app.page_helpers import show_error

_COMPONENT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "graph_component")


def _install_graph_js() -> None:
    """Put the shared pan/zoom script (``analysis/render/assets/graph.js``, which the HTML report
    inlines) beside the component's page: Streamlit serves a component's own folder only (it
    resolves symlinks and refuses paths outside it), so the file is copied when it differs."""
    from analysis.render.report import graph_js

    text = graph_js()
    dest = os.path.join(_COMPONENT_DIR, "graph.js")
    try:
        with open(dest, encoding="utf-8") as f:
            if f.read() == text:
                return
    except OSError:
        pass
    tmp = f"{dest}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, dest)


_install_graph_js()
_COMPONENT = components.declare_component("xla_graph", path=_COMPONENT_DIR)


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


# How provenance matched an op (analysis.provenance), in words; the weaker matches are flagged in lists.
HOW_WORDS = {"metadata": "its metadata", "op_name": "its op name", "shape": "opcode and shape (the kernel has no metadata)",
             "user": "the op that uses it", "operand": "the op it reads",
             "scope": "name scope: computed inside this library call, e.g. a cuBLAS epilogue"}
HOW_HINTED = {"shape", "user", "operand", "scope"}


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

# Presentation mode: no sidebar, no toolbar, little padding, large summary numbers.
PRESENT_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
header[data-testid="stHeader"] { display: none !important; }
.block-container { padding: 0.6rem 1.2rem 1rem 1.2rem !important; max-width: 100% !important; }
[data-testid="stMetricValue"] { font-size: 2.3rem; }
[data-testid="stMetricLabel"] p { font-size: 1.05rem; }
.xe-routes { font-size: 1.05rem; }
</style>
"""


# ----------------------------------------------------------------------------- graphs


# Laid-out SVG by DOT text, shared by every session of this server (a layout is a pure function
# of its DOT); a small LRU of our own rather than st.cache_data so both sides can be laid out in
# parallel threads.
_SVG_CACHE: "OrderedDict[str, str]" = OrderedDict()
_SVG_LOCK = threading.Lock()
_SVG_MAX = 64
_SVG_MAX_CHARS = 48 << 20  # and at most this much SVG text in all: one huge upload must not pin it


def _trim_svg_cache() -> None:
    total = sum(len(v) for v in _SVG_CACHE.values())
    while _SVG_CACHE and (len(_SVG_CACHE) > _SVG_MAX or total > _SVG_MAX_CHARS):
        _, v = _SVG_CACHE.popitem(last=False)
        total -= len(v)


# DOT texts Graphviz could not lay out (a timeout), for a while: asked again at once (the next
# line of the same run, or a rerun), such a graph fails at once instead of after another minute
_SVG_FAILED: "OrderedDict[str, tuple[float, str]]" = OrderedDict()
FAILED_FOR_S = 600.0


def _failed(dot: str) -> str | None:
    hit = _SVG_FAILED.get(dot)
    if hit is None:
        return None
    if time.monotonic() - hit[0] > FAILED_FOR_S:
        del _SVG_FAILED[dot]
        return None
    return hit[1]


def _remember(dot: str, result) -> None:
    if isinstance(result, RuntimeError):
        _SVG_FAILED[dot] = (time.monotonic(), str(result))
        while len(_SVG_FAILED) > _SVG_MAX:
            _SVG_FAILED.popitem(last=False)
    else:
        _SVG_CACHE[dot] = result
        _trim_svg_cache()


def layout_all(specs) -> None:
    """Lay out every graph not yet in the cache, all at once; raises the first failure (the
    others are kept)."""
    layout_dots_start([s.to_dot() for s in specs if s is not None])()


def layout_dots_start(dots: list[str]) -> Callable[[], None]:
    """``layout_all`` of DOT texts, started: the layouts run in Graphviz's processes while the
    caller goes on; calling what this returns waits for them, caches them, and raises the
    first failure."""
    with _SVG_LOCK:
        missing = list(dict.fromkeys(d for d in dots if d not in _SVG_CACHE and _failed(d) is None))
        failed = [_failed(d) for d in dots if d not in _SVG_CACHE and _failed(d) is not None]
    pending = render_svgs_start(missing) if missing else None

    def finish() -> None:
        if pending is not None:
            results = pending()
            with _SVG_LOCK:
                for d, r in zip(missing, results):
                    _remember(d, r)
            failed.extend(str(r) for r in results if isinstance(r, RuntimeError))
        if failed:
            raise RuntimeError(failed[0])

    return finish


def _svg(dot: str) -> str:
    with _SVG_LOCK:
        if dot in _SVG_CACHE:
            _SVG_CACHE.move_to_end(dot)
            return _SVG_CACHE[dot]
        why = _failed(dot)
    if why is not None:
        raise RuntimeError(why)
    result = render_svgs_each([dot])[0]
    with _SVG_LOCK:
        _remember(dot, result)
    if isinstance(result, RuntimeError):
        raise result
    return result


def layout_svg(dot: str) -> str:
    """The SVG of a DOT text, from the layout cache shared by every session (laid out on a miss)."""
    return _svg(dot)


def route_legend(spec: GraphSpec) -> list[dict]:
    """The routes (and marks) that occur in this graph, for the legend drawn over it."""
    routes = {n.route for n in spec.nodes.values() if n.kind == "kernel" and n.route}
    routes |= {c.route for c in spec.clusters.values() if c.route}
    items = [{"label": ROUTE_LABELS[r], "fill": ROUTE_COLORS[r]} for r in ROUTES if r in routes]
    if any(n.layout_change for n in spec.nodes.values()) or any(e.layout_mark for e in spec.edges):
        items.append({"label": "layout change", "fill": "white", "border": "2px dashed #D62728"})
    if any(n.highlighted or n.selected for n in spec.nodes.values()) or any(c.highlighted or c.selected
                                                                              for c in spec.clusters.values()):
        items.append({"label": "selected / linked", "fill": "white", "border": "2px solid #FF7F0E"})
    return items


def graph_widget(spec: GraphSpec, key: str, height: int = 640, focus: str | None = None,
                 view_key: str | None = None) -> dict | None:
    """Draw one GraphSpec (Compare, Pass pipeline); returns {"id": clicked node id, "n": click
    counter} or None. Zoom and pan are kept across reruns while ``view_key`` (default: the
    graph's title) stays the same."""
    dot = spec.to_dot()
    try:
        svg = _svg(dot)
    except RuntimeError as e:
        show_error(e)
        return None
    return _COMPONENT(single=True, svg=svg, title=spec.title, height=height, focus=focus,
                      view_key=view_key or spec.title, legend=route_legend(spec), key=key, default=None)


def pair_widget(specs: dict, related: dict, fused: dict, selected: dict, key: str, height: int = 620,
                missing: dict | None = None) -> dict | None:
    """Two optimized graphs side by side (Compare), linked in the browser: ``specs`` and
    ``fused`` by side ("a", "b"; a spec may be None), ``related[side][kernel]`` = the other
    side's kernels doing its ops. Returns {"sel": {"side", "name"}, "n": click counter} or None.
    The SVGs carry no selection, so a click never re-lays a graph out and the zoom stays."""
    import hashlib

    pair = {}
    for side, spec in specs.items():
        if spec is None:
            pair[side] = {"svg": None, "title": "", "legend": [], "missing": (missing or {}).get(side, "")}
            continue
        try:
            svg = _svg(spec.to_dot())
        except RuntimeError as e:
            show_error(e)
            svg = None
        pair[side] = {"svg": svg, "title": spec.title, "legend": route_legend(spec)}
    data_key = hashlib.sha1(json.dumps(pair, sort_keys=True).encode()).hexdigest()[:16]
    return _COMPONENT(pair=pair, related=related, fused=fused, selected=selected or {}, data_key=data_key,
                      min_scale=MIN_SCALE["normal"], max_scale=1.6, height=height, key=key, default=None)


OPEN_AS_LAYERS = 1000  # instructions before optimization above which the graphs open as layers


# Pixels per point at which the graphs open, at least: labels are FONT (14) and EDGE_FONT (12)
# points, so presentation mode's minimum puts every label at 14 px or more.
MIN_SCALE = {"normal": 0.85, "present": 14 / 12}


def time_legend() -> list[dict]:
    from analysis.render.graph import TIME_SCALE

    return [{"label": "share of the step:", "fill": "white", "border": "1px solid white"}] + [
        {"label": lab, "fill": TIME_SCALE[i], "border": "1px solid #bbb"}
        for i, lab in ((0, "none"), (2, ""), (3, "half"), (4, ""), (5, "the most"))]


def memory_legend() -> list[dict]:
    from analysis.render.graph import TIME_SCALE

    return [{"label": "temporaries written:", "fill": "white", "border": "1px solid white"}] + [
        {"label": lab, "fill": TIME_SCALE[i], "border": "1px solid #bbb"}
        for i, lab in ((0, "none"), (2, ""), (3, "half"), (4, ""), (5, "the most"))]


BASIC_VARIANTS = ("default", "expanded", "collapsed")


def _variant_specs(b: Bundle, names, isolate: bool = False) -> dict[str, dict[str, GraphSpec]]:
    """The GraphSpecs of the views ``names`` (of ``BASIC_VARIANTS`` and the layers views, see
    ``analysis.render.layer_graph``; ``isolate``: an opened layer with its neighbours only), by side."""
    from analysis.fusion_decisions import edge_notes
    from analysis.render.layer_graph import layer_variants

    pre_mod, post_mod = b.module("hlo_before"), b.module("hlo_after")
    timings = ((b.timings or {}).get("kernels") or None) if b.timings else None
    notes = edge_notes(b.fusion_decisions) if pre_mod is not None else None  # why XLA did (not) fuse each boundary
    specs: dict[str, dict[str, GraphSpec]] = {"pre": {}, "post": {}}
    basic = [n for n in BASIC_VARIANTS if n in names]
    if pre_mod is not None:
        args = {"default": {}, "expanded": {"collapse": False}, "collapsed": {"collapse": True}}
        for n in basic:
            specs["pre"][n] = pre_graph(pre_mod, edge_notes=notes, **args[n])
    if post_mod is not None:
        fusions = {k.name for k in b.kernels if k.opcode == "fusion" and k.fused_ops}
        kw = dict(timings=timings, provenance=b.provenance)
        args = {"default": {}, "expanded": {"expand": fusions, "collapse_all": False}, "collapsed": {"collapse_all": True}}
        for n in basic:
            specs["post"][n] = post_graph(post_mod, b.kernels, **args[n], **kw)
    layered = [n for n in names if n.startswith("layers")]
    if layered:
        for side, variants in layer_variants(b, edge_notes=notes, timings=timings, names=layered,
                                             isolate=isolate).items():
            specs[side].update(variants)
    return {side: v for side, v in specs.items() if v}


def _svg_or_error(dot: str) -> str:
    try:
        return _svg(dot)
    except RuntimeError as e:
        return f"<p>{html.escape(str(e))}</p>"


@tuning.building()  # an entry point of analysis.tuning: big structures, none of them garbage
def graph_payload(b: Bundle) -> dict:
    """Everything the explorer's graph component needs for one compile (``_payload_core``), with
    the kernels' memory colours and the key the frame knows it by. The core is made once per
    parse, analysis, fusion decisions, timings and source (``Bundle.derived``): made ahead, beside
    the compile, on the parent's early bundle of a worker's texts and decisions
    (``payload_ahead``), it is what a worker's bundle of the same ones takes. Each call returns
    a payload of its own (``add_variant`` and ``add_details`` change it in place)."""
    from analysis.memory import kernel_temp_bytes
    from analysis.render.graph import time_color

    core = _core(b)
    payload = {**core, "lazy": list(core["lazy"]), "details_log": [],
               "graphs": {side: {**g, "svgs": list(g["svgs"]), "variants": dict(g["variants"]),
                                 "titles": dict(g.get("titles") or {})}
                          for side, g in core["graphs"].items()}}
    payload["details"] = dict(core["details"])
    payload.pop("graphs_hash", None)
    # kernels by the temporary bytes they write (analysis.memory), on the time colours' scale
    temp = kernel_temp_bytes(b.memory)
    most = max(temp.values(), default=0) or None
    memfill = {}
    for name, nbytes in temp.items():
        k = b.kernel(name)
        memfill[name] = [time_color(nbytes, most), "white" if most and nbytes > 0.6 * most else "black",
                         ROUTE_COLORS.get(k.route if k else "", "#777777")]
    payload["memfill"] = memfill
    payload["data_key"] = hashlib.sha1(json.dumps([core["graphs_hash"], b.created, b.title]).encode()).hexdigest()[:16]
    return payload


def _core_inputs(b: Bundle) -> tuple:
    """What ``_payload_core`` is made of, by identity (``Bundle.derived``)."""
    return (b.module("hlo_before"), b.module("hlo_after"), b.kernels, b.provenance, b.fusion_decisions,
            b.timings, b.source.get("code"), b.source.get("file"))


def _core(b: Bundle) -> dict:
    core = b.derived("graph_payload", _core_inputs(b), lambda: _payload_core(b))
    if core.get("error"):  # a layout that failed (a loaded machine) is tried again next time
        b.forget("graph_payload")
    return core


def payload_ahead(b: Bundle) -> None:
    """The payload's core of a draft bundle, made beside the compile (the explorer hands this to
    ``runner.compile_bundle``, whose worker calls it with the draft of what the worker sent
    early): the layouts land in the layout cache, the rest in ``b``'s ``derived``, for the
    worker's bundle of the same inputs to take."""
    _core(b)


def _payload_core(b: Bundle) -> dict:
    """Everything the explorer's graph component needs for one compile: both graphs in the
    views it opens with (all expanded, all collapsed, the model's layers, ...), the op <-> kernel
    links, every node's details, the source lines with their kernels, the lecture order.

    A big program (more than ``OPEN_AS_LAYERS`` instructions) opens collapsed to its layers, and
    only that view is laid out: every other view is in ``lazy`` and is built and laid out when
    the user asks for it (``add_variant``; a layer then opens with its neighbours only), so the
    first graph costs what is shown, not what the module holds."""
    from analysis.links import link_maps
    from analysis.render.details import lecture_order, node_details, pack_light, source_lines
    from analysis.render.graph import time_color
    from analysis.render.layer_graph import layer_maps, variant_names

    pre_mod = b.module("hlo_before")
    timings = ((b.timings or {}).get("kernels") or None) if b.timings else None
    layers = layer_maps(b)
    all_layered = variant_names(b) if layers else []
    big = bool(layers) and pre_mod is not None and len(pre_mod.entry.instructions) > OPEN_AS_LAYERS
    if big:
        eager = ["layers"]
    else:
        from analysis.render.layer_graph import MAX_EXPANDABLE, MAX_INSTRUCTIONS_AHEAD

        size = sum(len(c.instructions) for c in pre_mod.computations) if pre_mod is not None else 0
        ahead = all_layered[:1 + MAX_EXPANDABLE] if size <= MAX_INSTRUCTIONS_AHEAD else all_layered[:1]
        eager = list(BASIC_VARIANTS) + ahead
    lazy = [n for n in list(BASIC_VARIANTS) + all_layered if n not in eager]
    specs = _variant_specs(b, eager)
    # Graphviz lays the views out in its own processes while the rest is built here
    dots = {side: {name: sp.to_dot() for name, sp in variants.items()} for side, variants in specs.items()}
    layouts_done = layout_dots_start([d for v in dots.values() for d in v.values()])
    top = max((t.get("share") or 0 for t in (timings or {}).values()), default=0) or None
    time = {}
    for name, t in (timings or {}).items():
        share = t.get("share")
        if share is not None:
            k = b.kernel(name)
            time[name] = [time_color(share, top), "white" if top and share > 0.6 * top else "black",
                          ROUTE_COLORS.get(k.route if k else "", "#777777")]
    if big:  # every node's light details, the full ones for what is drawn (the rest on request)
        light = node_details(b, light=True)
        details = node_details(b, ids=_drawn_ids(specs))
    else:
        details = node_details(b)
    for lid, box in ((layers or {}).get("boxes") or {}).items():
        details[lid] = {"side": "layer", "name": box["path"], "title": "layer " + box["path"], "facts": box["facts"],
                        "op_name": box["path"], "lines": []}
    links = link_maps(b.provenance, b.kernels)
    try:
        layouts_done()
        error = None
    except RuntimeError as e:
        error = str(e)
    graphs = {}
    for side, variants in specs.items():
        svgs: list[str] = []
        index: dict[str, int] = {}
        by_dot: dict[str, int] = {}
        for name, dot in dots[side].items():
            if dot not in by_dot:
                svgs.append(_svg_or_error(dot))
                by_dot[dot] = len(svgs) - 1
            index[name] = by_dot[dot]
        d = variants.get("default") or variants["layers"]
        graphs[side] = {"title": d.title, "svgs": svgs, "variants": index, "legend": route_legend(d),
                        "collapsed": len(d.collapsed),
                        "titles": {n: sp.title for n, sp in variants.items() if sp.title != d.title}}
    if big:
        # What never changes after this, as one JSON text: held as dicts, a 192-layer program's
        # links, layer maps and light details were 47 MiB of the server's memory, as text 11.
        # The frame parses it once; ``details`` has the full details sent so far.
        # Of that, what the frame derives is left out (it makes it back: ``unpack`` in the
        # component): the op -> kernels links (the inverse of kernel -> ops), the op -> box map
        # (the boxes' ops), and the light details go by column (``pack_light``): 11 MB of JSON
        # at 192 layers were 4.5, and the websocket message that carries them 2 s of the wait
        # for the first graph on the 2-core machine.
        packed = json.dumps({"links": {k: v for k, v in links.items() if k != "pre2k"},
                             "layers": {k: v for k, v in layers.items() if k != "op_box"},
                             "light": pack_light(light)}, default=str)
        links = layers = light = None
    payload = {"graphs": graphs, "links": links, "details": details, "layers": layers,
               # big programs open collapsed to their layers (the layers view scales; every op does not)
               "open_variant": "layers" if big else "default", "lazy": lazy,
               "source": source_lines(b), "lecture": lecture_order(b), "time": time, "timed": bool(time),
               "missing": {"pre": "No pre-optimization HLO in this input.", "post": "No optimized HLO in this input."},
               "error": error, "details_log": []}
    if big:
        payload["packed"] = packed
    for g in graphs.values():
        g["time_legend"] = time_legend()
        g["memory_legend"] = memory_legend()
    payload["graphs_hash"] = hashlib.sha1(json.dumps(graphs, sort_keys=True, default=str).encode()).hexdigest()
    return payload


def add_variant(b: Bundle, payload: dict, name: str) -> bool:
    """Build and lay out one view the payload left ``lazy`` (the component asked for it: a
    layer opened, "Expand all" on a big program) and add its SVGs to ``payload`` in place, so
    the component can switch to it without a new payload. False when ``name`` is no such view."""
    if not isinstance(name, str) or name not in payload.get("lazy", ()):
        return False
    # a big program (opened as layers) opens a layer with its neighbours only: laying out the
    # layer in the middle of all the others would cost what the whole layers view costs
    with tuning.building():
        specs = _variant_specs(b, [name], isolate=payload.get("open_variant") == "layers")
    try:
        layout_all([sp for v in specs.values() for sp in v.values()])
    except RuntimeError:
        pass  # each side says so in its pane
    for side, variants in specs.items():
        g = payload["graphs"].get(side)
        if g is None or name not in variants:
            continue
        svg = _svg_or_error(variants[name].to_dot())
        if variants[name].title != g["title"]:
            g.setdefault("titles", {})[name] = variants[name].title
        if svg in g["svgs"]:
            g["variants"][name] = g["svgs"].index(svg)
        else:
            g["svgs"].append(svg)
            g["variants"][name] = len(g["svgs"]) - 1
    payload["lazy"] = [n for n in payload["lazy"] if n != name]
    payload["rev"] = payload.get("rev", 0) + 1  # the frame's copy is out of date: send it all again
    add_details(b, payload, _drawn_ids(specs), bump=False)
    return True


def _drawn_ids(specs: dict) -> set[str]:
    """The detail ids of the nodes these views draw (an expanded fusion's box is its kernel)."""
    ids = {nid for v in specs.values() for sp in v.values() for nid in sp.nodes}
    ids.update("k:" + c[2:] for v in specs.values() for sp in v.values() for c in sp.clusters if c.startswith("f:"))
    return ids


def add_details(b: Bundle, payload: dict, ids, bump: bool = True) -> bool:
    """Full details for those of ``ids`` that the payload has only light ones for (a big
    program's nodes outside the views drawn so far; ids of no node are left out), added in
    place and logged under the payload's revision, so that a frame holding an earlier revision
    gets them (``details_since``). False when there was nothing to add."""
    from analysis.render.details import node_details

    if "packed" not in payload:  # a small program: every node's full details are there already
        return False
    have = payload["details"]
    need = {i for i in ids if isinstance(i, str) and i not in have}
    if not need:
        return False
    with tuning.building():
        full = node_details(b, ids=need)
    if not full:
        return False
    if bump:
        payload["rev"] = payload.get("rev", 0) + 1
    have.update(full)
    payload.setdefault("details_log", []).append((payload.get("rev", 0), sorted(full)))
    return True


def details_since(payload: dict, rev) -> dict:
    """The details added after revision ``rev`` (what a frame holding that revision lacks);
    all that were added when ``rev`` is not a revision number (it comes from the browser)."""
    if isinstance(rev, bool) or not isinstance(rev, int):
        rev = -1
    have = payload.get("details") or {}
    return {i: have[i] for r, ids in payload.get("details_log", ()) if r > rev for i in ids if i in have}


def graphs_since(graphs: dict, held) -> dict:
    """The payload's graphs for a frame that holds the first ``held[side]`` SVGs of each side
    (what it said it holds): views laid out on request only append SVGs, so each side sends the
    ones after those (``svgs_from``) instead of all of them again. ``held`` comes from the
    browser: anything but counts within the lists sends the side whole."""
    out = {}
    for side, g in graphs.items():
        k = held.get(side) if isinstance(held, dict) else None
        if g is None or isinstance(k, bool) or not isinstance(k, int) or not 0 < k <= len(g.get("svgs", ())):
            out[side] = g
        else:
            out[side] = {**g, "svgs": g["svgs"][k:], "svgs_from": k}
    return out


def explorer_graphs(b: Bundle, payload: dict, sel: dict, key: str = "graphs", present: bool = False,
                    show_source: bool = False) -> dict | None:
    """The explorer's two graphs, details and source as one component; returns what the user
    selected there ({"sel": {...}, "n": counter}) or None. In presentation mode the summary
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
    else:
        data = packed_args({k: v for k, v in payload.items() if k != "details_log"}, rev)
    return _COMPONENT(**data, selected=sel or {}, present=present, show_source=show_source, cards=cards,
                      min_scale=MIN_SCALE["present" if present else "normal"], max_scale=1.6,
                      height=600 if present else 560, key=key, default=None)


# Component arguments past this size go as one deflated JSON text, base64 (``z``), which the
# frame inflates (the browser's DecompressionStream). A 192-layer program's payload is 7.1 MB
# of JSON (4.7 MB of it the packed links, layers and light details, 0.75 MB of SVG): deflated at
# level 1 it is 0.9 MB, made in 30 ms. Sent as it is, it went through the server's websocket,
# the page's JSON parse and a structured clone into the frame, on the one thread each side that
# also serves and draws everything else of the page.
PACK_OVER = 256 * 1024


def packed_args(data: dict, rev) -> dict:
    """The component's arguments for a whole payload: ``data`` as it is when small, else
    ``{"z": base64(deflate(JSON))}`` with its key and revision beside it (``unpackArgs`` in the
    frame)."""
    text = json.dumps(data, default=str, separators=(",", ":"))
    if len(text) <= PACK_OVER:
        return {**data, "rev": rev}
    z = base64.b64encode(zlib.compress(text.encode(), 1)).decode("ascii")
    return {"z": z, "data_key": data.get("data_key"), "rev": rev}


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


def ops_on_line(b: Bundle, line: int) -> list[str]:
    """The pre-optimization ops made by line ``line`` of the user's file."""
    return list(ops_by_line(b).get(line, ()))


def ops_by_line(b: Bundle) -> dict[int, list[str]]:
    """Line of the user's file -> the pre-optimization ops it made; one walk of the module per
    bundle (a walk per line was most of a rerun of a 24,000-op program)."""
    from analysis.provenance import _walk_compute

    def make() -> dict[int, list[str]]:
        pre = b.module("hlo_before")
        user_file = b.source.get("file")
        out: dict[int, list[str]] = {}
        for inst, key in (_walk_compute(pre) if pre is not None else ()):
            if key and key[2] and (not user_file or not key[1] or key[1] == user_file):
                out.setdefault(key[2], []).append(inst.name)
        return out

    return b.derived("ops_by_line", (b.stages.get("hlo_before"), b.source.get("file")), make)


# ----------------------------------------------------------------------------- search


def search(b: Bundle, query: str) -> list[tuple[str, str, str]]:
    """Ops matching by name, op_name or source line: (side, name, description)."""
    q = query.strip()
    if not q:
        return []
    out: list[tuple[str, str, str]] = []
    m = re.fullmatch(r"(?:line\s*)?(\d+)", q, re.I)
    if m:
        for op in ops_on_line(b, int(m.group(1))):
            out.append(("pre", op, f"line {m.group(1)}"))
    ql = q.lower()
    for side, stage in (("pre", "hlo_before"), ("post", "hlo_after")):
        mod = b.module(stage)
        if mod is None:
            continue
        names = {k.name for k in b.kernels} if side == "post" else None
        for inst in mod.instructions():
            if inst.opcode in ("parameter",) and side == "post":
                continue
            if ql in inst.name.lower() or ql in inst.metadata.op_name.lower() or ql == inst.opcode:
                target = inst.name
                if side == "post" and target not in names:
                    k = kernel_containing(b, inst.name)
                    if k is None:
                        continue
                    target = k
                out.append((side, target, inst.metadata.op_name or inst.opcode))
            if len(out) > 200:
                break
    seen, uniq = set(), []
    for r in out:
        if (r[0], r[1]) not in seen:
            seen.add((r[0], r[1]))
            uniq.append(r)
    return uniq


def kernel_containing(b: Bundle, inst_name: str) -> str | None:
    for k in b.kernels:
        if k.name == inst_name or inst_name in k.fused_ops:
            return k.name
    return None


# ----------------------------------------------------------------------------- details


def line_tags(payload: dict | None) -> dict[int, list]:
    """Source line -> [[kernel, route colour], ...] from a ``graph_payload``."""
    return {ln["n"]: ln["kernels"] for ln in (payload or {}).get("source") or [] if ln.get("kernels")}


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


def _find(b: Bundle, side: str, name: str) -> Instruction | None:
    mod = b.module("hlo_before" if side == "pre" else "hlo_after")
    if mod is None:
        return None
    for c in mod.computations:
        if name in c.by_name:
            return c.by_name[name]
    return None


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
    inst = _find(b, side, name)
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
            t = ((b.timings or {}).get("kernels") or {}).get(name)
            if t and t.get("median_s") is not None:
                facts.append(f"measured {human_seconds(t['median_s'])} ({t.get('share', 0):.1%} of the step)")
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
                from analysis.links import kernel_ops

                absorbed = kernel_ops(prov, name)  # the one op count (graph, Compare, Pass pipeline)
                st.markdown(f"**Absorbed {len(absorbed)} op(s) from before optimization**")
                rows = []
                for op in absorbed[:60]:
                    pi = _find(b, "pre", op)
                    if pi is not None:
                        rows.append(f"`{op}` {pi.opcode} — {pi.metadata.op_name or ''}"
                                    + (f" _({HOW_WORDS[prov.how[op]]})_" if prov.how.get(op) in HOW_HINTED else ""))
                st.markdown("\n".join(f"- {r}" for r in rows) or "_none matched_")
            else:
                from analysis.links import op_kernels

                ks = op_kernels(prov, name)
                how = prov.how.get(name)
                st.markdown(f"**Ended in {len(ks)} kernel(s)**" + (f" (matched by {HOW_WORDS.get(how, how)})" if how else ""))
                st.markdown("\n".join(f"- `{kn}`" for kn in ks) or "_optimized away (folded or eliminated)_")
        src_lines = _source_lines(b, side, name, k)
        code = b.source.get("code")
        if code and src_lines:
            st.markdown("**Source** (lines " + ", ".join(map(str, sorted(src_lines))) + ")")
            st.markdown(code_html(code, src_lines, "d", context=2), unsafe_allow_html=True)
        elif inst.metadata.source is not None:
            st.markdown(f"**Source** {inst.metadata.source}")


def _source_lines(b: Bundle, side: str, name: str, k) -> set[int]:
    user_file = b.source.get("file")
    lines: set[int] = set()
    if k is not None:
        for f, ln in k.source_lines:
            if not user_file or f == user_file:
                lines.add(ln)
        return lines
    inst = _find(b, side, name)
    if inst is not None and inst.metadata.source is not None:
        src = inst.metadata.source
        if src.line and (not user_file or src.file == user_file):
            lines.add(src.line)
    if not lines and side == "pre":
        for ln in _lines_of(b, name):
            lines.add(ln)
    return lines


def _lines_of(b: Bundle, op: str) -> list[int]:
    from analysis.provenance import _walk_compute

    pre = b.module("hlo_before")
    return [key[2] for inst, key in _walk_compute(pre) if inst.name == op and key and key[2]] if pre else []


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
    spec = (_variant_specs(b, [name]).get(side) or {}).get(name)
    if spec is None:
        return b""
    dot = spec.to_dot()
    if fmt == "dot":
        return dot.encode()
    try:
        svg = _svg(dot)
    except RuntimeError as e:
        return str(e).encode()
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + svg).encode()


@st.cache_data(show_spinner=False, max_entries=8)
def report_html(bundle_json: str) -> str:
    """The offline HTML report of a bundle (its JSON), made when the download is clicked."""
    from analysis.render import report

    return report.html_report(Bundle.from_json(bundle_json))
