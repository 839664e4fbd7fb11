"""Provenance: which post-optimization kernel(s) each pre-optimization op ended up in.

XLA renames and rewrites instructions, but keeps each instruction's ``metadata``: the JAX
op_name (``jit(f)/layer1/add``) and the source location. We match a pre-optimization op to the
kernels that contain an instruction with the same (op_name, source location) key; then the same
op_name alone; ops that carry no metadata (constants and broadcasts JAX inserts) inherit the
kernels of their users (or, failing that, of their operands).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.hlo import Instruction, Module, ShapeParseError
from analysis.program.kernels import NO_KERNEL, Kernel, call_cycle, instruction_flops

# Ops that are plumbing rather than computation; they are not counted as "compute ops".
NOT_COMPUTE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast",
                         "after-all", "add-dependency", "opt-barrier", "partition-id", "replica-id"})


# Custom calls that only carry a sharding for the SPMD partitioner (GSPMD's and Shardy's): the
# partitioner consumes them, so they are annotations of the program, not ops to find kernels of.
SHARDING_MARKERS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})


def is_sharding_marker(inst: Instruction) -> bool:
    if inst.opcode != "custom-call":
        return False
    target = inst.attributes.get("custom_call_target", "").strip('"')
    return target in SHARDING_MARKERS or target.startswith("xla.sdy.")


Key = tuple  # (op_name, file, line, column)


def op_key(inst: Instruction, context: dict[str, Key] | None = None) -> Key | None:
    if context is not None and inst.name in context:
        return context[inst.name]
    md = inst.metadata
    if not md.op_name:
        return None
    src = md.source
    if src is None:
        return (md.op_name, "", 0, 0)
    return (md.op_name, src.file or "", src.line or 0, src.column or 0)


def compute_ops(module: Module) -> list[Instruction]:
    """The ops a user's program asked for, before optimization: everything in the entry and
    in control-flow computations except plumbing. Reducer bodies (``to_apply``) are part of
    their reduce; ``call``s of nested ``jit``s are transparent (their ops count, the call
    itself does not: XLA inlines it). A computation called from several places (a nested
    ``jit`` used twice) is listed once."""
    return list({i.name: i for i in compute_op_instances(module)}.values())


def op_count(module: Module) -> int:
    """The program's ops: every number of "ops" the product shows (the summary, the layer tree,
    a layer's box) is this one. Compute ops once per call site (``compute_op_instances``): an
    op of a nested ``jit`` called from two layers is two ops, as it is after XLA inlines the
    calls, and each layer holds its own."""
    return len(walk_compute(module))


def compute_op_instances(module: Module) -> list[Instruction]:
    """Like ``compute_ops`` but once per call site: an op of a nested ``jit`` called twice
    appears twice, as it does after XLA inlines the calls."""
    return [i for i, _ in walk_compute(module)]


def walk_compute(module: Module) -> tuple[tuple[Instruction, Key | None], ...]:
    """Compute ops with their effective key (walked once per module: provenance, the layer
    tree, the fusion decisions and the details all read it, and a parsed module does not change). Ops inside a nested jit's computation carry an
    op_name relative to the call (``div``) and no source; after inlining XLA gives them the
    full path (``jit(model)/layernorm/jit(_var)/div``) so we compose the same here. A
    computation called from several call sites is walked once per distinct caller key, so its
    ops get the key of every place they were inlined into."""
    walked = module.__dict__.get("_compute_walk")
    if walked is None:
        walked = module.__dict__["_compute_walk"] = tuple(_walk(module))
    return walked


def _walk(module: Module) -> list[tuple[Instruction, Key | None]]:
    out: list[tuple[Instruction, Key | None]] = []
    seen: set[tuple[str, Key | None]] = set()

    # Iterative (the module's text decides the depth), in the order a recursive walk visits:
    # a computation's ops, each call's computation expanded where the call is. A chain of
    # calls deeper than the module has computations is a cycle (HLO has no recursion).
    most = len(module.computations) + 1
    todo: list = [(None, module.entry.name, None)]  # (None, name, caller): not entered yet

    depth = 0  # computations entered and not finished (the call chain's length)
    while todo:
        it, cname, caller = todo[-1]
        if it is None:
            todo.pop()
            if (cname, caller) in seen or cname not in module.by_name:
                continue
            if depth >= most:
                raise call_cycle(module, cname)
            seen.add((cname, caller))
            todo.append((iter(module.by_name[cname].instructions), cname, caller))
            depth += 1
            continue
        inst = next(it, None)
        if inst is None:
            todo.pop()
            depth -= 1
            continue
        key = op_key(inst)
        if caller is not None and caller[0]:
            root = caller[0].split("/", 1)[0] + "/"
            if key is None:
                key = None
            elif not key[0].startswith(root):
                key = (caller[0] + "/" + key[0],) + (key[1:] if key[1] else caller[1:])
        if inst.opcode == "call":
            # a call with no name of its own (JAX's ``threefry2x32``) adds no scope: its ops are
            # relative to the scope it is in, and XLA names them so when it inlines it
            inner = key if key is not None else caller
            todo.extend((None, c, inner) for c in reversed(inst.called_computations))
            continue
        if inst.opcode not in NOT_COMPUTE and not is_sharding_marker(inst):
            out.append((inst, key))
        if inst.opcode in ("while", "conditional", "async-start"):
            # a loop inside a nested jit names its body's ops relative to that jit, as its own
            # ops are (XLA's optimized module gives them the full path, as for the call's own)
            todo.extend((None, c, caller) for c in reversed(inst.called_computations))
    return out


@dataclass
class Provenance:
    """``pre_to_kernels``: pre-op name -> kernel names; ``kernel_to_pre``: the reverse;
    ``how``: pre-op name -> "metadata", "op_name", "shape", "user", "operand", "scope" or "epilogue"
    (how it was matched; "scope": computed inside a library call of the same name scope;
    "epilogue": done by a library call after its matmul or convolution, e.g. cuBLASLt's bias +
    ReLU, found from the call's backend config and the ops between, ``_mark_epilogues``)."""

    pre_to_kernels: dict[str, list[str]] = field(default_factory=dict)
    kernel_to_pre: dict[str, list[str]] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)
    unmapped: list[str] = field(default_factory=list)

    @property
    def mapped_fraction(self) -> float:
        total = len(self.pre_to_kernels) + len(self.unmapped)
        return len(self.pre_to_kernels) / total if total else 1.0

    def to_dict(self) -> dict:
        return {"pre_to_kernels": self.pre_to_kernels, "kernel_to_pre": self.kernel_to_pre,
                "how": self.how, "unmapped": self.unmapped}

    @classmethod
    def from_dict(cls, d: dict) -> "Provenance":
        return cls(dict(d.get("pre_to_kernels", {})), dict(d.get("kernel_to_pre", {})),
                   dict(d.get("how", {})), list(d.get("unmapped", [])))


