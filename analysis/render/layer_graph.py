"""Both graphs collapsed to the model's layers, and one layer expanded in place.

The layer tree (``analysis.program.layers``) names each op's layer from its op_name (Flax, Equinox and
Keras module paths, or ``jax.named_scope``). The *layer level* is the first level of the tree
with two or more layers (a wrapper like ``Net`` that holds everything is looked through); its
layers are the boxes of the layers view:

- before optimization, every op of a layer is one box (its ops, kernels, bytes and time);
- after optimization, every kernel whose ops all lie in one layer is inside that layer's box.
  A kernel with ops of several layers is drawn in the box of the layer its result belongs to,
  and that box's facts count it (``border_kernels``): mostly a fusion across a layer's border,
  the next layer's residual add or norm with the last add of the one before copied in. Such
  kernels were once drawn as their own nodes between the layers, but a transformer block has
  about four at each border: seconds of Graphviz for the overview alone (docs/performance.md),
  and a tangle on a projector where the view before optimization is a clean chain. Opening a
  layer draws the kernels that cross into it (those its box draws) beside its own; a kernel it
  shares that another layer's box draws (XLA's CSE merges a mask or a constant every layer
  computes alike into one layer's kernels) is that box, where the value enters or leaves, so
  layers alike up to what they share are one graph. A kernel whose
  result has no layer's name (a broadcast every layer reads) stays its own node.

Both sides name a layer's box ``L:<path>``, so selecting it on one side finds it on the other.
``layer_variants`` gives the GraphSpecs of the views it is asked for (``variant_names``: all
layers collapsed, ``"layers"``, and each layer expanded with the others still collapsed,
``"layers:<path>"``; by default all of them). The app lays out the collapsed view with the
compile and each layer when it is opened (``app.graph_payload``).
Pure: reads a Bundle.
"""

from __future__ import annotations

import collections
import dataclasses

from analysis.bundle.core import Bundle
from analysis.hlo import Module
from analysis.program.layers import Layer, layer_path, layers_of_bundle, result_path
from analysis.render.format import human_bytes, human_seconds
from analysis.render.layers import added_note, layer_name
from analysis.render.graph import GraphSpec
from analysis.render.module_graphs import HIDDEN, post_graph, pre_graph
from analysis.program.layers import layer_tree
from analysis.render.module_graphs import flat_entry

OPEN_AS_LAYERS = 1000  # instructions before optimization above which a program opens as its layers (app, report)


def layer_level(root: Layer) -> Layer:
    """The first layer, from the root down, with two or more sub-layers (or the last one): a
    model with one root module (``ResNet``, ``TransformerLM``) is looked through, whatever ops
    of the program lie outside it (its inputs' plumbing, a loss)."""
    node = root
    while len(node.children) == 1:
        node = next(iter(node.children.values()))
    return node


def top_layers(root: Layer | None) -> list[Layer]:
    """The layers of the layers view: the layer level's children, when there are at least two."""
    if root is None:
        return []
    level = layer_level(root)
    return list(level.children.values()) if len(level.children) >= 2 else []


def layer_id(layer: Layer) -> str:
    return "L:" + "/".join(layer.path)


def kernels_of(layer: Layer) -> list[str]:
    """The kernels of a layer's subtree (every count of a layer's kernels is this list's length)."""
    return list(dict.fromkeys(k for sub in layer.walk() for k in sub.kernels))


def drawn_in(layer: Layer) -> list[str]:
    """What the optimized graph draws in a layer's box: its kernels and its control flow."""
    return kernels_of(layer) + [k for sub in layer.walk() for k in sub.control]


def layer_facts(layer: Layer, placed: int = 0) -> list[str]:
    """One line each: ops, kernels (and those shared with other layers, and how many of those
    are drawn in its box), bytes, time."""
    ks = kernels_of(layer)
    added = added_note(layer)
    facts = [f"{len(layer.all_ops())} ops before optimization",
             f"{len(ks)} kernel{'s' if len(ks) != 1 else ''} of its own" + (f", {added}" if added else "")]
    if layer.shared:
        facts.append(f"{len(layer.shared)} kernel{'s' if len(layer.shared) != 1 else ''} shared with other layers "
                     "(a fusion across the layer's border)" + (f", {placed} of them drawn in this box" if placed else ""))
    facts.append(f"{human_bytes(layer.bytes)} moved by its kernels")
    if layer.time_s is not None:
        facts.append(f"{human_seconds(layer.time_s)} per step in its kernels")
    if layer.repeats is not None:
        facts.append(f"runs {layer.repeats} times, in a loop (a scan over stacked layers): its ops are counted once"
                     if layer.repeats else "runs in a loop (a scan over stacked layers): its ops are counted once")
    return facts


