"""The layer tree: a model's layers as the hierarchy of the graph, from the ops' names.

Every op of the pre-optimization module carries the name scopes it was traced under in its
``op_name`` (``jit(model)/Net/conv1/conv_general_dilated``; Flax Linen and Keras name their
layers themselves, Flax NNX, Equinox and PyTorch modules get their attribute names from
``analysis.compile.frameworks``, plain JAX code from ``jax.named_scope``). The path without the
``jit(...)`` root, without transformation wrappers (``jvp(...)``, ``transpose(...)``,
``vmap()``, a nested ``jit(_where)``) and without the primitive at its end is the op's layer.

Each layer gets its ops, the kernels they ended in (through the bundle's provenance), and the
bytes and measured time of its kernels. Every kernel is in one layer (``_kernel_owners``): the
deepest that holds all its ops; a fusion across a border is with the layer of its result and
listed as shared by the others; a kernel XLA added with no op of the program (a copy, a layout
change) is with the layers it feeds or is fed by, so what lies outside every layer is what
belongs to none. Sub-layers are in the order the program runs them (``_in_program_order``).
Pure: reads a Bundle.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from analysis import measures
from analysis.hlo import Module
from analysis.program.kernels import launching
from analysis.program.provenance import walk_compute

# Scopes JAX's own transformations put into op names: control flow (``while/body``,
# ``cond/branch_0_fun``), inlined calls (``closed_call``, ``core_call``), remat and custom
# derivatives; jax 0.12 scopes a scan's body under ``eval_jaxpr``. They are where an op ran, not
# a layer of the model: their ops are the enclosing layer's.
_JAX_SCOPES = frozenset({"while", "closed_call", "core_call", "remat", "checkpoint", "rematted_computation",
                         "pjit", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "shard_map",
                         "xla_call", "eval_jaxpr"})
_BRANCH = re.compile(r"^branch_\d+(_fun)?$")
# A library's name for its own code, inside the module the user named: an einsum's spec
# (``...qhd,...khd->...hqk``, which ``jnp.einsum`` scopes its ops under; ``ij,jk,lk`` where the
# output is implicit, as in jax.scipy's BFGS) and methods' qualified names
# (``RngStream.__call__``, Flax NNX's random streams).
_LIBRARY_SCOPE = re.compile(r"->|,|\.__\w+__$")
_EQX_CLASS = re.compile(r"^eqx\.")  # inside a layer the user named, not a layer of its own


_CALLED = re.compile(r"^([\w.]*)\((.*)\)$")
_FUNCTIONS = frozenset({"jit", "pjit", "xla_call", "xla_pmap", "pmap", "shard_map"})  # jit(f): f is a function


def _unwrap(p: str) -> str | None:
    """A scope as a transformation prints it: ``jvp(dense1)``, ``transpose(jvp(block_0))``,
    ``vmap(jvp(logits))`` are the layers ``dense1``, ``block_0``, ``logits`` (their forward and
    backward ops alike); ``jit(f)``, ``vmap()`` and ``transpose(jvp(jit(f)))`` name none."""
    while True:
        m = _CALLED.match(p)
        if m is None:
            return p
        fn, inner = m.groups()
        if fn in _FUNCTIONS or not inner or "/" in inner:
            return None
        p = inner


def _is_layer_name(p: str, before: str | None, after: str | None) -> bool:
    if p in _JAX_SCOPES or _BRANCH.match(p) or _LIBRARY_SCOPE.search(p):
        return False
    if before == "while" and p in ("body", "cond"):
        return False
    return not (p == "cond" and after is not None and _BRANCH.match(after))  # lax.cond's branches


@functools.lru_cache(maxsize=1 << 16)  # the same op_names come back for every view laid out
def _clean(op_name: str) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    """An op name's layer path, and where loops repeat it: ``(index in the path, k)`` for each
    layer entered right inside the body of the op's ``k``-th loop (outermost first): that layer
    is run once per iteration (``lax.scan`` over layers, ``nnx.scan``)."""
    # an op XLA or JAX merged from several carries their names joined by ";": the first one is its own
    parts = [p for p in op_name.split(";", 1)[0].split("/") if p]
    path: list[str] = []
    marks: list[tuple[int, int]] = []
    loops, in_body = 0, None
    top = _CALLED.match(parts[0]) if parts else None
    program = top.group(2) if top is not None and top.group(1) in _FUNCTIONS else None
    for i, raw in enumerate(parts[:-1]):
        p = _unwrap(raw)
        if p is None or (i and p == program):  # JAX names some calls inside ``jit(f)`` after ``f``
            continue
        if p == "while" and i + 1 < len(parts) - 1 and parts[i + 1] == "body":
            in_body = loops
            loops += 1
            continue
        if "::" in p:  # a PyTorch op (``aten::gelu``, named by torchax as it dispatched it): the op
            break  # whose HLO ops these are, not a layer, and nothing inside it is a layer
        if not _is_layer_name(p, parts[i - 1] if i else None, parts[i + 1] if i + 1 < len(parts) else None):
            continue
        if path and (path[-1] == p or _EQX_CLASS.match(p)):  # a module that scopes its call under its
            continue  # own name again; Equinox's class name inside the attribute that holds it
        if in_body is not None:
            marks.append((len(path), in_body))
            in_body = None
        path.append(p)
    return tuple(path), tuple(marks)


def layer_path(op_name: str) -> tuple[str, ...]:
    """The layer an op belongs to, from its op_name: the scope components without the root, with
    transformations' wrappers taken off (``_unwrap``), without JAX's and the libraries' internal scopes (``_JAX_SCOPES``,
    ``_LIBRARY_SCOPE``), a component repeating the one before it, and the primitive (the last
    component)."""
    return _clean(op_name)[0]


@dataclass
class Layer:
    path: tuple[str, ...]
    ops: list[str] = field(default_factory=list)  # pre-optimization instructions directly in it
    children: dict[str, "Layer"] = field(default_factory=dict)
    kernels: list[str] = field(default_factory=list)  # kernels holding ops of this layer only (its subtree)
    control: list[str] = field(default_factory=list)  # its control flow (a loop's ``while``): runs kernels, is none
    shared: list[str] = field(default_factory=list)  # kernels that also hold ops of other layers
    added: list[str] = field(default_factory=list)  # of its kernels, those that do no op of the program (XLA's copies)
    bytes: int = 0  # of its own kernels
    time_s: float | None = None  # its kernels' parts of the step (measures.part_of_step), when measured
    unnamed: set = field(default_factory=set)  # (the root's) ops without an op_name: see layers_of_bundle
    # run once per iteration of a loop (``lax.scan``/``nnx.scan`` over layers): the loop's trip
    # count, 0 where it is not known; None: not repeated by a loop of its own
    repeats: int | None = None

    @property
    def name(self) -> str:
        return self.path[-1] if self.path else "(model)"

    def walk(self):
        """This layer and every layer below it, depth first (without recursion: the tree is as
        deep as the program's scopes, and a nested generator per level ended 3,000 scopes in a
        RecursionError)."""
        todo = [self]
        while todo:
            layer = todo.pop()
            yield layer
            todo.extend(reversed(layer.children.values()))

    def all_ops(self) -> list[str]:
        return [op for layer in self.walk() for op in layer.ops]

    def find(self, path: tuple[str, ...]) -> "Layer | None":
        node = self
        for p in path[len(self.path):]:
            node = node.children.get(p)
            if node is None:
                return None
        return node


def layer_tree(pre: Module) -> Layer:
    """The layers of a pre-optimization module, each with the compute ops directly in it (every
    op once per call site, as ``analysis.program.provenance.op_count`` counts them: the root's subtree
    holds exactly the program's ops): a tree of its own for the caller to fill (kernels, bytes,
    time), copied from the one made once per parsed module (``prepare``)."""
    made = pre.__dict__.get("_layer_tree")
    if made is None:
        made = pre.__dict__["_layer_tree"] = _layer_tree(pre)
    return _copy(made)


def prepare(pre: Module) -> None:
    """The layer tree of ``pre``, made now (beside a compile, while XLA optimizes:
    docs/performance.md) and kept with the parsed module."""
    if "_layer_tree" not in pre.__dict__:
        pre.__dict__["_layer_tree"] = _layer_tree(pre)


def _copy(tree: Layer) -> Layer:
    """A copy of a tree as ``_layer_tree`` makes it (paths, ops, repeats and the root's unnamed
    ops; nothing else is filled yet)."""
    # iterative, as ``Layer.walk``: the tree is as deep as the program's scopes
    out = Layer(tree.path, list(tree.ops), unnamed=set(tree.unnamed), repeats=tree.repeats)
    todo = [(tree, out)]
    while todo:
        src, dst = todo.pop()
        for k, c in src.children.items():
            n = Layer(c.path, list(c.ops), unnamed=set(c.unnamed), repeats=c.repeats)
            dst.children[k] = n
            todo.append((c, n))
    return out


def _layer_tree(pre: Module) -> Layer:
    """``layer_tree``'s tree, made (see there).

    A layer entered right inside a loop's body (``lax.scan``/``nnx.scan`` over stacked layers)
    is marked with the loop's trip count (``Layer.repeats``), and the loop's own ops (its
    ``while``, the indexing of the stacked weights per step) are that layer's when it is the
    only layer the loop repeats: they are how the layer is repeated."""
    root = Layer(())
    chains: dict[str, tuple] = {}
    parents = _computation_parents(pre)

    def chain_of(inst) -> tuple:
        comp = inst.computation.name if inst.computation is not None else ""
        got = chains.get(comp)
        if got is None:
            got = chains[comp] = _loop_chain(comp, parents)
        return got

    def node_at(path: tuple) -> Layer:
        node = root
        for i in range(len(path)):
            node = node.children.setdefault(path[i], Layer(path[: i + 1]))
        return node

    placed = []
    marked: dict[tuple, int] = {}  # layer path -> repeat count (the first op that marks it decides)
    repeated: dict[str, set] = {}  # loop body -> the layers entered right inside it
    for inst, key in walk_compute(pre):
        path, marks = _clean(key[0]) if key else ((), ())
        if not key or not key[0]:
            root.unnamed.add(inst.name)
        chain = chain_of(inst)
        for at, k in marks:
            body, trip = chain[k] if k < len(chain) else (None, None)
            marked.setdefault(path[: at + 1], trip or 0)
            if body is not None:
                repeated.setdefault(body, set()).add(path[: at + 1])
        placed.append((path, inst, chain[-1][0] if chain else None))
    homes = []
    for path, inst, body in placed:
        loop = _body_of(inst) if inst.opcode == "while" else body
        only = [p for p in repeated.get(loop, ()) if p[:-1] == path] if loop is not None else []
        homes.append((only[0] if len(only) == 1 else path, inst))  # a loop's own op: the one layer it repeats
    for path, inst in homes:
        node_at(path).ops.append(inst.name)
    for path, trip in marked.items():
        node_at(path).repeats = trip
    _in_program_order(root, homes)
    return root


def _in_program_order(root: Layer, homes: list) -> None:
    """Each layer's sub-layers in the order the program runs them: each at its first op that
    takes in a value made outside it (by another layer, or by the program's own ops) or makes a
    value read outside it, else at its first op that is not a constant's broadcast (JAX puts
    those first, wherever they are used), else at its first op. Of two layers one after the
    other, the op that hands the value on comes before the op that takes it in.

    Not by the first op alone: HLO prints a computation in post order from its root, operands
    first, so where a layer works on its weights before it reads its input (``einsum(w, x)``,
    a weight cast to the compute type) the last layer's weight op is printed before the first
    layer's work, and a stack of stages read 3, 2, 1, 0."""
    made: dict[str, tuple] = {}  # an op -> (its layer, its place), as last walked (a computation
    # called from two layers is walked once for each, its operands just before it)
    firsts: dict[tuple, list] = {}  # layer -> [first op across its border, first not hoisted, first]

    def at(path: tuple, i: int) -> None:
        got = firsts[path]
        got[0] = i if got[0] is None else min(got[0], i)

    for i, (path, inst) in enumerate(homes):
        for d in range(1, len(path) + 1):
            firsts.setdefault(path[:d], [None, None, i])
        if inst.opcode in _HOISTED:
            continue
        for d in range(1, len(path) + 1):
            if firsts[path[:d]][1] is None:
                firsts[path[:d]][1] = i
        for o in inst.operands:
            if o not in made:
                continue
            q, j = made[o]
            for d in range(1, max(len(path), len(q)) + 1):
                if path[:d] != q[:d]:  # q's value crosses into path here
                    if d <= len(path):
                        at(path[:d], i)
                    if d <= len(q):
                        at(q[:d], j)
        made[inst.name] = (path, i)

    def place(layer: Layer) -> int:
        got = firsts.get(layer.path)
        return next((i for i in got if i is not None), 0) if got else 0

    for layer in root.walk():
        if len(layer.children) > 1:
            order = sorted(layer.children.items(), key=lambda kv: place(kv[1]))
            layer.children.clear()
            layer.children.update(order)