def combined_op_names(op_name: str) -> list[str]:
    """The op names of instructions XLA combined into one (its collective combiners name the
    result ``prefix/(a:b:c)``): ``prefix/a``, ``prefix/b``, ``prefix/c``; none for another name."""
    i = op_name.find("/(")
    if i < 0 or not op_name.endswith(")"):
        return []
    prefix = op_name[:i + 1]
    return [prefix + part for part in op_name[i + 2:-1].split(":") if part]


def map_provenance(pre: Module, post: Module, post_kernels: list[Kernel]) -> Provenance:
    by_key: dict[tuple, list[str]] = {}
    by_opname: dict[str, list[str]] = {}
    by_combined: dict[str, list[str]] = {}  # kernels of instructions XLA combined, by each op name they name
    for k in post_kernels:
        comp = post.by_name.get(k.computation)
        members = [comp.by_name[k.name]] if comp is not None and k.name in comp.by_name else []
        # A control-flow op (while, conditional) is matched by its own metadata only: the work
        # of its body belongs to the body's kernels.
        for cname in (members[0].called_computations if members and k.opcode == "fusion" else []):
            members.extend(_all_inside(post, cname))
        for inst in members:
            key = op_key(inst)
            if key is None:
                continue
            lst = by_key.setdefault(key, [])
            if k.name not in lst:
                lst.append(k.name)
            lst = by_opname.setdefault(key[0], [])
            if k.name not in lst:
                lst.append(k.name)
            for name in combined_op_names(key[0]):
                lst = by_combined.setdefault(name, [])
                if k.name not in lst:
                    lst.append(k.name)

    walked, ops, users, param_of_call = _pre_side(pre)
    prov = Provenance()
    for inst, key in walked:  # an op inlined at several call sites collects every site's kernels
        if key is None:
            continue
        if key in by_key:
            found, how = by_key[key], "metadata"
        elif key[0] in by_opname:
            found, how = by_opname[key[0]], "op_name"
        elif key[0] in by_combined:
            found, how = [], "op_name"
        else:
            continue
        found = found + [kn for kn in by_combined.get(key[0], ()) if kn not in found]
        lst = prov.pre_to_kernels.setdefault(inst.name, [])
        for kn in found:
            if kn not in lst:
                lst.append(kn)
        if prov.how.get(inst.name) != "metadata":
            prov.how[inst.name] = how

    # Kernels whose instructions carry no metadata at all (XLA built them in a rewrite, e.g. a
    # dot re-created by a layout pass) are matched by structure: a pre-optimization op with the
    # same opcode, element type and dimensions as one of their instructions.
    matched = {kn for lst in by_key.values() for kn in lst}
    by_shape = None
    for k in post_kernels:
        if k.route == "control" or k.name in matched:
            continue
        comp = post.by_name.get(k.computation)
        members = [comp.by_name[k.name]] if comp is not None and k.name in comp.by_name else []
        for cname in (members[0].called_computations if members and k.opcode == "fusion" else []):
            members.extend(_all_inside(post, cname))
        for inst in members:
            if inst.opcode in NOT_COMPUTE or inst.opcode == "fusion":
                continue
            if by_shape is None:
                by_shape = _pre_by_shape(pre, ops)
            cands = []
            for sk in _structure_keys(inst):
                cands = by_shape.get(sk, [])
                if cands:
                    break
            for cand in cands:
                lst = prov.pre_to_kernels.setdefault(cand.name, [])
                if k.name not in lst:
                    lst.append(k.name)
                prov.how.setdefault(cand.name, "shape")

    # Ops without a match inherit from users, then operands, until nothing changes. A nested
    # jit's computation is seen through its call (``_pre_side``).
    def operands_through_calls(inst: Instruction) -> list[Instruction]:
        out = []
        for o in inst.operand_instructions():
            out.extend(param_of_call.get(o.name, [o]) if o.opcode == "parameter" else [o])
        return out
    library_calls = {k.name for k in post_kernels if k.route == "library" and k.opcode == "custom-call"}
    changed = True
    while changed:
        changed = False
        for inst in ops:
            if inst.name in prov.pre_to_kernels:
                continue
            candidates = []
            for relation, neighbours in (("user", users.get(inst.name, [])),
                                         ("operand", operands_through_calls(inst))):
                # the neighbours' kernels in order, each once (a dict: an op read by every layer
                # has hundreds of them, and a list's membership test made this quadratic)
                found = list(dict.fromkeys(kn for nb in neighbours for kn in prov.pre_to_kernels.get(nb.name, ())))
                if found:
                    candidates.append((relation, found))
            if candidates:
                # an op whose producer is a library call rides in that call's epilogue (cuDNN's
                # bias + activation, cuBLAS's BIAS_RELU): the operand wins; else the user does
                relation, found = next(((r, f) for r, f in candidates if r == "operand"
                                        and not library_calls.isdisjoint(f)), candidates[0])
                prov.pre_to_kernels[inst.name] = found
                prov.how[inst.name] = relation
                changed = True
    # A library call can compute ops it keeps no metadata of: cuBLAS folds a bias add and an
    # activation into its epilogue (``"epilogue":"BIAS_RELU"``), cuDNN a bias and activation
    # into a convolution. An op still unmatched (typically inside a nested jit like
    # ``jax.nn.relu``, so no neighbour reaches it) goes to the library call(s) of its nearest
    # enclosing name scope: ``jit(model)/dense1/jit(relu)/max`` -> the call made for
    # ``jit(model)/dense1/dot_general``.
    lib_scopes: dict[str, list[str]] = {}
    for k in post_kernels:
        if k.route == "library" and k.opcode == "custom-call":
            for on in k.op_names:
                lst = lib_scopes.setdefault(on.rsplit("/", 1)[0], [])
                if k.name not in lst:
                    lst.append(k.name)
    if lib_scopes:
        for inst, key in walked:
            if inst.name in prov.pre_to_kernels or key is None:
                continue
            parts = key[0].split("/")
            for j in range(len(parts) - 1, 0, -1):
                found = lib_scopes.get("/".join(parts[:j]))
                if found:
                    prov.pre_to_kernels[inst.name] = list(found)
                    prov.how[inst.name] = "scope"
                    break
    _mark_epilogues(prov, post_kernels, ops, users, param_of_call, operands_through_calls)
    prov.unmapped = [i.name for i in ops if i.name not in prov.pre_to_kernels]
    for pre_name, kns in prov.pre_to_kernels.items():
        for kn in kns:
            prov.kernel_to_pre.setdefault(kn, []).append(pre_name)
    return prov