def outside_note(root: Layer, tops: list[Layer], border: dict) -> tuple[str, str]:
    """The layers view's titles (before, after): how many of the program's ops and kernels the
    layers hold, so the boxes and the summary add up; what the boxes leave out is drawn as itself.
    A kernel across a layer's border is drawn in the box of its result's layer."""
    ops = len(root.all_ops())
    in_tops = sum(len(t.all_ops()) for t in tops)
    kernels = len(kernels_of(root))
    drawn = sum(len(kernels_of(t)) for t in tops) + len(border)
    pre = f"before · {len(tops)} layers hold {in_tops} of {ops} ops"  # short: a pane's title is cut at
    post = f"after · {len(tops)} layers hold {drawn} of {kernels} kernels"  # its width (the tooltip has it)
    return pre, post


def _label(layer: Layer) -> str:
    ks = kernels_of(layer)
    line2 = f"{len(layer.all_ops())} ops → {len(ks)} kernel{'s' if len(ks) != 1 else ''}"
    line3 = human_bytes(layer.bytes) + (f" · {human_seconds(layer.time_s)}" if layer.time_s is not None else "")
    return f"{layer_name(layer)}\n{line2}\n{line3}"


def border_kernels(bundle: Bundle, root: Layer, tops: list[Layer]) -> dict[str, tuple]:
    """The kernels none of ``tops`` holds whose result belongs to one of them, each with that
    layer's path: the layer its root op (for a multi-output fusion, its first output with an
    op_name) is named in. A fusion is its consumer with producers pulled in, so across a layer's
    border it is the next layer's residual add or norm that recomputes the last add of the one
    before (XLA copies that add into each consumer), or a layer's op that took in a broadcast
    XLA made once for every layer. Placed by its result, the layers view stays the chain the
    program is: no edge runs back from a layer to the one before. A kernel whose result has no
    layer's name (a broadcast every layer reads) is left out: it stays its own node."""
    post = bundle.module("hlo_after")
    if post is None:
        return {}
    owned = {k for t in tops for k in drawn_in(t)}
    by_path = {t.path: t for t in tops}
    level = len(tops[0].path) if tops else 0
    comps = post.by_name
    out: dict[str, tuple] = {}
    for k in bundle.kernels:
        if k.name in owned:
            continue
        comp = comps.get(k.computation)
        inst = comp.by_name.get(k.name) if comp is not None else None
        if inst is None:
            continue
        p = result_path(post, inst)
        if p is not None and p[:level] in by_path:
            out[k.name] = p[:level]
    return out


def layer_maps(bundle: Bundle) -> dict | None:
    """What the browser needs of the layers: per layer id (``L:<path>``, every layer under the
    layer level; ``box`` says which are drawn as boxes) its ops, kernels and facts, and which box
    an op or a kernel is in (so a highlight reaches into a collapsed layer). None when the model
    has fewer than two layers."""
    root = layers_of_bundle(bundle)
    tops = top_layers(root)
    if not tops:
        return None
    boxes, op_box, kernel_box = {}, {}, {}
    border = border_kernels(bundle, root, tops)
    placed = collections.Counter(border.values())
    for t in tops:
        for sub in t.walk():  # every layer can be searched for and selected; the top ones are boxes
            boxes[layer_id(sub)] = {"path": "/".join(sub.path), "ops": sub.all_ops(), "kernels": kernels_of(sub),
                                    "shared": list(sub.shared),
                                    "facts": layer_facts(sub, placed.get(sub.path, 0) if sub is t else 0),
                                    "box": sub is t}
        lid = layer_id(t)
        for op in t.all_ops():
            op_box[op] = lid
        for k in drawn_in(t):
            kernel_box[k] = lid
    by_path = {t.path: t for t in tops}
    for k, p in border.items():  # a fusion across a border: in the box that draws it
        kernel_box[k] = layer_id(by_path[p])
    return {"boxes": boxes, "op_box": op_box, "kernel_box": kernel_box, "order": [layer_id(t) for t in tops]}


