"""The graphs of an HLO module as ``GraphSpec``s: ``pre_graph``, the module before optimization
(one node per op, grouped by name scope, nested jits' calls inlined as XLA will), and
``post_graph``, the optimized module (one node per kernel, a fusion as a cluster of its fused
instructions or one box, library calls and Triton tiles in the labels, timings and memory as
colours). Both can draw groups of ops or kernels as one box each (the layers view,
``analysis.render.layer_graph``), and both leave out what would only cost Graphviz time and
show lines: the edges of a node that feeds a whole stack, parameters only hidden ops read."""

from __future__ import annotations

import functools
import re

from analysis.hlo import Computation, Instruction, Module
from analysis.hlo.shape import parse_shape
from analysis.program.kernels import NO_KERNEL, Kernel, tile_text
from analysis.render.graph import Cluster, Edge, GraphSpec, Node
from analysis.devices.sharding import sharding_of
from analysis.program.links import op_count
from analysis.devices.collectives import collectives, module_devices

MAX_FUSED_EXPANDED = 14  # fusions with more fused ops start collapsed
LARGE_GRAPH = 150  # above this many nodes, name scopes start collapsed
# the most nested scope groups drawn (a group per scope: 3,000 of them ended the report in a
# RecursionError, and are past what Graphviz lays out); an op deeper is drawn in the deepest
MAX_SCOPE_DEPTH = 48
HIDDEN = ("",)  # what ``groups`` gives for an instruction not to draw at all (see pre_graph)


# ----------------------------------------------------------------------------- helpers


def short_shape(shape_text: str, limit: int = 48) -> str:
    s = shape_text
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s


def layout_is_default(inst: Instruction) -> bool:
    """True if every array leaf has no layout or the default row-major (descending) layout."""
    return _default_layout(inst.shape_text)


@functools.lru_cache(maxsize=1 << 12)  # asked for every edge drawn, of a few shapes
def _default_layout(shape_text: str) -> bool:
    try:
        leaves = parse_shape(shape_text).leaves()
    except Exception:  # noqa: BLE001 - unparseable shapes are not marked
        return True
    for s in leaves:
        if s.layout is None or s.rank < 2:
            continue
        if s.layout.minor_to_major != tuple(range(s.rank - 1, -1, -1)):
            return False
    return True


@functools.lru_cache(maxsize=1 << 16)  # the same op_names come back for every view laid out
def scope_of(op_name: str) -> str:
    """``jit(model)/attention/jit(softmax)/exp`` -> ``attention/softmax``."""
    parts = op_name.split("/")
    if len(parts) <= 1:
        return ""
    parts = parts[1:-1][:MAX_SCOPE_DEPTH]  # drop the outer jit(...) and the op itself; deeper scopes: the deepest kept
    clean = []
    for p in parts:
        m = re.fullmatch(r"(?:jit|pjit|transpose|jvp|vmap)\((.*)\)", p)
        clean.append(m.group(1) if m else p)
    return "/".join(p for p in clean if p)


def _pretty_op(inst: Instruction) -> str:
    op = inst.opcode
    if op == "custom-call":
        return inst.custom_call_target or op
    return op


# ----------------------------------------------------------------------------- post graph