_HOISTED = frozenset({"broadcast", "iota", "constant"})


def _body_of(loop) -> str:
    return (loop.attributes.get("body") or "").strip().lstrip("%")


def _computation_parents(pre: Module) -> dict[str, tuple[str, object, str | None]]:
    """Each called computation's caller: ``name -> (calling computation, trip count, loop)``
    where a while loop's body or condition names the loop (by its body) with its trip count
    (None where not known); any other call has ``False`` and None."""
    parents: dict[str, tuple[str, object, str | None]] = {}
    for comp in pre.computations:
        for inst in comp.instructions:
            if inst.opcode == "while":
                body, trip = _body_of(inst), trip_count(pre, inst)
                parents.setdefault(body, (comp.name, trip, body))
                cond = (inst.attributes.get("condition") or "").strip().lstrip("%")
                parents.setdefault(cond, (comp.name, trip, body))
            for c in inst.called_computations:
                parents.setdefault(c, (comp.name, False, None))
    return parents


def _loop_chain(comp: str, parents: dict) -> tuple:
    """The loops a computation runs in, outermost first: ``(loop's body, trip count)``."""
    loops, seen = [], set()
    while comp in parents and comp not in seen:
        seen.add(comp)
        comp, trip, loop = parents[comp]
        if loop is not None:
            loops.append((loop, trip))
    return tuple(reversed(loops))