def variant_names(bundle: Bundle, root: Layer | None = None) -> list[str]:
    """Every layers view of this bundle: ``"layers"`` and ``"layers:<path>"`` for each layer
    (empty when the model has fewer than two layers)."""
    tops = top_layers(layers_of_bundle(bundle) if root is None else root)
    return ["layers"] + ["layers:" + "/".join(t.path) for t in tops] if tops else []


def _layer_parts(bundle):
    """What both layer views start from: the layer tree, its top layers, the two modules and the
    layers' boxes (``_boxes``); None for a program without layers."""
    root = layers_of_bundle(bundle)
    tops = top_layers(root)
    if not tops:
        return None
    return root, tops, bundle.module("hlo_before"), bundle.module("hlo_after"), _boxes(bundle, root, tops)


def layer_variants(bundle: Bundle, edge_notes: dict | None = None, timings: dict | None = None,
                   names: list[str] | None = None, isolate: bool = False,
                   sides: tuple[str, ...] = ("pre", "post")) -> dict[str, dict[str, GraphSpec]]:
    """``{"pre": {"layers": spec, "layers:<path>": spec, ...}, "post": {...}}`` for the views in
    ``names`` (default: every one), of the ``sides`` asked for; empty when the model has fewer
    than two layers.

    ``isolate``: an opened layer is drawn with only its neighbours (the layers it reads from
    and feeds, as boxes), not in the middle of every other layer: a big program's layers view
    takes Graphviz seconds to lay out, and opening a layer must not lay all of it out again."""
    got = _layer_parts(bundle)
    if got is None:
        return {}
    root, tops, pre_mod, post_mod, (by_path, border, labels, op_top, kernel_top) = got
    pre_mod = pre_mod if "pre" in sides else None
    post_mod = post_mod if "post" in sides else None
    pre_note, post_note = outside_note(root, tops, border)
    out: dict[str, dict[str, GraphSpec]] = {"pre": {}, "post": {}}
    if names is None:
        choices = [None] + [t.path for t in tops]
    else:
        by_name = {"layers:" + "/".join(t.path): t.path for t in tops}
        choices = [None if n == "layers" else by_name[n] for n in names if n == "layers" or n in by_name]
    for open_path in choices:
        name = "layers" if open_path is None else "layers:" + "/".join(open_path)
        alone = isolate and open_path is not None
        if pre_mod is not None:
            near = _pre_neighbours(pre_mod, set(by_path[open_path].all_ops())) if alone else None

            def group_of(inst, scope, open_path=open_path, near=near):
                p = op_top(inst, scope)
                if p == open_path and p is not None:
                    return None
                if near is not None and inst.name not in near:
                    return HIDDEN
                return labels[p] if p is not None else None

            spec = pre_graph(pre_mod, collapse=False, groups=group_of, edge_notes=edge_notes)
            if open_path is None:
                spec.title = pre_note
            if alone:
                spec.title += f" — layer {'/'.join(open_path)} and its neighbours"
            out["pre"][name] = spec
        if post_mod is not None:
            groups = {k: labels[p] for k, p in kernel_top.items() if p != open_path}
            if alone:
                layer = by_path[open_path]
                mine = set(drawn_in(layer)) | {k for k in layer.shared if kernel_top.get(k) == open_path}
                near = _post_neighbours(post_mod, mine)
                for k in bundle.kernels:
                    if k.name not in mine and k.name not in near:
                        groups[k.name] = HIDDEN
                    elif k.name in mine:
                        groups.pop(k.name, None)
            spec = post_graph(post_mod, bundle.kernels, timings=timings, provenance=bundle.provenance,
                              groups=groups, collapse_all=open_path is None or None)
            if open_path is None:
                spec.title = post_note
            if alone:
                spec.title += f" — layer {'/'.join(open_path)} and its neighbours"
            out["post"][name] = spec
    return {k: v for k, v in out.items() if v}


def _boxes(bundle: Bundle, root: Layer, tops: list[Layer]):
    """What every layers view draws the same way: the top layers by path, the kernels across a
    border (``border_kernels``), each layer's box (id, label, tooltip), the layer box an op is
    drawn in (``op_top(inst, scope)``) and the one a kernel is drawn in (``kernel_top``)."""
    by_path = {t.path: t for t in tops}
    border = border_kernels(bundle, root, tops)
    placed = collections.Counter(border.values())
    labels = {t.path: (layer_id(t), _label(t),
                       "layer " + "/".join(t.path) + "\n" + "\n".join(layer_facts(t, placed.get(t.path, 0))))
              for t in tops}
    kernel_top = {k: t.path for t in tops for k in drawn_in(t)}
    kernel_top.update(border)
    return by_path, border, labels, _op_top(tops), kernel_top