def kernel_label(k: Kernel, timing=None, n_ops: int | None = None, collective=None) -> str:
    """``name``, what runs it, (measured time and share: ``timing``, its
    ``analysis.measures.KernelTime``, time = share x step). ``n_ops``: how many ops of the program
    the kernel does (``analysis.program.links.op_count``); without it, the fused instruction count.
    ``collective`` (``analysis.devices.collectives.Collective``): its devices in words and the bytes each
    device moves, an estimate under the ring algorithms."""
    head = k.name
    if k.route == "library":
        what = k.library or "library"
        body = f"{what} · {k.custom_call_target or k.fusion_kind or k.opcode}"
        if k.epilogue and k.opcode != "fusion":  # the ops a call absorbed: cuBLASLt's bias + ReLU, cuDNN's
            body += f"\n+ {' + '.join(k.epilogue)} epilogue"  # (a library's fusion draws its ops inside it)
    elif k.route == "triton":
        tiles = tile_text(k.triton_config)
        body = "Triton" + (f" · {tiles}" if tiles else "") + (f" · {k.fusion_kind}" if k.fusion_kind else "")
    elif k.route == "emitter":
        n = len(k.fused_opcodes) if n_ops is None else n_ops
        body = (f"{k.fusion_kind} fusion · {n} ops" if k.opcode == "fusion" else k.opcode)
    elif k.route == "layout":
        body = "layout · " + (k.opcode if k.opcode != "fusion" else "copy/transpose fusion")
    elif collective is not None:
        from analysis.render.format import human_bytes

        body = (f"{collective.kind}{' (async)' if collective.is_async else ''} · {collective.words()}\n"
                f"~{human_bytes(collective.sent_bytes)} sent and received per device (ring estimate)")
    else:
        body = k.opcode
    label = f"{head}\n{body}"
    if timing is not None:
        from analysis.render.format import human_seconds

        share = timing.share
        label += f"\n{human_seconds(timing.time_s)} · {share:.0%}" if share >= 0.1 else \
            f"\n{human_seconds(timing.time_s)} · {share:.1%}"
        label += " of step"
    return label