def trip_count(module: Module, loop) -> int | None:
    """How many times a ``while`` runs, read from its condition as JAX lowers ``lax.scan`` and
    ``fori_loop``: ``counter < N`` on a tuple element that starts at a constant. None otherwise."""
    cond = module.by_name.get((loop.attributes.get("condition") or "").strip().lstrip("%"))
    root = cond.root if cond is not None else None
    if root is None or root.opcode != "compare" or root.attributes.get("direction") != "LT":
        return None
    ops = root.operand_instructions()
    if len(ops) != 2 or ops[0].opcode != "get-tuple-element" or ops[1].opcode != "constant":
        return None
    init = loop.operand_instructions()
    init = init[0] if init else None
    try:
        index, end = int(ops[0].attributes.get("index", "")), int(ops[1].operand_text)
        if init is None or init.opcode != "tuple":
            return None
        start = init.operand_instructions()[index]
        return end - int(start.operand_text) if start.opcode == "constant" else None
    except (ValueError, IndexError):
        return None


def layers_of_bundle(bundle) -> Layer | None:
    """The layer tree of a bundle with kernels, bytes and (when measured) time per layer; made
    once per bundle (and again when its program, provenance, kernels or timings are replaced).
    Callers must not change it."""
    return bundle.derived("layers", (bundle.stages.get("hlo_before"), bundle.provenance, bundle.kernels,
                                     bundle.timings), lambda: _layers_of_bundle(bundle))