# matches by the op's own name or structure: the op the library call was made for
_OWN = frozenset({"metadata", "op_name", "shape"})


def _mark_epilogues(prov: Provenance, post_kernels: list[Kernel], ops: list[Instruction], users: dict,
                    param_of_call: dict, operands_of) -> None:
    """Ops a library call computes in its epilogue: the call keeps only its main op's metadata
    (the ``dot``), so the bias add and the ReLU it absorbed were matched through their neighbours
    ("operand", "user", "scope"). For a call with an epilogue (``Kernel.epilogue``), the ops
    matched to it that are reached from its main op through its users (seeing through nested
    jits' calls), and the ops matched to it that feed those (the bias's broadcast), are its
    epilogue: ``how`` becomes "epilogue" where the call is the only kernel they ended in."""
    # (a library fusion keeps its ops' metadata: they are matched as any fusion's are)
    with_epilogue = {k.name for k in post_kernels if k.epilogue and k.opcode == "custom-call"}
    if not with_epilogue:
        return
    by_name = {i.name: i for i in ops}
    into_call: dict[str, list[str]] = {}  # a value -> the nested jits' parameters it is passed as
    for pname, args in param_of_call.items():
        for a in args:
            into_call.setdefault(a.name, []).append(pname)
    params = set(param_of_call)

    def users_of(name: str) -> list[str]:
        out = list(into_call.get(name, ()))
        out.extend(u.name for u in users.get(name, ()) if u.opcode != "call")
        return out

    mapped: dict[str, set[str]] = {}
    for op, kns in prov.pre_to_kernels.items():
        for kn in kns:
            if kn in with_epilogue:
                mapped.setdefault(kn, set()).add(op)
    for kn, names in mapped.items():
        main = {n for n in names if prov.how.get(n) in _OWN}
        absorbed = names - main
        found: set[str] = set()
        todo = list(main)
        seen = set(todo)
        while todo:  # forward from the main op: its result's users done by the same call
            for u in users_of(todo.pop()):
                if u in seen:
                    continue
                seen.add(u)
                if u in params or u in absorbed:
                    todo.append(u)
                    if u in absorbed:
                        found.add(u)
        todo = list(found)
        while todo:  # and what feeds them, done by the same call (the bias's broadcast)
            inst = by_name.get(todo.pop())
            for o in (operands_of(inst) if inst is not None else ()):
                if o.name in absorbed and o.name not in found:
                    found.add(o.name)
                    todo.append(o.name)
        for n in found:
            if all(k in with_epilogue for k in prov.pre_to_kernels[n]):
                prov.how[n] = "epilogue"