def post_graph(module: Module, kernels: list[Kernel], *, selected: str | None = None,
               highlight: set[str] | None = None, expand: set[str] | None = None,
               collapse: set[str] | None = None, collapse_all: bool | None = None, timings: dict | None = None,
               computation: str | None = None, provenance=None, color_by: str = "route",
               temp_bytes: dict[str, int] | None = None,
               groups: dict[str, tuple[str, str, str]] | None = None, instructions=None) -> GraphSpec:
    """The optimized module's entry (or ``computation``) as kernels; fusions as clusters.

    ``timings``: the measured kernels by name (``analysis.measures.kernel_times``), each label's
    time and share. ``provenance``: kernels say how many ops of the program they do (``analysis.program.links``).
    ``color_by="time"``: kernels are filled by their share of the step (``time_color``), the
    route stays as the border. The biggest multi-op fusion (``teaching_fusion``) starts
    expanded whatever its size, unless ``collapse`` names it. ``groups`` (kernel name -> (node
    id, label, tooltip)) draws those kernels as one box per node id (the layers view); a kernel
    mapped to ``HIDDEN`` is left out, with the parameters only such kernels read.
    ``instructions``: draw only these of the computation's instructions (one layer's)."""
    comp = module.by_name[computation] if computation else module.entry
    by_name = {k.name: k for k in kernels}
    highlight = highlight or set()
    expand = set(expand or ())
    collapse = collapse or set()
    if collapse_all is not True:
        teach = teaching_fusion(kernels, comp.name)
        if teach:
            expand.add(teach)
    def nops(k: Kernel) -> int | None:
        return op_count(provenance, k) if provenance is not None else None

    n_dev = module_devices(module)
    # after the SPMD partitioner every shape is one device's
    g = GraphSpec(f"after optimization: {comp.name}" + (f" (one of {n_dev} devices)" if n_dev > 1 else ""))
    g.color_by = color_by

    coll = {c.name: c for c in collectives(module)} if any(k.route == "collective" for k in kernels) else {}
    n_fused = sum(len(k.fused_ops) for k in kernels if k.computation == comp.name)
    big = n_fused + len(comp.instructions) > LARGE_GRAPH if collapse_all is None else collapse_all
    producers: dict[str, str] = {}  # instruction name -> node id that produces its value
    gte_source: dict[str, str] = {}
    for inst in comp.instructions if instructions is None else instructions:
        k = by_name.get(inst.name) if inst.opcode not in NO_KERNEL else None
        tid = (timings or {}).get(inst.name)
        if inst.opcode == "parameter":
            producers[inst.name] = _param_node(g, inst, inst.name)
            continue
        if inst.opcode == "constant":
            if inst.shape.num_elements <= 1 and not inst.shape.is_tuple:
                producers[inst.name] = ""  # scalar constants are not drawn
                continue
            nid = f"c:{inst.name}"
            g.nodes[nid] = Node(nid, f"constant {short_shape(inst.shape_text, 30)}", "const")
            producers[inst.name] = nid
            continue
        if k is None:
            # plumbing (bitcast, tuple, gte, *-done): pass through to keep the graph readable
            # (an async pair is one kernel: its start; the done passes its result on)
            if (inst.opcode in ("get-tuple-element", "bitcast") or inst.opcode.endswith("-done")) and inst.operands:
                src = producers.get(inst.operands[0], "")
                producers[inst.name] = src
                gte_source[inst.name] = inst.operands[0]
                if not inst.is_root:
                    continue
            nid = f"k:{inst.name}"
            g.nodes[nid] = Node(nid, f"{inst.name}\n{inst.opcode}", "plumbing",
                                tooltip=f"{inst.opcode} (launches no kernel)")
            producers[inst.name] = nid
            _add_edges(g, comp, inst, nid, producers)
            continue
        grp = groups.get(inst.name) if groups else None
        if grp is HIDDEN:
            producers[inst.name] = ""
            continue
        if grp is not None:
            producers[inst.name] = _group_node(g, grp, inst.name in highlight)
            _add_edges(g, comp, inst, grp[0], producers)
            continue
        nid = f"k:{inst.name}"
        sel = selected in (inst.name, nid)
        if k.opcode == "fusion" and k.fused_ops and inst.name not in collapse and (
                inst.name in expand or (not big and len(k.fused_ops) <= MAX_FUSED_EXPANDED)):
            # expanded fusion: a cluster with its fused instructions, the kernel node as its output
            cid = f"f:{inst.name}"
            g.clusters[cid] = Cluster(cid, kernel_label(k, tid, nops(k), coll.get(k.name)).replace("\n", " · "), route=k.route,
                                      highlighted=inst.name in highlight, selected=sel,
                                      tooltip=kernel_label(k, tid, nops(k), coll.get(k.name)))
            fused_names = _draw_fused(g, module, inst, cid, highlight, selected)
            g.nodes[nid] = Node(nid, f"{inst.name}\n{short_shape(inst.shape_text)}", "kernel", k.route,
                                tooltip=kernel_label(k, tid, nops(k), coll.get(k.name)), cluster=cid,
                                layout_change=k.route == "layout", highlighted=inst.name in highlight,
                                selected=sel, time_share=tid.share if tid is not None else None)
            if fused_names:
                g.edges.append(Edge(fused_names[-1], nid))
                producers[inst.name] = nid
                _add_edges(g, comp, inst, fused_names[0], producers, lhead=cid)
                continue
        else:
            if k.opcode == "fusion" and k.fused_ops:
                g.collapsed.append(inst.name)
            g.nodes[nid] = Node(nid, kernel_label(k, tid, nops(k), coll.get(k.name)), "kernel", k.route,
                                tooltip=kernel_label(k, tid, nops(k), coll.get(k.name)) + f"\n{inst.shape_text}",
                                layout_change=k.route == "layout", highlighted=inst.name in highlight,
                                selected=sel, time_share=tid.share if tid is not None else None)
        producers[inst.name] = nid
        _add_edges(g, comp, inst, nid, producers)
    _draw_overlap(g, coll)
    if groups:
        g.edges = _dedupe_edges(g.edges)
        _drop_unread_params(g)
        _fold_params(g)
        _cut_hubs(g)
    _cut_fanout(g)
    if highlight or selected:
        for n in g.nodes.values():
            name = n.id.split(":", 1)[-1]
            if n.kind in ("kernel", "fused") and not n.highlighted and not n.selected and name not in highlight:
                n.dimmed = True
    if temp_bytes is not None:  # fill kernels by the temporary bytes they write (analysis.program.memory)
        g.color_by, top = "memory", max(temp_bytes.values(), default=0) or 1
        for n in g.nodes.values():
            if n.kind == "kernel":
                n.time_share = temp_bytes.get(n.id.split(":", 1)[-1], 0) / top
                n.tooltip += f"\nwrites {temp_bytes.get(n.id.split(':', 1)[-1], 0):,} B of temporaries"
    return g


