"""The graph payload: everything the explorer's graph component needs for one compile, built
from a Bundle (both graphs in the views they open with, laid out; the op <-> kernel links;
every node's details; the source lines with their kernels), the views added to it on request,
what a frame holding an earlier revision lacks, and the packing of a big payload (deflated
JSON) into the component's arguments. Pure: no Streamlit, so it is tested and benchmarked
without a page, and made ahead beside a compile (``PayloadAhead``)."""

from __future__ import annotations

import base64
import hashlib
import json
import zlib

from analysis import tuning
from analysis.bundle.content import ContentCache
from analysis.bundle.core import Bundle
from analysis.pipeline import WorkAhead
from analysis.program.kernels import ROUTE_COLORS, ROUTE_LABELS, ROUTES
from analysis.render.graph import GraphSpec
from analysis.render.layout_cache import layout_all, layout_dots_start, svg_or_error


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


from analysis.render.layer_graph import OPEN_AS_LAYERS  # noqa: E402,F401  (the size above which a program opens as its layers)
from analysis.render.view_model import graph_views, variant_specs  # noqa: E402  (the views, as the report's)


def _scale_legend(title: str) -> list[dict]:
    """The legend of a colour scale (``TIME_SCALE``) over the kernels: its title, then none to the most."""
    from analysis.render.graph import TIME_SCALE

    return [{"label": title, "fill": "white", "border": "1px solid white"}] + [
        {"label": lab, "fill": TIME_SCALE[i], "border": "1px solid #bbb"}
        for i, lab in ((0, "none"), (2, ""), (3, "half"), (4, ""), (5, "the most"))]


def time_legend() -> list[dict]:
    return _scale_legend("share of the step:")


def memory_legend() -> list[dict]:
    return _scale_legend("temporaries written:")


@tuning.building()  # an entry point of analysis.tuning: big structures, none of them garbage
def graph_payload(b: Bundle) -> dict:
    """Everything the explorer's graph component needs for one compile (``payload_core``), with
    the kernels' memory colours and the key the frame knows it by. The core is made once per
    parse, analysis, fusion decisions, timings and source (``CORES``, by content): made ahead,
    beside the compile, on the parent's early bundle of a worker's texts and decisions
    (``PayloadAhead``), it is what a worker's bundle of the same ones takes. Each call returns
    a payload of its own (``add_variant`` and ``add_details`` change it in place)."""
    from analysis.program.memory import kernel_temp_bytes
    from analysis.render.graph import time_color

    core = _core(b)
    payload = {**core, "lazy": list(core["lazy"]), "details_log": [],
               "graphs": {side: {**g, "svgs": list(g["svgs"]), "variants": dict(g["variants"]),
                                 "titles": dict(g.get("titles") or {})}
                          for side, g in core["graphs"].items()}}
    payload["details"] = dict(core["details"])
    payload.pop("graphs_hash", None)
    # kernels by the temporary bytes they write (analysis.program.memory), on the time colours' scale
    temp = kernel_temp_bytes(b.memory)
    most = max(temp.values(), default=0) or None
    memfill = {}
    for name, nbytes in temp.items():
        k = b.kernel(name)
        memfill[name] = [time_color(nbytes, most), "white" if most and nbytes > 0.6 * most else "black",
                         ROUTE_COLORS.get(k.route if k else "", "#777777")]
    payload["memfill"] = memfill
    # (with whether the code is here: a preview's frame is sent the measured bundle's code pane anew)
    payload["data_key"] = hashlib.sha1(json.dumps([core["graphs_hash"], b.created, b.title, b.code is None]
                                                  ).encode()).hexdigest()[:16]
    return payload


# The payload cores of the last few programs, by content (``ContentCache``): the draft's, made
# beside the compile (``PayloadAhead``), is the worker's bundle's; a stored bundle opened again,
# from the gallery or a shared link, finds its own. Shared by the sessions of this server.
CORES = ContentCache(("before", "after", "decisions", "timings", "source"), size=6)


def _core(b: Bundle) -> dict:
    core = CORES.get(b, lambda: payload_core(b))
    if core.get("error"):  # a layout that failed (a loaded machine) is tried again next time
        CORES.forget(b)
    return core


class PayloadAhead(WorkAhead):
    """The explorer's work while a worker compiles (``runner.compile_bundle``'s ``ahead``): what
    the fusion decisions do not change once the compiled module is analyzed (``_undecided``),
    then the payload's core of the draft of what the worker sent early, its layouts in the
    layout cache, for the worker's bundle of the same content to find."""

    def analyzed(self, bundle: Bundle) -> None:
        _undecided(bundle)

    def draft(self, bundle: Bundle) -> None:
        _core(bundle)


