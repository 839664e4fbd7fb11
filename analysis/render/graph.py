"""The graph model every graph view shares, ``GraphSpec`` (nodes, edges, clusters), and its DOT
text (laid out by Graphviz, ``analysis.render.graphviz_runner``) for the app and the HTML report.

The graphs of a module are built in ``analysis.render.module_graphs`` (before optimization:
ops grouped by name scope; after: kernels, fusions as clusters), those of its layers in
``analysis.render.layer_graph``. Conventions every view shares:
- kernels are filled with their route's colour (analysis.program.kernels.ROUTE_COLORS), library calls
  are labelled with the library, Triton kernels with their tiles;
- a fusion is a cluster holding its fused instructions, or one box when collapsed;
- edges carry the value's shape and layout (``f32[128,512]{1,0}``); values whose layout is not
  the default row-major order, and layout kernels (copy/transpose), are drawn dashed in red;
- pre-optimization ops are grouped by name scope (``layer3/attention``) into clusters;
- node ids are ``op:NAME`` (pre) and ``k:NAME`` (post) so a click in the SVG names the node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.program.kernels import ROUTE_COLORS
from analysis.render.graphviz_runner import render_svg

LAYOUT_MARK = "#D62728"
HIGHLIGHT = "#FF7F0E"
DIM_FONT = "#9A9A9A"
BOUNDED_LAYOUT = 600  # nodes above which Graphviz's searches are bounded (GraphSpec.to_dot)
MAX_LABELLED_EDGES = 160  # above this many edges, shapes move from edge labels to tooltips
# Font sizes in points (1 pt = 4/3 px at natural size). A viewer that opens a graph at no less
# than 14/12 px per point shows every label at 14 px or more (presentation mode does).
FONT = 14  # nodes and cluster titles
SMALL_FONT = 13  # fused instructions inside a fusion, plumbing
EDGE_FONT = 12  # shapes on edges
MARK_FONT = 18  # the ✕ / ? at the head of an edge across a kernel boundary: bigger than a label
REFUSED_MARK = "#c0392b"  # an edge XLA refused to fuse across
TITLE_WIDTH = 34  # cluster titles wrap at this many characters (the full text is the tooltip)
# Presentation mode (a projector) draws a graph denser, so that a small program's graphs fit
# their pane with every label at 14 px or more (``GraphSpec.to_dot(present=True)``): every
# text at one size, no edge labels (a value's shape is in the edge's tooltip and the details),
# one line per op or parameter (its shape moves to the tooltip), tighter spacing, and a deep
# graph folded into columns or rows (``fold``) to take the pane's shape. The viewer opens it at
# no less than 14/12 px per point, as every graph in presentation mode.
PRESENT_FONT = EDGE_FONT
PRESENT_MARK_FONT = 15
PRESENT_TITLE_WIDTH = 26


@dataclass
class Node:
    id: str
    label: str
    kind: str  # "kernel" | "op" | "param" | "const" | "plumbing" | "fused" | "scope" | "layer"
    route: str | None = None
    tooltip: str = ""
    cluster: str | None = None
    layout_change: bool = False
    highlighted: bool = False
    dimmed: bool = False
    selected: bool = False
    time_share: float | None = None


@dataclass
class Edge:
    src: str
    dst: str
    label: str = ""
    layout_mark: bool = False
    lhead: str | None = None  # clip the arrow at this cluster's border
    note: str = ""  # why XLA did (not) fuse across this edge (analysis.fusion.decisions.edge_notes)


@dataclass
class Cluster:
    id: str
    label: str
    parent: str | None = None
    route: str | None = None
    highlighted: bool = False
    selected: bool = False
    tooltip: str = ""


@dataclass
class GraphSpec:
    title: str
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    clusters: dict[str, Cluster] = field(default_factory=dict)
    collapsed: list[str] = field(default_factory=list)  # what was folded, for the UI to say
    color_by: str = "route"  # kernels filled by "route" or by share of the step ("time")

    @property
    def max_share(self) -> float:
        return max((n.time_share or 0 for n in self.nodes.values()), default=0.0)

    # -- renderers --------------------------------------------------------------------------

    def to_dot(self, rankdir: str = "TB", edge_labels: bool | None = None, present: bool = False,
               fold: int = 1) -> str:
        """DOT text. Edge labels (shape and layout) are drawn when the graph is small enough for
        them to stay readable and cheap to lay out (each label is a node for Graphviz); always
        in the edge's tooltip. ``present``: drawn for presentation mode (``PRESENT_FONT``: one
        text size, no edge labels, short labels, tight spacing); ``fold``: the graph's ranks cut
        into that many bands laid side by side (columns when ``rankdir`` is TB, rows when LR),
        so a deep graph takes a wide pane's shape; the edges between bands do not rank their
        nodes (``fold_bands``)."""
        if edge_labels is None:
            edge_labels = len(self.edges) <= MAX_LABELLED_EDGES and not present
        band = fold_bands(self, fold) if fold > 1 else {}
        self.__dict__["_top"] = self.max_share
        # A big graph bounds Graphviz's two costly searches (network simplex for the ranks and x
        # positions, crossing reduction): much less time on a big program's layers view
        # (docs/performance.md); small graphs keep the full search.
        bounded = ", nslimit=2, nslimit1=2, mclimit=0.3" if len(self.nodes) > BOUNDED_LAYOUT else ""
        font, sep, pad, margin, height = (PRESENT_FONT, "nodesep=0.1, ranksep=0.15", 0.06, "0.05,0.01", 0.2) \
            if present else (FONT, "nodesep=0.25, ranksep=0.35", 0.2, "0.08,0.04", 0.3)
        out = [
            "digraph G {",
            f'  graph [rankdir={rankdir}, fontname="DejaVu Sans", fontsize={font}, {sep},'
            f' bgcolor="white", pad={pad}, compound=true{bounded}];',
            f'  node [fontname="DejaVu Sans", fontsize={font}, shape=box, style="rounded,filled", fillcolor="#FFFFFF",'
            f' color="#555555", margin="{margin}", height={height}];',
            f'  edge [fontname="DejaVu Sans Mono", fontsize={EDGE_FONT}, color="#777777", arrowsize=0.6,'
            ' fontcolor="#555555"];',
        ]
        children: dict[str | None, list[str]] = {}
        for c in self.clusters.values():
            children.setdefault(c.parent, []).append(c.id)
        members: dict[str | None, list[Node]] = {}
        for n in self.nodes.values():
            members.setdefault(n.cluster, []).append(n)

        def emit_cluster(cid: str, indent: str) -> None:
            c = self.clusters[cid]
            color = ROUTE_COLORS.get(c.route or "", "#888888")
            pen = "3" if (c.selected or c.highlighted) else "1.5"
            border = HIGHLIGHT if (c.selected or c.highlighted) else color
            out.append(f'{indent}subgraph "cluster_{_esc(cid)}" {{')
            title = wrap_title(c.label, PRESENT_TITLE_WIDTH if present else TITLE_WIDTH)
            out.append(f'{indent}  id="{_esc(cid)}"; label="{_esc(title)}"; labeljust=l;'
                       f' fontsize={font}; tooltip="{_esc(c.tooltip or c.label)}";'
                       f' style="rounded,filled"; fillcolor="{_tint(color)}"; color="{border}"; penwidth={pen};')
            for sub in children.get(cid, []):
                emit_cluster(sub, indent + "  ")
            for n in members.get(cid, []):
                out.append(indent + "  " + self._node_dot(n, present))
            out.append(indent + "}")

        for cid in children.get(None, []):
            emit_cluster(cid, "  ")
        for n in members.get(None, []):
            out.append("  " + self._node_dot(n, present))
        drawn: set[tuple[str, str]] = set()
        for e in self.edges:
            if (e.src, e.dst) in drawn:  # one arrow per pair of nodes (collapsed groups repeat them)
                continue
            drawn.add((e.src, e.dst))
            attrs = []
            if e.label:
                # edges of a collapsed group stand for many values: their shapes go to the tooltip
                grouped = e.src.startswith("s:") or e.dst.startswith("s:")
                attrs.append(f'{"label" if edge_labels and not grouped else "tooltip"}="{_esc(e.label)}"')
            if e.lhead:
                attrs.append(f'lhead="cluster_{_esc(e.lhead)}"')
            if band and band.get(e.src, 0) != band.get(e.dst, 0):
                attrs.append("constraint=false")
            if e.layout_mark:
                attrs.append(f'color="{LAYOUT_MARK}", style=dashed, penwidth=1.6, fontcolor="{LAYOUT_MARK}"')
            if e.note:  # crosses a kernel boundary: XLA's reason in the tooltip, a marker at the head
                attrs.append(f'tooltip="{_esc(e.note)}", edgetooltip="{_esc(e.note)}"')
                refused = "not fused" in e.note
                # the mark is as big as a node's label (a class reads it from the back row) and the
                # frame opens XLA's reason, explained, when it is clicked (analysis/render/assets/graph_view.js)
                attrs.append(f'headlabel="{"✕" if refused else "?"}", labelfontsize={PRESENT_MARK_FONT if present else MARK_FONT},'
                             f' labeldistance={1.3 if present else 1.6}, '
                             f'labelfontname="DejaVu Sans Bold", labelfontcolor="{REFUSED_MARK if refused else "#888888"}"'
                             + (f', color="{REFUSED_MARK}", penwidth=1.4' if refused and not e.layout_mark else ""))
            out.append(f'  "{_esc(e.src)}" -> "{_esc(e.dst)}"' + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
        if band:
            # the bands in reading order: a row of invisible anchors, one per band, each above
            # the nodes its band starts with (an anchor's order in a rank is kept)
            fed = {e.dst for e in self.edges if band.get(e.src) == band.get(e.dst) and e.src != e.dst}
            bands = sorted(set(band.values()))
            out.append("  { rank=same; " + " ".join(f'"band:{i}" [shape=point, width=0, height=0, style=invis, label=""];'
                                                      for i in bands) + " }")
            for a, b in zip(bands, bands[1:]):
                out.append(f'  "band:{a}" -> "band:{b}" [style=invis];')
            for nid, i in band.items():
                if nid not in fed:
                    out.append(f'  "band:{i}" -> "{_esc(nid)}" [style=invis];')
        out.append("}")
        return "\n".join(out)

    def _node_dot(self, n: Node, present: bool = False) -> str:
        a = {"id": n.id, "label": n.label, "tooltip": n.tooltip or n.label}
        if present:
            short = present_label(n)
            if short != n.label:  # what the label leaves out (an op's shape) stays in the tooltip
                a.update(label=short, tooltip=(n.tooltip or n.label) + "\n" + n.label.replace("\n", " · "))
        if n.kind == "kernel":
            color = ROUTE_COLORS.get(n.route or "", "#DDDDDD")
            a["fillcolor"] = color
            a["fontcolor"] = "white" if n.route in ("library", "triton", "emitter") else "black"
            a["penwidth"] = "1.2"
            top = self.__dict__.get("_top", None)
            if top is None:
                top = self.__dict__["_top"] = self.max_share
            if self.color_by in ("time", "memory"):  # memory: share of the most temporary bytes
                # by share of the step: a white -> red scale; the route stays as the border
                a["fillcolor"] = time_color(n.time_share, top)
                a["color"] = color
                a["penwidth"] = "2.4"
                a["fontcolor"] = "white" if (n.time_share or 0) > 0.6 * (top or 1) else "black"
            elif n.time_share is not None and top:
                # measured: the kernels that take most of the step are drawn in full colour,
                # the rest paler in proportion (the label says the share in numbers)
                weight = (n.time_share / top) ** 0.5
                a["fillcolor"] = _tint(color, 0.75 * (1 - weight))
                if weight < 0.55:
                    a["fontcolor"] = "black"
        elif n.kind == "param":
            a.update(shape="ellipse", style="filled", fillcolor="#EEEEEE")
        elif n.kind == "const":
            a.update(shape="plain", style="", fontcolor="#777777")
        elif n.kind == "plumbing":
            a.update(shape="box", style="rounded,dashed", fontcolor="#666666", color="#AAAAAA",
                     fontsize=str(PRESENT_FONT if present else SMALL_FONT))
        elif n.kind == "fused":
            a.update(fillcolor="#FFFFFF", fontsize=str(PRESENT_FONT if present else SMALL_FONT),
                     height="0.2" if present else "0.25")
        elif n.kind == "scope":
            a.update(shape="folder", fillcolor="#F3F0E6")
        elif n.kind == "layer":  # a model layer collapsed to one box (analysis.render.layer_graph)
            a.update(shape="box", style="rounded,filled,bold", fillcolor="#EAF0F8", color="#4C6A92", penwidth="2")
        if n.layout_change:
            a["color"] = LAYOUT_MARK
            a["penwidth"] = "2.2"
            a["style"] = a.get("style", "rounded,filled") + ",dashed"
        if n.highlighted or n.selected:
            a["color"] = HIGHLIGHT
            a["penwidth"] = "4" if n.selected else "3"
        if n.dimmed:
            a["fontcolor"] = DIM_FONT
            if n.kind == "kernel":
                a["fillcolor"] = _tint(ROUTE_COLORS.get(n.route or "", "#DDDDDD"))
        body = ", ".join(f'{k}="{_esc(v)}"' for k, v in a.items())
        return f'"{_esc(n.id)}" [{body}];'

    def to_svg(self, rankdir: str = "TB", timeout: float = 60.0) -> str:
        return render_svg(self.to_dot(rankdir), timeout)

    def neighbourhood(self, center: str, hops: int = 2) -> "GraphSpec":
        """The subgraph within ``hops`` edges of ``center`` (a node id or cluster id)."""
        ids = {center}
        if center in self.clusters:
            ids |= {n.id for n in self.nodes.values() if n.cluster == center}
        adj: dict[str, set[str]] = {}
        for e in self.edges:
            adj.setdefault(e.src, set()).add(e.dst)
            adj.setdefault(e.dst, set()).add(e.src)
        frontier = set(ids)
        for _ in range(hops):
            frontier = {m for n in frontier for m in adj.get(n, ())} - ids
            ids |= frontier
        keep_nodes = {k: v for k, v in self.nodes.items() if k in ids}
        used = {n.cluster for n in keep_nodes.values() if n.cluster}
        # keep the cluster chain of every kept node
        for cid in list(used):
            p = self.clusters[cid].parent if cid in self.clusters else None
            while p:
                used.add(p)
                p = self.clusters[p].parent
        g = GraphSpec(self.title + f" (around {center})", keep_nodes,
                      [e for e in self.edges if e.src in ids and e.dst in ids],
                      {k: v for k, v in self.clusters.items() if k in used})
        return g


def present_label(n: Node) -> str:
    """A node's label in presentation mode: an op, a parameter or a fusion's output by its first
    line (its opcode, its name), without the shape under it; the rest as they are."""
    if n.kind in ("op", "param") or (n.kind == "kernel" and n.cluster):
        return n.label.split("\n", 1)[0]
    return n.label


def fold_bands(spec: GraphSpec, fold: int) -> dict[str, int]:
    """Each node's band when ``spec`` is cut into ``fold`` bands of about as many ranks each. A
    cut never goes through a cluster (a fusion, a name scope): each outermost cluster is one
    unit as tall as the longest path inside it (and its title), a node outside clusters a unit
    one rank tall; a unit starts below the units that feed it, and the cuts are made where no
    unit spans, nearest an even share of the whole height."""
    def outermost(cid: str | None) -> str | None:
        while cid is not None and cid in spec.clusters and spec.clusters[cid].parent:
            cid = spec.clusters[cid].parent
        return cid

    unit = {n.id: outermost(n.cluster) or n.id for n in spec.nodes.values()}
    inside = {u: [n for n, v in unit.items() if v == u] for u in set(unit.values())}
    between: dict[str, set[str]] = {}
    within: dict[str, list[str]] = {}
    for e in spec.edges:
        if e.src not in unit or e.dst not in unit or e.src == e.dst:
            continue
        if unit[e.src] == unit[e.dst]:
            within.setdefault(e.src, []).append(e.dst)
        else:
            between.setdefault(unit[e.src], set()).add(unit[e.dst])
    height = {u: _longest_path(members, within) + (1 if u in spec.clusters else 0) for u, members in inside.items()}
    start = _longest_path(list(inside), between, height, starts=True)
    total = max((start[u] + height[u] for u in inside), default=1)
    allowed = [c for c in range(1, total) if not any(start[u] < c < start[u] + height[u] for u in inside)]
    cuts: list[int] = []
    for i in range(1, max(fold, 1)):
        free = [c for c in allowed if not cuts or c > cuts[-1]]
        if free:
            cuts.append(min(free, key=lambda c: abs(c - i * total / fold)))
    return {n: sum(1 for c in cuts if start[u] >= c) for n, u in unit.items()}


def _longest_path(nodes: list[str], succ: dict, height: dict | None = None, starts: bool = False):
    """Over the DAG ``succ`` restricted to ``nodes`` (each ``height`` tall, 1 without): each
    node's start (the tallest path above it) with ``starts``, else the tallest path's height."""
    keep = set(nodes)
    indeg = {n: 0 for n in nodes}
    for n in nodes:
        for m in succ.get(n, ()):
            if m in keep:
                indeg[m] += 1
    start = {n: 0 for n in nodes}
    todo = [n for n in nodes if indeg[n] == 0]
    while todo:  # Kahn's order: a node is placed once every edge into it is
        n = todo.pop()
        for m in succ.get(n, ()):
            if m in keep:
                start[m] = max(start[m], start[n] + (height or {}).get(n, 1))
                indeg[m] -= 1
                if indeg[m] == 0:
                    todo.append(m)
    if starts:
        return start
    return max((start[n] + (height or {}).get(n, 1) for n in nodes), default=0)


def wrap_title(text: str, width: int = TITLE_WIDTH) -> str:
    """A cluster title that fits its box: `` · ``-separated parts packed into lines of at most
    ``width`` characters, a part longer than that shortened in the middle (``…``)."""
    lines: list[str] = []
    for raw in text.split("\n"):
        cur = ""
        for part in raw.split(" · "):
            if len(part) > width:
                part = part[: width // 2 - 1] + "…" + part[-(width - width // 2):]
            if cur and len(cur) + 3 + len(part) > width:
                lines.append(cur)
                cur = part
            else:
                cur = f"{cur} · {part}" if cur else part
        lines.append(cur)
    return "\n".join(lines)


# Share of the step time as a colour (white -> yellow -> red), for colouring kernels by time.
TIME_SCALE = ("#FFFFFF", "#FFF3B0", "#FDC46A", "#F4833D", "#D7301F", "#8C0D0D")


def time_color(share: float | None, top: float | None = 1.0) -> str:
    """The colour of a kernel that takes ``share`` of the step (relative to ``top``, the largest)."""
    if share is None or not top:
        return "#EEEEEE"
    x = max(0.0, min(1.0, share / top))
    i = min(int(x * (len(TIME_SCALE) - 1)), len(TIME_SCALE) - 2)
    f = x * (len(TIME_SCALE) - 1) - i
    a, b = (tuple(int(c.lstrip("#")[j:j + 2], 16) for j in (0, 2, 4)) for c in TIME_SCALE[i:i + 2])
    return "#" + "".join(f"{round(p + (q - p) * f):02X}" for p, q in zip(a, b))


def _esc(s: str) -> str:
    return str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _tint(hex_color: str, amount: float = 0.82) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    r, g, b = (int(c + (255 - c) * amount) for c in (r, g, b))
    return f"#{r:02X}{g:02X}{b:02X}"