def _draw_overlap(g: GraphSpec, coll: dict) -> None:
    """An async collective and the kernels XLA scheduled between its start and its done, drawn
    in one box: that compute runs while the data moves (the overlap is the lesson)."""
    for c in coll.values():
        between = [f"k:{n}" for n in c.overlapped or ()]
        nid = f"k:{c.name}"
        if not c.is_async or not between or nid not in g.nodes:
            continue
        inside = [x for x in between if x in g.nodes]
        if not inside:
            continue
        cid = f"a:{c.name}"
        g.clusters[cid] = Cluster(cid, f"{c.kind} overlaps {len(inside)} kernel{'s' if len(inside) != 1 else ''}",
                                  route="collective",
                                  tooltip=f"{c.name} ({c.kind}, async): XLA scheduled {len(inside)} kernels between its "
                                          "start and its done, so they compute while the data moves")
        for x in [nid] + inside:
            node = g.nodes[x]
            if node.cluster is None:
                node.cluster = cid
            elif node.cluster in g.clusters and g.clusters[node.cluster].parent is None:
                g.clusters[node.cluster].parent = cid  # an expanded fusion goes in whole


def teaching_fusion(kernels: list[Kernel], computation: str | None = None, limit: int = 40) -> str | None:
    """The fusion a lesson is about: the multi-op fusion with the most fused ops (at most
    ``limit``, so it stays drawable), first in program order on a tie."""
    best = None
    for k in kernels:
        if k.is_multi_op_fusion and (computation is None or k.computation == computation) \
                and len(k.fused_ops) <= limit and (best is None or len(k.fused_ops) > len(best.fused_ops)):
            best = k
    return best.name if best else None


def _draw_fused(g: GraphSpec, module: Module, inst: Instruction, cid: str, highlight, selected) -> list[str]:
    """Fused instructions as small nodes inside the cluster; returns their ids in order."""
    ids: list[str] = []
    for cname in inst.called_computations:
        fcomp = module.by_name.get(cname)
        if fcomp is None:
            continue
        local: dict[str, str] = {}
        for sub in fcomp.instructions:
            if sub.opcode == "parameter" or (sub.opcode == "constant" and sub.shape.num_elements <= 1):
                continue
            if sub.opcode == "bitcast" and sub.operands:
                local[sub.name] = local.get(sub.operands[0], "")
                continue
            nid = f"x:{sub.name}"
            label = _pretty_op(sub)
            if sub.opcode == "fusion":
                label = f"nested fusion\n{sub.fusion_kind or ''}"
            g.nodes[nid] = Node(nid, label, "fused", tooltip=f"{sub.name} = {sub.shape_text} {sub.opcode}",
                                cluster=cid, layout_change=sub.opcode in ("transpose", "copy"),
                                highlighted=sub.name in highlight, selected=selected == sub.name)
            for o in sub.operands:
                src = local.get(o)
                if src:
                    g.edges.append(Edge(src, nid))
            local[sub.name] = nid
            ids.append(nid)
    return ids


def _param_node(g: GraphSpec, inst: Instruction, label: str) -> str:
    nid = f"p:{inst.name}"
    g.nodes[nid] = Node(nid, f"{label}\n{short_shape(inst.shape_text)}", "param",
                        tooltip=f"parameter {inst.name}: {inst.shape_text}")
    return nid


def _add_edges(g: GraphSpec, comp: Computation, inst: Instruction, nid: str, producers: dict[str, str],
               lhead: str | None = None, sharded: bool = False) -> None:
    """Edges from the producers of ``inst``'s operands, labelled with their shapes (``sharded``:
    and, before optimization, the sharding a producer carries, in words: the global shape split
    as the SPMD partitioner will split it)."""
    seen = set()
    for o in inst.operands:
        src = producers.get(o)
        if not src or (src, nid) in seen:
            continue
        seen.add((src, nid))
        srci = comp.by_name.get(o)
        label = short_shape(srci.shape_text) if srci is not None else ""
        if sharded and srci is not None and "sharding" in srci.attributes:
            sh = sharding_of(srci)
            if sh is not None:
                label += " · " + sh.words(srci.shape.rank if not srci.shape.is_tuple else None)
        mark = srci is not None and not layout_is_default(srci)
        g.edges.append(Edge(src, nid, label, mark, lhead))


# ----------------------------------------------------------------------------- pre graph