def _layers_of_bundle(bundle) -> Layer | None:
    pre = bundle.module("hlo_before")
    if pre is None:
        return None
    root = layer_tree(pre)
    prov = bundle.provenance
    if prov is None:
        return root
    by_kernel = {k.name: k for k in bundle.kernels}
    post = bundle.module("hlo_after")
    rows = (bundle.timings or {}).get("kernels") or {}
    owner = _kernel_owners(root, prov, post, bundle.kernels)
    launch = {k.name for k in launching(bundle.kernels)}
    for kn, path in owner.items():
        layer = root.find(path)
        k = by_kernel.get(kn)
        if layer is None or k is None:
            continue
        if kn not in launch:
            layer.control.append(kn)
            continue
        layer.kernels.append(kn)
        if not prov.kernel_to_pre.get(kn):
            layer.added.append(kn)
        layer.bytes += k.bytes
        part = measures.part_of_step(bundle.timings, rows.get(kn))
        if part is not None:  # the kernels' parts of the step: a layer's time never exceeds it
            layer.time_s = (layer.time_s or 0.0) + part
    for layer in root.walk():  # kernels that cross into this layer from a parent's fusion
        mine = set(layer.all_ops())
        inside = {kn for sub in layer.walk() for kn in sub.kernels}
        layer.shared = sorted({kn for op in mine for kn in prov.pre_to_kernels.get(op, []) if kn in launch} - inside)
    roll_up(root)
    return root


