"""A big program's graphs in the offline report (and the notebook, which draws the report's
page): collapsed to its layers, as the app opens them, with every layer's own graph laid out
ahead, so that a layer opens in the page without Graphviz (the page is static HTML and carries
no third-party code).

Each layer's graph is built from its own instructions (``layer_graph.own_layer_specs``, linear
in the program). The layers of a stack are mostly the same graph with other names, and laying
out each of them was most of the report's time (docs/performance.md), so a layer's graph is laid
out in its *canonical* form (``canonical``): its node and cluster ids numbered in order, every
run of digits in a label written as zeros (digits are equally wide; a name's number as at least
four, so the layout fits the real labels), no tooltips. Identical layers give the same DOT text, which is
laid out once, through the layout cache the app shares (``layout_cache``: keyed by DOT text).
The page keeps one SVG per distinct layout (a *template*) and, per layer, its ids, label lines
and tooltips in the template's order; opening a layer clones its template and writes them in
(as text, never as markup: names come from the user's program).

``layered_graphs(bundle)`` is None for a program the app opens whole (the view model's,
``view_model.graph_views``); the report then draws both whole graphs."""

from __future__ import annotations

import copy
import dataclasses
import operator
import re

from analysis.bundle.content import ContentCache
from analysis.bundle.core import Bundle
from analysis.pipeline import WorkAhead
from analysis.render.graph import Cluster, Edge, GraphSpec, Node, wrap_title
from analysis.render.layer_graph import layer_maps, own_layer_specs, prepare_before
from analysis.render.layout_cache import layout_dots_start, svg_or_error
from analysis.render.view_model import graph_views, variant_specs

NAME_DIGITS = 4  # a name's number (``fusion.7``, ``add.1234``) is laid out as this many digits at least
_TO_ZERO = str.maketrans("123456789", "0" * 9)
_SHORT_NAME_NUMBER = re.compile(r"\.0{1,%d}(?!0)" % (NAME_DIGITS - 1))


def zeroed(text: str) -> str:
    """ASCII digits as zeros: a name's number (after a dot) at least ``NAME_DIGITS`` wide, so
    that the same layer with other numbers in its names (XLA numbers them across the module) is
    one layout; the box is then at most a few digits wider than its label. (By a table and one
    fixed replacement: a function called per number was half of this in a 96-layer program,
    docs/performance.md. Other scripts' digits stay as they are: such a layer is laid out on its
    own, to its exact labels.)"""
    return _SHORT_NAME_NUMBER.sub("." + "0" * NAME_DIGITS, text.translate(_TO_ZERO))


def _lines(label: str) -> list[str]:
    """A label's lines as Graphviz draws them (one ``<text>`` each; an empty line draws none)."""
    return [ln for ln in label.split("\n") if ln.strip()]


def canonical(spec: GraphSpec) -> tuple[str, dict]:
    """``canonical_spec``'s DOT text and names."""
    make, _, names = canonical_spec(spec)
    return make().to_dot(), names


def canonical_spec(spec: GraphSpec) -> tuple:
    """(a maker of ``spec`` up to names, a key equal for two specs exactly when those are, what
    makes the template this graph again): ids ``n0, n1, ...`` (nodes) and ``c0, ...``
    (clusters) in the spec's order, labels with their digits zeroed, no tooltips; the names
    list, in that order (the first ``nodes`` of them nodes), the real ``ids``, the label
    ``lines`` and the tooltips (``tips``). The key is made of the fields the DOT is made of, so
    a layer like one before costs no copy and no DOT (most of the time of 96 layers)."""
    ids = {nid: f"n{i}" for i, nid in enumerate(spec.nodes)}
    ids.update({cid: f"c{i}" for i, cid in enumerate(spec.clusters)})
    nodes = [(ids[n.id], zeroed(n.label), ids.get(n.cluster) if n.cluster else None, _NODE_REST(n))
             for n in spec.nodes.values()]
    clusters = [(ids[c.id], zeroed(c.label), ids.get(c.parent) if c.parent else None, _CLUSTER_REST(c))
                for c in spec.clusters.values()]
    edges = [(ids.get(e.src, e.src), ids.get(e.dst, e.dst), ids.get(e.lhead) if e.lhead else None, _EDGE_REST(e))
             for e in spec.edges]
    key = (spec.color_by, tuple(nodes), tuple(clusters), tuple(edges))

    def make() -> GraphSpec:
        canon = GraphSpec(spec.title, collapsed=list(spec.collapsed), color_by=spec.color_by)
        for (cid, label, parent, _), c in zip(clusters, spec.clusters.values()):
            canon.clusters[cid] = _renamed(c, id=cid, label=label, tooltip="-", parent=parent)
        for (nid, label, cluster, _), n in zip(nodes, spec.nodes.values()):
            canon.nodes[nid] = _renamed(n, id=nid, label=label, tooltip="-", cluster=cluster)
        canon.edges = [_renamed(e, src=a, dst=b, lhead=h) for (a, b, h, _), e in zip(edges, spec.edges)]
        return canon
    names = {"nodes": len(spec.nodes), "ids": list(spec.nodes) + list(spec.clusters),
             "lines": [_lines(n.label) for n in spec.nodes.values()]
             + [_lines(wrap_title(c.label)) for c in spec.clusters.values()],
             "tips": [n.tooltip or n.label for n in spec.nodes.values()]
             + [c.tooltip or c.label for c in spec.clusters.values()]}
    return make, key, names