def _op_top(tops: list[Layer]):
    """``op_top(inst, scope)``: the layer box an op is drawn in: the one its scope names (an op
    of a nested jit called from two layers is in each), else the one the layer tree puts it in
    (a loop's own ops, in the layer the loop repeats). Reads the tree's ops alone."""
    level = len(tops[0].path)
    by_path = {t.path for t in tops}
    in_tree = {op: t.path for t in tops for op in t.all_ops()}

    def op_top(inst, scope: str) -> tuple | None:
        p = layer_path(scope + "/op")[:level] if scope else ()  # the scope as an op_name: the layer it names
        return p if len(p) == level and p in by_path else in_tree.get(inst.name)
    return op_top


_PLUMBING = frozenset({"get-tuple-element", "bitcast", "tuple"})  # pass a value on (both graphs draw through them)


def own_layer_specs(bundle: Bundle) -> dict[str, dict[str, GraphSpec]]:
    """``{"pre": {"layers:<path>": spec, ...}, "post": {...}}``: each layer drawn on its own,
    its ops before optimization and its kernels after (those that cross into its box too, fusions
    open), with what they read from outside: a parameter as itself, another layer's value as
    that layer's box. Unlike ``layer_variants(isolate=True)`` each graph is built from the
    layer's own instructions only (the module is walked once for all of them), so the views of
    a program's every layer cost what the program holds (the offline report lays them all out
    ahead: ``analysis.render.report_layers``). Without timings: identical layers then draw
    identical graphs up to names."""
    got = _layer_parts(bundle)
    if got is None:
        return {}
    root, tops, pre_mod, post_mod, (by_path, border, labels, op_top, kernel_top) = got
    out: dict[str, dict[str, GraphSpec]] = {"pre": {}, "post": {}}
    if pre_mod is not None:
        made = _pre_layer_specs(pre_mod)
        for path in by_path:
            spec = made.get(path)
            if spec is not None:
                out["pre"]["layers:" + "/".join(path)] = _labelled(spec, labels)
    if post_mod is not None:
        entry = post_mod.entry.instructions
        index = {inst.name: i for i, inst in enumerate(entry)}
        source: dict[str, str] = {}  # a plumbing instruction -> the value it passes on
        passes: dict[str, list[int]] = collections.defaultdict(list)  # a value -> the plumbing that passes it
        for i, inst in enumerate(entry):
            if inst.operands and (inst.opcode in ("get-tuple-element", "bitcast") or inst.opcode.endswith("-done")):
                src = source.get(inst.operands[0], inst.operands[0])
                source[inst.name] = src
                passes[src].append(i)
        by_name = {k.name: k for k in bundle.kernels}
        for path, layer in by_path.items():
            # with the kernels that cross into it drawn in its box; one it shares that another layer's
            # box draws (a constant or mask XLA computed once for every layer, a fusion across the
            # border) is that box where this layer reads it, so layers alike up to what they
            # share are one graph (one layout), and no layer draws every other's kernels
            crossing = [k for k in layer.shared if kernel_top.get(k) == path]
            own = [k for k in dict.fromkeys(drawn_in(layer) + crossing) if k in index]
            take = {index[k] for k in own} | {j for k in own for j in passes.get(k, ())}
            groups = {}
            for i in list(take):
                for o in entry[i].operands:
                    src = source.get(o, o)
                    if src not in index or index[src] in take:
                        continue
                    take.add(index[src])
                    take.update(passes.get(src, ()))
                    p = kernel_top.get(src)
                    if p is not None and p != path:
                        groups[src] = labels[p]
            insts = [entry[i] for i in sorted(take)]
            spec = post_graph(post_mod, [by_name[x.name] for x in insts if x.name in by_name],
                              provenance=bundle.provenance, groups=groups, collapse_all=False, instructions=insts)
            n = len(kernels_of(layer))
            spec.title = f"after · layer {'/'.join(path)}: its {n} kernel{'s' if n != 1 else ''}"
            out["post"]["layers:" + "/".join(path)] = spec
    return {k: v for k, v in out.items() if v}