def pre_graph(module: Module, *, selected: str | None = None, highlight: set[str] | None = None,
              collapse: bool | None = None, expand_scopes: set[str] | None = None,
              edge_notes: dict[tuple[str, str], str] | None = None,
              groups=None, insts=None) -> GraphSpec:
    """The module before optimization: one node per op, grouped by name scope. ``edge_notes``
    ((producer, consumer) op names -> a line) marks the edges that cross a kernel boundary and
    puts XLA's reason in their tooltip. ``groups(inst, scope)`` -> (node id, label, tooltip) or
    None draws the ops it names as one box per node id: the layers view
    (``analysis.render.layer_graph``); ``HIDDEN`` leaves the op out (and the parameters only
    such ops read). ``scope`` is the op's full name scope, nested jits' own prefixes included.
    ``insts``: draw only these of ``flat_entry``'s (instruction, scope) pairs (one layer's)."""
    comp = module.entry
    highlight = highlight or set()
    expand_scopes = expand_scopes or set()
    g = GraphSpec(f"before optimization: {comp.name}")
    insts = flat_entry(module) if insts is None else insts
    big = len(insts) > LARGE_GRAPH if collapse is None else collapse
    producers: dict[str, str] = {}
    for inst, scope in insts:
        if inst.opcode == "parameter" and inst.computation is comp:
            producers[inst.name] = _param_node(g, inst, inst.metadata.op_name or inst.name)
            continue
        if inst.opcode == "parameter":
            continue
        if inst.opcode == "constant" and inst.shape.num_elements <= 1:
            producers[inst.name] = ""
            continue
        if inst.opcode == "broadcast" and inst.operands and producers.get(inst.operands[0]) == "" \
                and not inst.is_root and inst.name not in highlight:
            producers[inst.name] = ""  # a scalar constant splatted to a shape: drawn as nothing, like the scalar
            continue
        if inst.opcode == "tuple" and inst.operands and not inst.is_root:  # a loop's state: what it carries
            producers[inst.name] = next((producers[o] for o in inst.operands if producers.get(o)), "")
            continue
        if inst.opcode in ("get-tuple-element", "bitcast") and inst.operands and not inst.is_root:
            producers[inst.name] = producers.get(inst.operands[0], "")
            continue
        grp = groups(inst, scope) if groups else None
        if grp is HIDDEN:
            producers[inst.name] = ""
            continue
        if grp is not None:
            producers[inst.name] = _group_node(g, grp, inst.name in highlight)
            _add_edges(g, inst.computation, inst, grp[0], producers, sharded=True)
            continue
        cid = _ensure_scope(g, scope) if scope else None
        if big and scope and not any(scope == s or scope.startswith(s + "/") for s in expand_scopes):
            top = scope.split("/")[0]
            sid = f"s:{top}"
            if sid not in g.nodes:
                g.nodes[sid] = Node(sid, f"{top}\n(scope, collapsed)", "scope", tooltip=f"name scope {top}")
                g.collapsed.append(top)
            n = g.nodes[sid]
            n.tooltip += f"\n{inst.name}"
            if inst.name in highlight:
                n.highlighted = True
            producers[inst.name] = sid
            _add_edges(g, inst.computation, inst, sid, producers, sharded=True)
            continue
        nid = f"op:{inst.name}"
        src = inst.metadata.source
        where = f"\nline {src.line}" if src is not None and src.line else ""
        g.nodes[nid] = Node(nid, f"{_pretty_op(inst)}\n{short_shape(inst.shape_text, 30)}", "op",
                            tooltip=f"{inst.name}: {inst.metadata.op_name}{where}", cluster=cid,
                            highlighted=inst.name in highlight, selected=selected in (inst.name, nid))
        producers[inst.name] = nid
        _add_edges(g, inst.computation, inst, nid, producers, sharded=True)
    # drop scope clusters left empty by collapsing
    used = {n.cluster for n in g.nodes.values() if n.cluster}
    for cid in list(g.clusters):
        p = g.clusters[cid].parent
        if cid in used:
            while p:
                used.add(p)
                p = g.clusters[p].parent
    g.clusters = {k: v for k, v in g.clusters.items() if k in used}
    g.edges = _dedupe_edges(g.edges) if groups else [e for e in g.edges if e.src != e.dst]
    if groups:
        _drop_unread_params(g)
        _fold_params(g)
        _cut_hubs(g)
    _cut_fanout(g)
    for e in g.edges if edge_notes else ():
        if e.src.startswith("op:") and e.dst.startswith("op:"):
            e.note = edge_notes.get((e.src[3:], e.dst[3:]), "")
    if highlight or selected:
        for n in g.nodes.values():
            if n.kind == "op" and not n.highlighted and not n.selected:
                n.dimmed = True
    return g