_ZERO_RUN = re.compile("0+")


def merged(forms: dict[tuple, list]) -> list[tuple]:
    """The layouts to make for the canonical forms of a side's layers: ``[(maker, [layer ids])]``.
    Forms that differ only in how many digits their labels' numbers have (``layer9`` next to
    ``layer10``, ``add.1234`` next to ``add.98765``: the same graph, its boxes a digit wider)
    are one layout, each number laid out as wide as its widest: a 96-layer stack has 13
    forms, 7 layouts (docs/performance.md)."""
    groups: dict[tuple, list] = {}
    for key, (make, lids) in forms.items():
        color_by, nodes, clusters, edges = key
        labels = [n[1] for n in nodes] + [c[1] for c in clusters]
        shape = (color_by, tuple((n[0], _ZERO_RUN.sub("0", n[1]), *n[2:]) for n in nodes),
                 tuple((c[0], _ZERO_RUN.sub("0", c[1]), *c[2:]) for c in clusters), edges)
        widths = [len(r) for label in labels for r in _ZERO_RUN.findall(label)]
        groups.setdefault(shape, []).append((make, lids, widths))
    out = []
    for members in groups.values():
        make = members[0][0]
        widest = [max(w) for w in zip(*(m[2] for m in members))]
        lids = [lid for m in members for lid in m[1]]
        out.append((make if len(members) == 1 else _widened(make, widest), lids))
    return out


def _widened(make, widths: list[int]):
    """``make``'s graph with the digit runs of its labels (in node, then cluster order) as wide
    as ``widths`` says."""
    def makes() -> GraphSpec:
        spec = make()
        it = iter(widths)
        pad = lambda m: "0" * next(it)  # noqa: E731 - one run after another, in order
        for n in spec.nodes.values():
            n.label = _ZERO_RUN.sub(pad, n.label)
        for c in spec.clusters.values():
            c.label = _ZERO_RUN.sub(pad, c.label)
        return spec
    return makes


def _rest(cls, *renamed: str):
    """The fields of ``cls`` other than ``renamed``, read in one call."""
    return operator.attrgetter(*[f.name for f in dataclasses.fields(cls) if f.name not in renamed])


_NODE_REST = _rest(Node, "id", "label", "tooltip", "cluster")
_CLUSTER_REST = _rest(Cluster, "id", "label", "tooltip", "parent")
_EDGE_REST = _rest(Edge, "src", "dst", "lhead")


def _renamed(x, **fields):
    x = copy.copy(x)
    x.__dict__.update(fields)
    return x


def layered_graphs(bundle: Bundle) -> dict | None:
    """The report's layers: ``{"sides": {side: {"layers": GraphSpec, "svg": its SVG (or why
    not, as HTML), "templates": [SVG], "views": {layer id: [template index, names, title]}}},
    "maps": {order, names, op_box, kernel_box}}``; None when the program opens whole."""
    finish = layered_graphs_start(bundle)
    return finish() if finish is not None else None


# The layer graphs of the last few programs, by content: made on the draft beside the compile
# (``LayersAhead``), found by the bundle the compile then makes.
LAYER_GRAPHS = ContentCache(("before", "after", "decisions", "timings", "source"), size=4)


def layer_graphs(bundle: Bundle) -> dict | None:
    """Every graph of the report's layers as DOT, before layout: ``{"sides": {side: {"layers":
    GraphSpec, "dot", "templates": [DOT], "views"}}, "maps"}`` (None when the program opens
    whole); made once per content (``ContentCache``), so that made on a draft beside the
    compile (``LayersAhead``) the bundle takes it. Callers must not change it."""
    return LAYER_GRAPHS.get(bundle, lambda: _layer_graphs(bundle))


class LayersAhead(WorkAhead):
    """The report's layers while the program compiles: each layer's own graph before
    optimization, from the module before optimization alone while XLA optimizes
    (``layer_graph.prepare_before``); then on the draft bundle the layer graphs, and their
    layouts started: Graphviz's processes take the core this thread leaves once it is done, and
    the report finds them laid out (or being laid out) in the shared cache (docs/performance.md).
    The report's whole work ahead is ``report.ReportAhead``."""

    def before(self, module) -> None:
        prepare_before(module)

    def draft(self, bundle: Bundle) -> None:
        graphs = layer_graphs(bundle)
        if graphs is not None:
            layout_dots_start(_dots(graphs))