def prepare(pre: Module) -> None:
    """What mapping any optimized module onto ``pre`` reads of ``pre`` alone, made now (beside a
    compile, while XLA optimizes: docs/performance.md) and kept with the parsed module."""
    _pre_by_shape(pre, _pre_side(pre)[1])


def _pre_side(pre: Module) -> tuple:
    """``(walked, ops, users, param_of_call)`` of a module before optimization, made once per
    parsed module (it does not change): its compute ops with their keys (``walk_compute``),
    each op once, each op's users and each nested jit's parameters' arguments. A nested jit's
    computation is seen through its call: its parameter i stands for the call's operand i, and
    its root's users are the call's users (``jax.nn.relu`` inside a layer). Callers must not
    change what they get."""
    made = pre.__dict__.get("_provenance_pre")
    if made is not None:
        return made
    walked = walk_compute(pre)
    ops = list({i.name: i for i, _ in walked}.values())
    users: dict[str, list[Instruction]] = {}
    param_of_call: dict[str, list[Instruction]] = {}
    for comp in pre.computations:
        for inst in comp.instructions:
            for o in inst.operands:
                users.setdefault(o, []).append(inst)
    for comp in pre.computations:
        for inst in comp.instructions:
            if inst.opcode != "call":
                continue
            args = inst.operand_instructions()
            for cname in inst.called_computations:
                callee = pre.by_name.get(cname)
                if callee is None:
                    continue
                for pi in callee.instructions:
                    number = pi.operand_text.strip()
                    if pi.opcode == "parameter" and number.isdigit() and int(number) < len(args):
                        param_of_call.setdefault(pi.name, []).append(args[int(number)])
                if callee.root is not None:
                    users.setdefault(callee.root.name, []).extend(users.get(inst.name, []))
    made = pre.__dict__["_provenance_pre"] = (walked, ops, users, param_of_call)
    return made