_BOX = "\x00box\x00"  # a layer box's label and tooltip until its facts are known: this, then its id


def prepare_before(pre: Module) -> None:
    """Each layer's own graph before optimization (``own_layer_specs``), made from the module
    before optimization alone (beside the compile, while XLA optimizes: docs/performance.md) and
    kept with its parse; the boxes of the layers it reads from are labelled when the kernels are
    known (their facts count them)."""
    _pre_layer_specs(pre)


def _pre_layer_specs(pre: Module) -> dict[tuple, GraphSpec]:
    """{top layer's path: its graph before optimization}, each neighbour's box labelled
    ``_BOX + its id`` (``_labelled`` writes the facts in); made once per parsed module. Callers
    must not change what they get."""
    made = pre.__dict__.get("_pre_layer_specs")
    if made is not None:
        return made
    tops = top_layers(layer_tree(pre))
    made = {}
    if tops:
        op_top = _op_top(tops)
        boxes = {t.path: (layer_id(t), _BOX + layer_id(t), _BOX + layer_id(t)) for t in tops}
        flat = flat_entry(pre)
        homes = [op_top(inst, scope) for inst, scope in flat]
        at = {}
        for i, (inst, _) in enumerate(flat):
            at.setdefault(inst.name, i)
        mine: dict[tuple, list[int]] = {t.path: [] for t in tops}
        for i, p in enumerate(homes):
            if p is not None:
                mine[p].append(i)
        ops = {t.path: len(t.all_ops()) for t in tops}
        for path, own in mine.items():
            take = set(own)
            todo = [o for i in own for o in flat[i][0].operands]
            while todo:  # what the layer reads from outside, through a value's plumbing
                j = at.get(todo.pop())
                if j is None or j in take or homes[j] == path:
                    continue
                take.add(j)
                inst = flat[j][0]
                if homes[j] is None and (inst.opcode in _PLUMBING or inst.opcode in ("broadcast", "constant")):
                    todo.extend(inst.operands)  # a scalar broadcast is drawn as nothing, like its scalar

            def group_of(inst, scope, path=path):
                p = op_top(inst, scope)
                return boxes[p] if p is not None and p != path else None

            spec = pre_graph(pre, collapse=False, groups=group_of, insts=[flat[i] for i in sorted(take)])
            spec.title = f"before · layer {'/'.join(path)}: its {ops[path]} ops"
            made[path] = spec
    pre.__dict__["_pre_layer_specs"] = made
    return made


def _labelled(spec: GraphSpec, labels: dict) -> GraphSpec:
    """A graph of ``_pre_layer_specs`` with its layer boxes' labels and tooltips written in (what
    drawing it added after the placeholder, a fan-out's count, is kept); the rest shared."""
    by_id = {lab[0]: lab for lab in labels.values()}
    nodes = dict(spec.nodes)
    for nid, n in spec.nodes.items():
        if n.label.startswith(_BOX) and nid in by_id:
            _, label, tip = by_id[nid]
            place = _BOX + nid
            nodes[nid] = dataclasses.replace(n, label=label + n.label[len(place):],
                                             tooltip=tip + n.tooltip[len(place):] if n.tooltip.startswith(place)
                                             else n.tooltip)
    return GraphSpec(spec.title, nodes, spec.edges, spec.clusters, list(spec.collapsed), spec.color_by)


def _pre_neighbours(module, mine: set[str]) -> set[str]:
    """``mine`` and the instructions that feed it or read it (any computation)."""
    near = set(mine)
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.name in mine:
                near.update(inst.operands)
            elif any(o in mine for o in inst.operands):
                near.add(inst.name)
    return near


def _post_neighbours(module, mine: set[str]) -> set[str]:
    """The entry's kernels that feed ``mine`` or read it, through tuples and bitcasts."""
    through: dict[str, str] = {}  # a get-tuple-element or bitcast -> what it passes on
    for inst in module.entry.instructions:
        if inst.opcode in ("get-tuple-element", "bitcast", "copy-done", "async-done") and inst.operands:
            through[inst.name] = through.get(inst.operands[0], inst.operands[0])
    near: set[str] = set()
    for inst in module.entry.instructions:
        ops = {through.get(o, o) for o in inst.operands}
        if inst.name in mine:
            near.update(ops)
        elif ops & mine:
            near.add(inst.name)
    return near - mine