def _group_node(g: GraphSpec, grp: tuple[str, str, str], highlighted: bool) -> str:
    """The one box drawn for a group of ops or kernels (a layer); returns its id."""
    gid, label, tooltip = grp
    if gid not in g.nodes:
        g.nodes[gid] = Node(gid, label, "layer", tooltip=tooltip)
        g.collapsed.append(gid)
    if highlighted:
        g.nodes[gid].highlighted = True
    return gid


def _drop_unread_params(g: GraphSpec) -> None:
    """Parameters (and constants) no drawn node reads: what only left-out instructions read."""
    read = {e.src for e in g.edges}
    for nid in [n for n, node in g.nodes.items() if node.kind in ("param", "const") and n not in read]:
        del g.nodes[nid]


def _fold_params(g: GraphSpec) -> None:
    """In a graph of layer boxes, a parameter that feeds only one node (a layer box, or a kernel
    between layers) is drawn inside it (named in its tooltip): a stack of N layers would
    otherwise be N rows of weight ellipses around the few nodes that matter. So is one that
    feeds a layer box and the box that layer feeds (a bias of one layer's last add, which XLA
    copied into the next layer's first fusion): inside the first, named in both tooltips."""
    outs: dict[str, set[str]] = {}
    chain = set()
    for e in g.edges:
        if e.src.startswith("p:"):
            outs.setdefault(e.src, set()).add(e.dst)
        elif e.src.startswith("L:") and e.dst.startswith("L:"):
            chain.add((e.src, e.dst))
    folded, also = {}, {}
    for pid, dsts in outs.items():
        if len(dsts) == 1 and next(iter(dsts)).split(":", 1)[0] in ("L", "k") and next(iter(dsts)) in g.nodes:
            folded[pid] = next(iter(dsts))
        elif len(dsts) == 2:
            a, b = sorted(dsts)
            first, then = (a, b) if (a, b) in chain else (b, a) if (b, a) in chain else (None, None)
            if first is not None and first in g.nodes and then in g.nodes:
                folded[pid], also[pid] = first, then
    for pid, gid in folded.items():
        node = g.nodes[gid]
        pname = g.nodes[pid].label.splitlines()[0]
        node.tooltip = (node.tooltip or node.label) + f"\nparameter {pname}"
        if pid in also:
            node.tooltip += f" (also read by {also[pid][2:]})"
            other = g.nodes[also[pid]]
            other.tooltip = (other.tooltip or other.label) + f"\nparameter {pname} (drawn in {gid[2:]})"
        del g.nodes[pid]
    counts: dict[str, int] = {}
    for gid in folded.values():
        counts[gid] = counts.get(gid, 0) + 1
    for gid, n in counts.items():
        g.nodes[gid].label += f"\n+{n} parameter{'s' if n != 1 else ''}"
    g.edges = [e for e in g.edges if e.src not in folded]


HUB_FANOUT = 16  # a node feeding more nodes than this is drawn without those edges


def _cut_fanout(g: GraphSpec) -> None:
    """A node feeding many others (a broadcast XLA shares across a whole stack of layers) is
    drawn without its out-edges and says how many it feeds: those edges span the graph, show
    only lines, and cost Graphviz most of its time (docs/performance.md)."""
    outs: dict[str, set[str]] = {}
    for e in g.edges:
        outs.setdefault(e.src, set()).add(e.dst)
    hubs = _mark_hubs(g, outs, HUB_FANOUT, "feeds {n}", "feeds {n} nodes")
    if hubs:
        g.edges = [e for e in g.edges if e.src not in hubs]


def _mark_hubs(g: GraphSpec, joined: dict[str, set[str]], limit: int, label: str, tip: str) -> set[str]:
    """The nodes joined to more than ``limit`` others, each labelled ``label`` and told in its
    tooltip that those edges are not drawn (``{n}``: how many)."""
    hubs = {n for n, d in joined.items() if len(d) > limit and n in g.nodes}
    for n in hubs:
        node = g.nodes[n]
        node.label += "\n" + label.format(n=len(joined[n]))
        node.tooltip = (node.tooltip or node.label) + "\n" + tip.format(n=len(joined[n])) + " (those edges are not drawn)"
    return hubs