def payload_core(b: Bundle) -> dict:
    """Everything the explorer's graph component needs for one compile: both graphs in the
    views it opens with (all expanded, all collapsed, the model's layers, ...), the op <-> kernel
    links, every node's details, the source lines with their kernels, the lecture order.

    Which views there are, which opens first and which are laid out now is the view model's
    (``analysis.render.view_model.graph_views``, as the report's): a big program (more than
    ``OPEN_AS_LAYERS`` instructions) opens collapsed to its layers, and only that view is laid
    out: every other view is in ``lazy`` and is built and laid out when the user asks for it
    (``add_variant``; a layer then opens with its neighbours only), so the first graph costs what
    is shown, not what the module holds. What the fusion decisions do not change is made by
    ``_undecided``, once per analysis, before they are in where a worker compiles."""
    from analysis.bundle.core import missing_stage_text
    from analysis.render.decisions import edge_why
    from analysis.render.details import lecture_order, node_details, source_lines

    fixed = _undecided(b)
    views = fixed["views"]
    # the graph before optimization, with each boundary's decision; the optimized one was made
    # with the rest of what the decisions do not change
    pre = variant_specs(b, views.eager, sides=("pre",)).get("pre")
    sides = {side: v for side, v in (("pre", _drawing(pre) if pre else None), ("post", fixed["post"])) if v}
    # (the optimized graph's layouts were started with it: this waits for those too)
    layouts_done = layout_dots_start([d for v in sides.values() for d in v["dots"].values()])
    details = dict(fixed["details"])
    if views.as_layers and pre:  # the full details of what is drawn before optimization too
        details.update(node_details(b, ids=_drawn_ids({"pre": pre}) - details.keys()))
    try:
        layouts_done()
        error = None
    except RuntimeError as e:
        error = str(e)
    graphs = {}
    for side, drawing in sides.items():
        svgs: list[str] = []
        index: dict[str, int] = {}
        by_dot: dict[str, int] = {}
        for name, dot in drawing["dots"].items():
            if dot not in by_dot:
                svgs.append(svg_or_error(dot))
                by_dot[dot] = len(svgs) - 1
            index[name] = by_dot[dot]
        graphs[side] = {"title": drawing["title"], "svgs": svgs, "variants": index, "legend": drawing["legend"],
                        "collapsed": drawing["collapsed"], "titles": dict(drawing["titles"])}
    payload = {"graphs": graphs, "links": fixed["links"], "details": details, "layers": fixed["layers"],
               "why": edge_why(b.fusion_decisions),  # each boundary's decision, for the "why" panel
               # big programs open collapsed to their layers (the layers view scales; every op does not)
               "open_variant": views.first, "lazy": views.lazy,
               "source": source_lines(b), "lecture": lecture_order(b), "time": fixed["time"], "timed": bool(fixed["time"]),
               "missing": {side: missing_stage_text(b, side) for side in ("pre", "post")},
               "error": error, "details_log": []}
    if "packed" in fixed:
        payload["packed"] = fixed["packed"]
    for g in graphs.values():
        g["time_legend"] = time_legend()
        g["memory_legend"] = memory_legend()
    payload["graphs_hash"] = hashlib.sha1(json.dumps(graphs, sort_keys=True, default=str).encode()).hexdigest()
    return payload


def _drawing(variants: dict) -> dict:
    """What a side's graph in the payload is made of, from its views' specs: each view's DOT and
    the first view's title, legend and boxes (the specs themselves are not kept)."""
    d = variants.get("default") or variants["layers"]
    return {"dots": {name: sp.to_dot() for name, sp in variants.items()}, "title": d.title,
            "legend": route_legend(d), "collapsed": len(d.collapsed),
            "titles": {n: sp.title for n, sp in variants.items() if sp.title != d.title}}


def _undecided(b: Bundle) -> dict:
    """What ``payload_core`` holds that the fusion decisions do not change, made once per parse,
    analysis and timings (``Bundle.derived``; callers must not change it): the views, the
    optimized graph's drawing (``_drawing``) with its layouts started in Graphviz, the kernels' time colours,
    the layers' maps, the links, the nodes' details (a big program's light ones, the full ones
    of the optimized graph it draws) and a big program's packed JSON. A worker sends its
    compiled module about a second before its fusion decisions (it reads them off XLA's log
    after the compile); this is made in that second (``PayloadAhead.analyzed``), which at 96
    layers was most of the payload's time after the decisions came (docs/performance.md)."""
    fingerprint = (b.stages.get("hlo_before"), b.stages.get("hlo_after"), b.provenance, b.kernels, b.timings)
    return b.derived("payload:undecided", fingerprint, lambda: _make_undecided(b))