def _kernel_owners(root: Layer, prov, post: Module | None, kernels) -> dict[str, tuple]:
    """The layer each kernel is in (every kernel is in the tree, once):

    - the deepest layer that holds all of its ops. An op of a computation two layers call (a
      nested ``jit`` such as ``jnp.tril``, walked once per call site) is in both: where the
      kernel has ops in one place only, those decide. Ops without an op_name (constants and
      their broadcasts that JAX hoisted and XLA shares) say nothing about where a kernel belongs:
      counted, they put every layer norm of a stack at the root (its epsilon);
    - a kernel with ops of several layers and none of the layer that holds them all (a fusion
      across a border: the next layer's norm with the last add of the one before copied in, a
      constant XLA merged from two layers) is with the layer of its result (``result_path``);
    - a kernel that does no op of the program with a name (a copy or layout change XLA added,
      a broadcast of a constant) is in the layer of the loop it runs in, else with the layer of
      the kernels that read its result, else of those that make its operands: "outside every
      layer" holds only what belongs to no layer."""
    homes: dict[str, list] = {}
    for layer in root.walk():
        for op in layer.ops:
            if op not in root.unnamed:
                homes.setdefault(op, []).append(layer.path)
    places: dict[str, list] = {}  # kernel -> the layers of each of its ops
    for op, paths in homes.items():
        for kn in prov.pre_to_kernels.get(op, []):
            places.setdefault(kn, []).append(tuple(dict.fromkeys(paths)))
    graph = _KernelGraph(post, kernels)
    owner: dict[str, tuple] = {}
    for kn, per_op in places.items():
        single = [p[0] for p in per_op if len(p) == 1]
        paths = single or [q for p in per_op for q in p]
        common = functools.reduce(_common, paths)
        if common not in paths:
            r = graph.result_path(kn)
            below = [p for p in paths if r is not None and r[:len(p)] == p]
            common = max(below, key=len) if below else common
        owner[kn] = common
    callers = _callers(post)
    rest = [k.name for k in kernels if k.name not in owner]
    for kn in rest:
        loop = _loop_owner(graph.computation.get(kn, ""), callers, owner)
        if loop:
            owner[kn] = loop
    rest = [kn for kn in rest if kn not in owner]
    for _ in range(len(rest)):  # a chain of copies is placed one link a pass
        placed = False
        for kn in rest:
            if kn in owner:
                continue
            for near in (graph.users(kn), graph.producers(kn)):
                got = [owner[n] for n in near if n in owner]
                common = functools.reduce(_common, got) if got else ()
                if common:
                    owner[kn] = common
                    placed = True
                    break
        if not placed:
            break
    for kn in rest:
        owner.setdefault(kn, ())
    return owner