def _pre_by_shape(pre: Module, ops: list[Instruction]) -> dict[tuple, list[Instruction]]:
    """The compute ops of ``pre`` by ``_structure_keys``, made the first time a kernel without
    metadata needs them (once per parsed module)."""
    made = pre.__dict__.get("_provenance_by_shape")
    if made is None:
        made = {}
        for inst in ops:
            if inst.opcode not in NOT_COMPUTE:
                for sk in _structure_keys(inst):
                    made.setdefault(sk, []).append(inst)
        pre.__dict__["_provenance_by_shape"] = made
    return made


_FAMILY = {"dot": "contraction", "convolution": "contraction", "reduce": "reduction", "reduce-window": "reduction"}


def _structure_keys(inst: Instruction) -> list[tuple]:
    """Keys to match an instruction without metadata: opcode and shape; for contractions and
    reductions also the work they do (XLA reshapes batched dots and turns reduces into
    reduce-windows, which changes the shape but not the FLOPs)."""
    try:
        leaves = inst.shape.leaves()
    except ShapeParseError:  # an unparseable shape matches only its own text
        return [(inst.opcode, inst.shape_text)]
    keys = [(inst.opcode,) + tuple((s.element_type, s.dimensions) for s in leaves)]
    fam = _FAMILY.get(inst.opcode)
    if fam and inst.computation is not None:
        try:
            keys.append((fam, instruction_flops(inst, inst.computation)))
        except (ShapeParseError, IndexError, KeyError, ValueError):  # a shape or dimension the text gets wrong: no FLOP key
            pass
    return keys


def _all_inside(module: Module, cname: str) -> list[Instruction]:
    comp = module.by_name.get(cname)
    if comp is None:
        return []
    out: list[Instruction] = []
    most = len(module.computations) + 1
    todo = [iter(comp.instructions)]  # iterative: nested fusions expanded in place
    while todo:
        inst = next(todo[-1], None)
        if inst is None:
            todo.pop()
            continue
        if inst.opcode in NO_KERNEL and inst.opcode != "constant":
            continue
        out.append(inst)
        if inst.opcode == "fusion":
            subs = [module.by_name[c] for c in inst.called_computations if c in module.by_name]
            if subs and len(todo) > 2 * most:
                raise call_cycle(module, subs[0].name)
            todo.extend(iter(s.instructions) for s in reversed(subs))
    return out