def _dots(graphs: dict) -> list[str]:
    """Every DOT text of the layers: each side's collapsed view and its layer templates."""
    return [d for s in graphs["sides"].values() for d in [s["dot"], *s["templates"]]]


def _layer_graphs(bundle: Bundle) -> dict | None:
    if not graph_views(bundle).as_layers:
        return None

    # the collapsed view exactly as the app builds it: one DOT text, so one layout in the shared cache
    collapsed = variant_specs(bundle, ["layers"])
    own = own_layer_specs(bundle)
    sides: dict[str, dict] = {}
    for side in ("pre", "post"):
        if "layers" not in collapsed.get(side, {}):
            continue
        spec = collapsed[side]["layers"]
        forms: dict[tuple, list] = {}  # a canonical form -> (its maker, [layer ids])
        views = {}
        for name, layer_spec in own.get(side, {}).items():
            make, key, names = canonical_spec(layer_spec)
            lid = "L:" + name.split(":", 1)[1]
            forms.setdefault(key, [make, []])[1].append(lid)
            views[lid] = [None, names, layer_spec.title]
        templates: list[str] = []  # DOT texts
        for makes, lids in merged(forms):
            for lid in lids:
                views[lid][0] = len(templates)
            templates.append(makes().to_dot())
        sides[side] = {"layers": spec, "dot": spec.to_dot(), "templates": templates, "views": views}
    maps = layer_maps(bundle)
    order = maps["order"]
    return {"sides": sides, "maps": {"order": order, "names": {lid: maps["boxes"][lid]["path"] for lid in order},
                                     "op_box": maps["op_box"], "kernel_box": maps["kernel_box"]}}


def layered_graphs_start(bundle: Bundle):
    """``layered_graphs``, started: every layout (the collapsed views, one per distinct layer
    graph) runs at once in Graphviz's processes, through the layout cache, while the caller
    goes on (the report builds its other sections); calling what this returns waits for them
    and gives the layers. None when the program opens whole."""
    graphs = layer_graphs(bundle)
    if graphs is None:
        return None
    done = layout_dots_start(_dots(graphs))  # (those ``ahead`` started are waited for, not made again)

    def finish() -> dict:
        try:
            done()
        except RuntimeError:
            pass  # each graph that failed says why in its pane (svg_or_error)
        sides = {side: {**s, "svg": svg_or_error(s["dot"]), "templates": [svg_or_error(d) for d in s["templates"]]}
                 for side, s in graphs["sides"].items()}
        return {"sides": sides, "maps": graphs["maps"]}
    return finish


# ----------------------------------------------------------------------------- the page


def prefixed_svg(svg: str, prefix: str) -> str:
    """Graphviz's SVG with its element ids prefixed (two graphs share one page), sized by its
    pane (CSS; the viewBox stays, for pan and zoom)."""
    svg = re.sub(r'\bid="([^"]*)"', lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = re.sub(r'(xlink:href|href)="#([^"]*)"', lambda m: f'{m.group(1)}="#{prefix}-{m.group(2)}"', svg)
    svg = re.sub(r'^<svg([^>]*?)\swidth="[^"]*"', r"<svg\1", svg, count=1)
    return re.sub(r'^<svg([^>]*?)\sheight="[^"]*"', r"<svg\1", svg, count=1)


def page_data(lay: dict) -> str:
    """What the page's script gets (``xe-layers``): the layers' order and names, which box an
    op or a kernel is in, and per side the templates and each layer's names; as JSON deflated
    (zlib) in base64, which the page inflates with the browser's own ``DecompressionStream``:
    names and SVG repeat from layer to layer, and at 96 layers this is 6.5 MB of JSON
    (docs/performance.md)."""
    import base64
    import json
    import zlib

    data = {**lay["maps"], "sides": {side: {"templates": s["templates"], "views": s["views"]}
                                     for side, s in lay["sides"].items()}}
    return base64.b64encode(zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 1)).decode("ascii")


def layer_bar(lay: dict, esc) -> str:
    """The bar above the two graphs: which layer is open (a list of them all) and the way back."""
    opts = "".join(f"<option value='{esc(lid)}'>{esc(name)}</option>" for lid, name in lay["maps"]["names"].items())
    return ("<div class='layerbar'><label>Layer <select id='xe-layer'><option value=''>all layers, collapsed</option>"
            f"{opts}</select></label> <button id='xe-all-layers' disabled>← all layers</button> "
            f"<span class='muted small'>{len(lay['maps']['order'])} layers: double-click one (or pick it here) to "
            "open it, its ops before optimization and its kernels after; click a box to find it on the other side."
            "</span></div>")