def _make_undecided(b: Bundle) -> dict:
    from analysis.program.links import link_maps
    from analysis.render.details import measured_kernels, node_details, pack_light
    from analysis.render.graph import time_color
    from analysis.render.layer_graph import layer_maps

    views = graph_views(b)
    post = variant_specs(b, views.eager, sides=("post",)).get("post") or {}
    drawing = _drawing(post) if post else None
    # Graphviz lays these out in its own processes while the rest is built (and cached by DOT,
    # where ``payload_core`` finds them)
    layout_dots_start(list(drawing["dots"].values()) if drawing else [])
    timings = measured_kernels(b)  # the labels' and colours' time and share (docs/numbers.md)
    top = max((t.share for t in timings.values()), default=0) or None
    time = {}
    for name, t in timings.items():
        share = t.share
        k = b.kernel(name)
        time[name] = [time_color(share, top), "white" if top and share > 0.6 * top else "black",
                      ROUTE_COLORS.get(k.route if k else "", "#777777")]
    layers = layer_maps(b)
    if views.as_layers:  # every node's light details, the full ones for what is drawn (the rest on request)
        light = node_details(b, light=True)
        details = node_details(b, ids=_drawn_ids({"post": post}))
    else:
        details = node_details(b)
    for lid, box in ((layers or {}).get("boxes") or {}).items():
        details[lid] = {"side": "layer", "name": box["path"], "title": "layer " + box["path"], "facts": box["facts"],
                        "op_name": box["path"], "lines": []}
    links = link_maps(b.provenance, b.kernels)
    out = {"views": views, "post": drawing, "time": time, "details": details, "links": links, "layers": layers}
    if views.as_layers:
        # What never changes after this, as one JSON text: held as dicts, a big program's links,
        # layer maps and light details took far more of the server's memory (docs/performance.md).
        # The frame parses it once; ``details`` has the full details sent so far.
        # Of that, what the frame derives is left out (it makes it back: ``unpack`` in the
        # component): the op -> kernels links (the inverse of kernel -> ops), the op -> box map
        # (the boxes' ops), and the light details go by column (``pack_light``): much less
        # JSON, and a smaller websocket message that carries it, which was seconds of the wait
        # for the first graph on the 2-core machine.
        out["packed"] = json.dumps({"links": {k: v for k, v in links.items() if k != "pre2k"},
                                    "layers": {k: v for k, v in layers.items() if k != "op_box"},
                                    "light": pack_light(light)}, default=str)
        out["links"] = out["layers"] = None
    return out


def add_variant(b: Bundle, payload: dict, name: str) -> bool:
    """Build and lay out one view the payload left ``lazy`` (the component asked for it: a
    layer opened, "Expand all" on a big program) and add its SVGs to ``payload`` in place, so
    the component can switch to it without a new payload. False when ``name`` is no such view."""
    if not isinstance(name, str) or name not in payload.get("lazy", ()):
        return False
    # a big program (opened as layers) opens a layer with its neighbours only: laying out the
    # layer in the middle of all the others would cost what the whole layers view costs
    with tuning.building():
        specs = variant_specs(b, [name], isolate=graph_views(b).layer_alone)
    try:
        layout_all([sp for v in specs.values() for sp in v.values()])
    except RuntimeError:
        pass  # each side says so in its pane
    for side, variants in specs.items():
        g = payload["graphs"].get(side)
        if g is None or name not in variants:
            continue
        svg = svg_or_error(variants[name].to_dot())
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


def add_present(b: Bundle, payload: dict, name) -> bool:
    """Presentation mode's drawing of view ``name`` (``analysis.render.present_graph``: dense,
    laid out for the pane a projector gives one graph) added to ``payload`` in place, as each
    side's ``present[name]`` (an index into its SVGs), under a new revision; made once per view
    and compile. A side whose graph is too big for it keeps its usual drawing. False when there
    is nothing to add (``name`` is no view laid out, or it is done)."""
    from analysis.render.present_graph import present_dot

    done = payload.setdefault("present_done", [])
    graphs = payload.get("graphs") or {}
    if not isinstance(name, str) or name in done or not any(name in (g or {}).get("variants", {}) for g in graphs.values()):
        return False
    done.append(name)
    with tuning.building():
        specs = variant_specs(b, [name], isolate=graph_views(b).layer_alone)
    added = False
    for side, variants in specs.items():
        g = graphs.get(side)
        if g is None or name not in variants:
            continue
        try:
            dot = present_dot(variants[name])
        except RuntimeError:
            continue  # the pane keeps the usual drawing
        if dot is None:
            continue
        svg = svg_or_error(dot)
        if svg not in g["svgs"]:
            g["svgs"].append(svg)
        g.setdefault("present", {})[name] = g["svgs"].index(svg)
        added = True
    if added:
        payload["rev"] = payload.get("rev", 0) + 1  # the frame's copy is out of date: its new SVGs go
    return added