HUB_LAYERS = 6  # a node joined to more layer boxes than this is drawn without those edges


def _cut_hubs(g: GraphSpec) -> None:
    """A node joined to many layer boxes (a broadcast XLA shares between every layer of a stack,
    a weight they all read) is drawn without those edges, and says how many layers it joins:
    its edges span the whole stack, and laying them out took Graphviz far longer while
    showing nothing but lines (docs/performance.md)."""
    boxes: dict[str, set[str]] = {}
    for e in g.edges:
        for a, b in ((e.src, e.dst), (e.dst, e.src)):
            if b.startswith("L:") and not a.startswith("L:"):
                boxes.setdefault(a, set()).add(b)
    hubs = _mark_hubs(g, boxes, HUB_LAYERS, "joins {n} layers", "joined to {n} layers")
    if hubs:
        g.edges = [e for e in g.edges if not ((e.src in hubs and e.dst.startswith("L:")) or
                                              (e.dst in hubs and e.src.startswith("L:")))]


def _dedupe_edges(edges: list[Edge]) -> list[Edge]:
    """One edge per pair of nodes and none from a box to itself (a group's inner edges)."""
    out, seen = [], set()
    for e in edges:
        if e.src == e.dst or (e.src, e.dst) in seen:
            continue
        seen.add((e.src, e.dst))
        out.append(e)
    return out


def _ensure_scope(g: GraphSpec, scope: str) -> str:
    parts = scope.split("/")
    parent = None
    for i in range(len(parts)):
        cid = "scope:" + "/".join(parts[: i + 1])
        if cid not in g.clusters:
            g.clusters[cid] = Cluster(cid, parts[i], parent=parent)
        parent = cid
    return parent


def flat_entry(module: Module) -> tuple:
    """The entry's (instruction, scope) pairs with nested jits inlined, made once per module: a
    big program lays out a view per layer opened, each a walk of it."""
    comp = module.entry
    got = module.__dict__.get("_flat_entry")
    if got is None or got[0] is not comp:
        got = module.__dict__["_flat_entry"] = (comp, tuple(_flatten_calls(module, comp)))
    return got[1]


def _flatten_calls(module: Module, comp: Computation) -> list[tuple[Instruction, str]]:
    """Entry ops with nested-jit ``call``s inlined (as XLA will), each with its name scope."""
    out: list[tuple[Instruction, str]] = []
    for inst in comp.instructions:
        scope = scope_of(inst.metadata.op_name)
        if inst.opcode == "call" and inst.called_computations:
            callee = module.by_name.get(inst.called_computations[0])
            if callee is not None and callee is not comp:
                inner = _flatten_calls(module, callee)
                args = inst.operand_instructions()
                for sub, sub_scope in list(inner):
                    if sub.opcode == "parameter" and sub.computation is callee:
                        num = sub.operand_text.strip()
                        idx = int(num) if num.isdigit() else -1  # parameter(N)
                        if 0 <= idx < len(args):
                            out.append((_Alias(sub, args[idx]), sub_scope))
                inner = [(i, s) for i, s in inner if not (i.opcode == "parameter" and i.computation is callee)]
                prefix = scope_of(inst.metadata.op_name + "/x") if inst.metadata.op_name else scope
                out.extend((i, "/".join(p for p in (prefix, s) if p)) for i, s in inner)
                # the call's result is its callee's root
                out.append((_Alias(inst, callee.root), scope))
                continue
        out.append((inst, scope))
    return out


class _Alias:
    """Stand-in for a ``call`` instruction: its value is the callee root's value."""

    def __init__(self, call: Instruction, root: Instruction):
        self.name = call.name
        self.opcode = "bitcast"
        self.operands = [root.name]
        self.is_root = call.is_root
        self.computation = root.computation
        self.shape_text = call.shape_text
        self.shape = call.shape
        self.metadata = call.metadata

    def __getattr__(self, item):  # pragma: no cover - only the fields above are read
        raise AttributeError(item)