class _KernelGraph:
    """The kernels of an optimized module as a graph: which kernels read a kernel's result and
    which make its operands (through the plumbing between them: tuples, get-tuple-element,
    bitcasts), within its computation; and the layer each kernel's result is named in."""

    def __init__(self, post: Module | None, kernels):
        self.kernels = {k.name for k in kernels}
        self.computation = {k.name: k.computation for k in kernels}
        self.post = post
        self._users: dict[str, dict[str, list[str]]] = {}

    def _comp(self, kn: str):
        return self.post.by_name.get(self.computation.get(kn, "")) if self.post is not None else None

    def _walk(self, kn: str, step) -> list[str]:
        comp = self._comp(kn)
        if comp is None:
            return []
        out, seen, todo = [], {kn}, [kn]
        while todo:
            for m in step(comp, todo.pop()):
                if m in seen:
                    continue
                seen.add(m)
                if m in self.kernels:
                    out.append(m)
                else:
                    inst = comp.by_name.get(m)
                    if inst is not None and inst.opcode in ("get-tuple-element", "bitcast", "tuple"):
                        todo.append(m)
        return out

    def users(self, kn: str) -> list[str]:
        def step(comp, name):
            got = self._users.get(comp.name)
            if got is None:
                got = self._users[comp.name] = {}
                for inst in comp.instructions:
                    for o in inst.operands:
                        got.setdefault(o, []).append(inst.name)
            return got.get(name, ())
        return self._walk(kn, step)

    def producers(self, kn: str) -> list[str]:
        def step(comp, name):
            inst = comp.by_name.get(name)
            return inst.operands if inst is not None else ()
        return self._walk(kn, step)

    def result_path(self, kn: str) -> tuple | None:
        comp = self._comp(kn)
        inst = comp.by_name.get(kn) if comp is not None else None
        return result_path(self.post, inst) if inst is not None else None


def result_path(post: Module, inst) -> tuple | None:
    """The layer a kernel's result is named in: its root op's (a fusion's; for a multi-output
    fusion, its first output with an op_name), read from the op_name XLA kept; None where
    that has none."""
    results = [inst]
    if inst.opcode == "fusion" and inst.called_computations:
        fc = post.by_name.get(inst.called_computations[0])
        r = fc.root if fc is not None else None
        if r is not None:
            results = [fc.by_name.get(o) for o in r.operands] if r.opcode == "tuple" else [r]
    for r in results:
        name = r.metadata.op_name if r is not None else ""
        if name:
            return layer_path(name)
    return None


def _callers(post: Module | None) -> dict[str, tuple[str, str]]:
    """Each computation of the optimized module: the instruction that calls it, and where."""
    out: dict[str, tuple[str, str]] = {}
    for comp in (post.computations if post is not None else ()):
        for inst in comp.instructions:
            for c in inst.called_computations:
                out.setdefault(c, (inst.name, comp.name))
    return out


def _loop_owner(comp: str, callers: dict, owner: dict) -> tuple:
    """The layer of the innermost control-flow kernel with a layer that runs ``comp``."""
    seen = set()
    while comp in callers and comp not in seen:
        seen.add(comp)
        inst, comp = callers[comp]
        if inst in owner:
            return owner[inst]
    return ()


def _common(a: tuple, b: tuple) -> tuple:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def roll_up(layer: Layer) -> tuple[int, float | None]:
    """Totals of a subtree into each layer: bytes and time include the layers below (the layers
    below first: ``walk``'s order reversed, without recursion)."""
    for node in reversed(list(layer.walk())):
        total_b, total_t = node.bytes, node.time_s
        for c in node.children.values():  # (already totals)
            total_b += c.bytes
            if c.time_s is not None:
                total_t = (total_t or 0.0) + c.time_s
        node.bytes, node.time_s = total_b, total_t
    return layer.bytes, layer.time_s