def add_code(b: Bundle, payload: dict, follows: str | None = None) -> bool:
    """The Code pane's data (``app.code_payload.code_view``: every kernel's code, its lines linked
    to HLO instructions, its facts; a big compile's kernel names only, each kernel's code then
    added when it is first shown: ``add_code_kernel``) added to ``payload`` in place when the
    frame first opens the pane, under a new revision (``code_rev``: a frame holding an earlier
    one is sent it). Not in the payload before: a compile's code is often bigger than its
    graphs, and the first graph must not wait for it. ``follows``: why ``b`` has no code yet, where
    it was to come with its timings (``ExplorerState.comes_with_timings``): when that changes
    (the measuring failed) the pane's data is sent again with the new reason. False when it is
    there already."""
    now = follows if follows and b.code is None else None
    if "code" in payload:
        code = payload["code"]
        if "follows" not in code or code["follows"] == now:
            return False
        if now is None:
            code.pop("follows")
        else:
            code["follows"] = now
        payload.pop("code_sent", None)  # (packed again when asked)
    else:
        from app.code_payload import code_view

        with tuning.building():
            payload["code"] = code_view(b) or {"stages": [], "kernels": {}, "lazy": [], "library": {}, "note": None,
                                               **({"follows": now} if now else {})}
        payload["code_log"] = []
    payload["rev"] = payload.get("rev", 0) + 1
    payload["code_rev"] = payload["rev"]
    return True


def add_code_kernel(b: Bundle, payload: dict, name) -> bool:
    """The code of kernel ``name`` (from the browser: any value) added to the pane's data of a big
    compile, where it was left for when it is first shown (``lazy``), under a new revision
    logged in ``code_log`` (``code_since`` sends a frame what it lacks). False when there is
    nothing to add."""
    from app.code_payload import kernel_view

    code = payload.get("code")
    if not isinstance(name, str) or code is None or name not in code.get("lazy", ()):
        return False
    with tuning.building():
        entry = kernel_view(b, name)
    code["lazy"] = [n for n in code["lazy"] if n != name]
    if entry is not None:
        code["kernels"][name] = entry
    payload["rev"] = payload.get("rev", 0) + 1
    payload["code_log"].append((payload["rev"], name))
    payload.pop("code_sent", None)  # the whole data has changed: packed again when asked
    return True


def _packed(value: dict) -> dict:
    """``value`` as it is, or past ``PACK_OVER`` as one deflated JSON text ``{"z": ...}``."""
    text = json.dumps(value, separators=(",", ":"))
    return value if len(text) <= PACK_OVER else {"z": base64.b64encode(zlib.compress(text.encode(), 1)).decode("ascii")}


def code_since(payload: dict, rev) -> dict | None:
    """What the Code pane's data a frame holding revision ``rev`` lacks: all of it (``rev`` from
    before it came, or not a revision number: it comes from the browser), else ``{"kernels_add":
    {name: code}}`` of the kernels added since, else None; past ``PACK_OVER`` as one deflated
    JSON text (``{"z": ...}``, inflated by the frame), the whole data made once."""
    if "code" not in payload:
        return None
    if not isinstance(rev, int) or isinstance(rev, bool) or rev < payload.get("code_rev", 0):
        if "code_sent" not in payload:
            payload["code_sent"] = _packed(payload["code"])
        return payload["code_sent"]
    names = [n for r, n in payload.get("code_log", ()) if r > rev]
    if not names:
        return None
    kernels = payload["code"]["kernels"]
    return _packed({"kernels_add": {n: kernels.get(n) for n in names},
                    "lazy": payload["code"].get("lazy", [])})


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



# Component arguments past this size go as one deflated JSON text, base64 (``z``), which the
# frame inflates (the browser's DecompressionStream). A big program's payload is megabytes of
# JSON, most of it the packed links, layers and light details; deflated at level 1 it is a
# fraction of that, made in milliseconds (docs/performance.md). Sent as it is, it went through
# the server's websocket, the page's JSON parse and a structured clone into the frame, on the
# one thread each side that also serves and draws everything else of the page.
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


def line_tags(payload: dict | None) -> dict[int, list]:
    """Source line -> [[kernel, route colour], ...] from a ``graph_payload``."""
    return {ln["n"]: ln["kernels"] for ln in (payload or {}).get("source") or [] if ln.get("kernels")}

