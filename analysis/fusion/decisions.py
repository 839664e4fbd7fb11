"""Fusion decisions: why XLA fused two ops, or did not, mapped onto the program, and read back.

XLA's fusion passes say what they decide in their log (``analysis.fusion.log``) and, on XLA:GPU,
in a fusion process dump (``analysis.fusion.gpu_dump``); both give ``Decision`` records, whose
reasons ``analysis.fusion.glossary`` explains. This module is pure:

- ``decisions_for_bundle(records, pre, provenance)`` maps each record's producer and consumer
  to pre-optimization ops (and, through provenance, to kernels), says how each side was matched,
  counts what it could not match, and checks every pre-optimization edge that crosses a kernel
  boundary for a decision. The result is the Bundle's ``fusion_decisions`` (docs/bundle.md);
  ``from_texts`` makes it from a compile's captured log and dumps.
- ``records_touching``, ``edge_notes`` and ``op_lines`` read a bundle's ``fusion_decisions``:
  the records about an op, one line per crossing edge, the lines the details panel shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis import linear_re
from analysis.fusion.gpu_dump import parse_fusion_dump
from analysis.fusion.log import CREATED, FUSED, MERGED, NOT_FUSED, Decision, LogInstr, LogParser, parse_instr
from analysis.hlo import Module
from analysis.program.provenance import walk_compute
from analysis.program.provenance import compute_ops
from analysis.hlo import parse_module

PLUMBING = frozenset({"parameter", "constant", "tuple", "get-tuple-element"})


@dataclass
class _Index:
    by_name: dict
    by_opname: dict
    by_opname_frame: dict
    fusions: dict  # fusion name at decision time -> pre-op names it holds
    library: dict = field(default_factory=dict)  # (op_name, frame) of a library fusion's start -> its ops
    # a fusion's members sorted, with how many there were (a fusion only grows): a fusion is
    # named by every record of its growth, and sorting it again each time was quadratic in it
    sorted_fusions: dict = field(default_factory=dict)
    op_name: dict = field(default_factory=dict)  # pre name -> its op_names as XLA prints them after inlining
    order: dict = field(default_factory=dict)  # pre name -> its place in the walk (program order)
    users: dict = field(default_factory=dict)  # pre name -> the compute ops reading it


def _index(pre: Module) -> _Index:
    by_name, by_opname, by_frame, op_names, order = {}, {}, {}, {}, {}
    for inst, key in walk_compute(pre):  # op_names composed through nested jits, as XLA prints them
        op_name = key[0] if key else inst.metadata.op_name
        first = inst.name not in by_name
        if first:
            by_name[inst.name] = inst
            order[inst.name] = len(order)
            op_names[inst.name] = {op_name}
        elif op_name in op_names[inst.name]:
            continue
        else:
            # a nested jit's op called from several places: XLA inlines a copy at each, named
            # with that place's op_name
            op_names[inst.name].add(op_name)
        if op_name:
            by_opname.setdefault(op_name, []).append(inst)
            fr = inst.metadata.stack_frame_id
            if fr is not None:
                by_frame.setdefault((op_name, str(fr)), []).append(inst)
    return _Index(by_name, by_opname, by_frame, {}, op_name=op_names, order=order, users=_users(pre))


_CLONE = linear_re.compile(r"^(.*?)(?:\.clone(?:\.\d+)?|\.0)$")  # a name from a log: RE2, linear in it


def _strip_clone(name: str) -> str | None:
    m = _CLONE.match(name) if "." in name else None
    return m.group(1) if m else None


def _bare(shape: str) -> str:
    """A shape without its layouts (``f32[8,8]{1,0}`` -> ``f32[8,8]``): the module before
    optimization and the fusion passes' module print layouts XLA had not yet assigned or had."""
    if "{" not in shape:
        return shape
    out, depth = [], 0
    for ch in shape:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


class _Graph:
    """What the fusion passes' lines printed of the module they ran on (``LogParser.instructions``:
    each instruction's text by the name it had then), read where the matching needs the ops
    around one: its operands, its users. Inside a while loop's body, a conditional's branches or
    ``pmap``'s computation XLA has cloned the computation, and the ops there carry names of its
    own (``not.2`` for the program's ``not.25``); only their op_name, opcode, shape and place in
    the graph say which op of the program each one is."""

    def __init__(self, known: dict[str, str] | None):
        self.known = known if known is not None else {}
        self._parsed: dict[str, LogInstr] = {}
        self.users: dict[str, list[str]] = {}
        self.groups: dict[tuple, list[str]] = {}  # (opcode, op_name, shape) -> the names
        self._sorted: dict[int, tuple] = {}
        self._indexed = 0  # how many of ``known`` are in ``users`` and ``groups``

    def instr(self, name: str) -> LogInstr | None:
        text = self.known.get(name)
        if text is None:
            return None
        got = self._parsed.get(text)
        if got is None:
            got = self._parsed[text] = parse_instr(text)
        return got

    def _catch_up(self) -> None:
        if self._indexed < len(self.known):
            names = list(self.known)
            for n in names[self._indexed:]:
                li = self.instr(n)
                if li is None:
                    continue
                for o in dict.fromkeys(li.operands):
                    self.users.setdefault(o, []).append(n)
                self.groups.setdefault((li.opcode, li.op_name, _bare(li.shape)), []).append(n)
            self._indexed = len(names)

    def users_of(self, name: str) -> list[str]:
        self._catch_up()
        return self.users.get(name, [])

    def rank(self, li: LogInstr) -> tuple[int, int]:
        """(its place, how many) among the log's instructions of its opcode, op_name and shape,
        in the order XLA named them: a computation XLA cloned is named afresh in its order, so
        this is its place among the ops written alike, as in the program."""
        self._catch_up()
        group = self.groups.get((li.opcode, li.op_name, _bare(li.shape)), [])
        if li.name not in group:
            return -1, len(group)
        got = self._sorted.get(id(group))
        if got is None or got[0] != len(group):
            got = self._sorted[id(group)] = (len(group), {n: i for i, n in enumerate(sorted(group, key=_naming))})
        return got[1][li.name], len(group)


def _naming(name: str) -> tuple[int, str]:
    """The order XLA gave names in: ``add`` before ``add.1`` before ``add.12``."""
    base, dot, n = name.rpartition(".")
    return (int(n), base) if dot and n.isdigit() and len(n) < 12 else (-1, name)


def _match(idx: _Index, li: LogInstr, graph: _Graph | None = None,
           mapped: dict | None = None) -> tuple[list[str], str]:
    """Pre-optimization ops an instruction of the log stands for, and how they were found:
    ``fusion`` (a fusion made earlier in the log: its members), ``name`` (the same name, opcode
    and op_name), ``renamed`` (a clone's ``.0`` / ``.clone`` suffix dropped), ``library`` (a
    YNNPACK fusion, by the metadata of the op it started from), ``op_name+frame`` / ``op_name``
    (the ops of the JAX operation whose metadata it carries: one op, or the few one JAX op
    lowered to), ``graph`` (one of many ops with that op_name and opcode, told apart by its
    shape and by the ops around it: see ``_by_graph``), ``operand`` (a bitcast XLA made: the op
    it reads, matched already). Nothing else is tried: the rest is
    counted as unmatched. ``mapped``: the log's names matched to one op so far (name -> (op, how)),
    which this adds to."""
    name, opcode, op_name, frame = li.name, li.opcode, li.op_name, li.frame
    members = idx.fusions.get(name)
    if members:
        got = idx.sorted_fusions.get(name)
        if got is None or got[0] != len(members):
            got = idx.sorted_fusions[name] = (len(members), sorted(members))
        return got[1], "fusion"
    if mapped is not None:
        got = mapped.get(name)
        if got is not None and (not opcode or idx.by_name[got[0]].opcode == opcode):
            return [got[0]], got[1]
    found, how = _find(idx, li, graph, mapped)
    if mapped is not None and len(found) == 1 and opcode:
        mapped[name] = (found[0], how)
    return found, how


def _find(idx: _Index, li: LogInstr, graph: _Graph | None, mapped: dict | None) -> tuple[list[str], str]:
    name, opcode, op_name, frame = li.name, li.opcode, li.op_name, li.frame

    def same_op(pre_name: str) -> bool:
        # the same name may be another op: XLA names the ops of a computation it cloned afresh
        theirs = idx.op_name.get(pre_name, ())
        return (not opcode or idx.by_name[pre_name].opcode == opcode) and \
            (not op_name or "" in theirs or op_name in theirs)

    if name in idx.by_name and same_op(name):
        return [name], "name"
    base = _strip_clone(name)
    if base and base in idx.by_name and same_op(base):
        return [base], "renamed"
    if opcode == "fusion" and op_name and (op_name, frame) in idx.library:
        return sorted(idx.library[(op_name, frame)]), "library"
    if op_name:
        for cands, how in ((idx.by_opname_frame.get((op_name, str(frame)), []) if frame is not None else [],
                            "op_name+frame"), (idx.by_opname.get(op_name, []), "op_name")):
            if not cands:
                continue
            same = [c for c in cands if c.opcode == opcode]
            if len(same) == 1:
                return [same[0].name], how
            if len(cands) <= 4:
                return sorted(c.name for c in cands), how
            if len(same) > 1 and graph is not None:
                return [_by_graph(idx, li, same, graph, mapped or {})], "graph"
    if opcode == "bitcast" and len(li.operands) == 1 and mapped:
        # a bitcast XLA made (of a reshape, with its operand's op_name) is that operand's value
        # in another shape: the program's op it reads
        got = mapped.get(li.operands[0])
        if got is not None:
            return [got[0]], "operand"
    return [], "unmatched"


def _by_graph(idx: _Index, li: LogInstr, same: list, graph: _Graph, mapped: dict) -> str:
    """The one of ``same`` (the program's ops with the log instruction's op_name and opcode)
    that it is: those of its shape, then those whose operands and users agree most with its own
    (an operand or user already matched counts 2 when it is the candidate's, one only known by
    its text 1 when an op of the candidate's has its opcode and op_name); where several agree
    as much (ops written alike on one line, in one place of the graph), the first in program
    order that no other name of the log took."""
    bare = _bare(li.shape) if li.shape else ""
    if bare:
        shaped = [c for c in same if _bare(c.shape_text) == bare]
        same = shaped or same
    label = idx.op_name

    def label_of(name: str):
        li2 = graph.instr(name)
        return (li2.opcode, li2.op_name) if li2 is not None and li2.opcode else None

    def pre_of(name: str) -> set[str]:
        members = idx.fusions.get(name)
        if members:
            return members
        got = mapped.get(name)
        return {got[0]} if got is not None else set()

    theirs_ops = [(pre_of(o), label_of(o)) for o in li.operands]
    theirs_users = [(pre_of(u), label_of(u)) for u in graph.users_of(li.name)]
    taken = {v[0] for v in mapped.values()}
    best: list = []
    top = -1
    for c in same:
        ops = c.operands
        users = idx.users.get(c.name, ())
        score = 0
        for side, mine in ((theirs_ops, ops), (theirs_users, users)):
            labels = None
            for pre, lab in side:
                if pre:
                    score += 2 * bool(pre.intersection(mine))
                elif lab is not None:
                    if labels is None:
                        labels = {(idx.by_name[m].opcode, n) for m in mine if m in idx.by_name
                                  for n in label.get(m, ())}
                    score += lab in labels
        if score > top:
            best, top = [c], score
        elif score == top:
            best.append(c)
    free = [c for c in best if c.name not in taken] or best
    if len(free) == 1:
        return free[0].name
    # ops alike in all that: matched by their place among those written alike, in the order XLA
    # named the log's and the program's order
    mine, n_log = graph.rank(li)
    alike = [c for c in same if _bare(c.shape_text) == bare] if bare else same
    order = {c.name: i for i, c in enumerate(sorted(alike, key=lambda c: idx.order.get(c.name, 0)))}
    if mine < 0 or not order:
        return min(free, key=lambda c: idx.order.get(c.name, 0)).name
    want = mine * (len(order) - 1) / (n_log - 1) if n_log > 1 else 0
    return min(free, key=lambda c: (abs(order.get(c.name, 0) - want), idx.order.get(c.name, 0))).name


class RecordMatcher:
    """The first half of ``decisions_for_bundle``, which reads the module before optimization
    alone: each record's producer and consumer matched to its ops (``_match``), in the records'
    order (a fusion's members are the ops of the records that grew it). Fed the records as the
    log is read (``feed``: beside a compile, while XLA still optimizes, docs/performance.md),
    it has them matched by the time the optimized module is there; ``decisions_for_bundle``
    then adds what needs that module (the kernels, the crossing edges)."""

    def __init__(self, pre: Module | None, dump_module: Module | None = None, known: dict | None = None):
        self.pre = pre
        self.idx = _index(pre) if pre is not None else _Index({}, {}, {}, {})
        self.users = self.idx.users
        self.graph = _Graph(known)  # the log's instruction texts (``LogParser.instructions``)
        self.dump_users = _users(dump_module, all_instructions=True) if dump_module is not None else {}
        self.records: list | None = None  # the list fed (a log parser's, which only grows)
        self._start()

    def _start(self) -> None:
        self.done = 0  # how many of the records are matched
        self.out: list[dict] = []
        self.unmatched = 0
        self.repeats = 0  # records dropped: XLA logged the same decision again
        self._seen: dict[tuple, int] = {}  # a record kept -> its place in ``out``
        self._lib_start = None
        self.idx.fusions.clear()
        self.idx.sorted_fusions.clear()
        self.idx.library.clear()
        self.mapped: dict[str, tuple[str, str]] = {}  # the log's names matched to one op: name -> (op, how)
        # an op told apart by the graph before the log was whole (``_by_graph`` reads the names
        # XLA gave the ops alike, and more of them come): matched again once it is
        self.provisional = False

    def feed(self, records: list, complete: bool = True) -> None:
        """Match the records not matched yet. While the log is still being read (``complete``
        False) the last one waits: a line after it may still name the fusion it made."""
        if self.records is not records:
            if self.records is not None:
                raise ValueError("a RecordMatcher follows one list of records")
            self.records = records
        if complete and self.provisional:
            self._start()
            self.graph = _Graph(self.graph.known)  # indexed afresh: a text read early may have changed
        upto = len(records) if complete else len(records) - 1
        idx, users, graph, mapped = self.idx, self.users, self.graph, self.mapped
        for r in records[self.done:upto]:
            if r.producer_opcode in PLUMBING or r.consumer_opcode in PLUMBING:
                continue  # a constant or parameter joining a kernel is no edge between two ops
            d = r.to_dict()
            # the consumer first: the fusion passes come to an op's users before it, so the
            # consumer is often matched already and tells which of several alike the producer is
            cons, how_c = (_match(idx, self._instr(r.consumer, r.consumer_opcode, r.consumer_op_name,
                                                   r.consumer_frame), graph, mapped)
                           if r.consumer else ([], ""))
            prod, how_p = _match(idx, self._instr(r.producer, r.producer_opcode, r.producer_op_name,
                                                  r.producer_frame), graph, mapped)
            if r.source == "dump" and r.decision == NOT_FUSED and not r.consumer:
                # the dump names only the producer: its users in the module priority fusion saw
                names = self.dump_users.get(r.producer, [])
                d["consumer"] = ", ".join(names)
                cons = sorted({n for u in names for n in _match(idx, LogInstr(u))[0]})
                how_c = "users" if cons else "unmatched"
            # "Skipping unsupported instruction" does not say on which side the op is: orient by the graph
            if r.reason == "Skipping unsupported instruction" and prod and cons and \
                    not any(c in users.get(p, ()) for p in prod for c in cons) and \
                    any(p in users.get(c, ()) for p in prod for c in cons):
                prod, cons, how_p, how_c = cons, prod, how_c, how_p
                d["producer"], d["consumer"] = d["consumer"], d["producer"]
            if r.pass_name == "dot-library-rewriter" and r.decision in (CREATED, FUSED):
                start = (r.consumer_op_name, r.consumer_frame) if r.decision == FUSED and \
                    r.reason.startswith("Up") else (r.producer_op_name, r.producer_frame)
                if r.decision == CREATED:
                    self._lib_start = start
                    idx.library[self._lib_start] = set(prod)
                elif idx.library:
                    idx.library[self._lib_start].update(prod if r.reason.startswith("Up") else cons)
            if r.decision in (FUSED, MERGED, CREATED) and r.fusion:
                members = idx.fusions.setdefault(r.fusion, set())
                members.update(prod)
                members.update(cons)
                if r.consumer in idx.fusions and r.consumer != r.fusion:
                    members.update(idx.fusions[r.consumer])
            # XLA logs a decision again each time it comes back to a consumer (a fusion that
            # grew keeps its name): one line says it, about the consumer as it was last seen
            seen = (r.pass_name, r.decision, d["producer"], d["consumer"], r.reason, r.fusion, tuple(prod))
            kept = self._seen.get(seen)
            if kept is not None:
                self.repeats += 1
                if cons:
                    k = self.out[kept]
                    k["consumer_pre"], k["how"]["consumer"] = cons, how_c
                    if not k["matched"] and prod:
                        k["matched"] = True
                        self.unmatched -= 1
                continue
            self._seen[seen] = len(self.out)
            d["producer_pre"], d["consumer_pre"] = prod, cons
            d["how"] = {"producer": how_p, "consumer": how_c}
            if not complete and "graph" in (how_p, how_c):
                self.provisional = True
            d["producer_kernels"] = d["consumer_kernels"] = None  # (the optimized module's: decisions_for_bundle)
            # no gloss per record: it is gloss(reason), and a big program logs tens of thousands of records
            if not prod or (r.consumer and not cons and r.decision != CREATED):
                self.unmatched += 1
                d["matched"] = False
            else:
                d["matched"] = True
            for k in ("producer_opcode", "consumer_opcode", "producer_op_name", "consumer_op_name",
                      "producer_frame", "consumer_frame"):
                d.pop(k)
            self.out.append(d)
        self.done = max(self.done, upto)

    def _instr(self, name: str, opcode: str, op_name: str, frame) -> LogInstr:
        """A record's side as the log printed it: its text where the log has it (its shape and
        operands too), else what the record carries."""
        li = self.graph.instr(name)
        if li is not None and li.opcode == opcode and li.op_name == op_name:
            return li
        return LogInstr(name, opcode, op_name, frame)


def decisions_for_bundle(records: list[Decision], pre: Module | None, provenance=None,
                         platform: str = "", source: str = "log", extra: dict | None = None,
                         dump_module: Module | None = None, matcher: RecordMatcher | None = None,
                         known: dict | None = None) -> dict:
    """The Bundle's ``fusion_decisions``: the records with their producer and consumer mapped
    to pre-optimization ops and kernels, the unmatched count, and the pre-optimization edges
    that cross a kernel boundary, each with the decisions about it (or counted as "no decision
    logged"). ``matcher``: a ``RecordMatcher`` of ``pre`` fed these very records so far (the
    rest are matched here); ``known``: the log's instruction texts by name (``LogParser.instructions``),
    which tell apart the ops of a loop's body."""
    p2k = dict(getattr(provenance, "pre_to_kernels", None) or {})
    if matcher is None or matcher.pre is not pre or matcher.records not in (None, records):
        matcher = RecordMatcher(pre, dump_module, known)
    matcher.feed(records)
    out_records, unmatched = matcher.out, matcher.unmatched
    memo: dict[tuple, list] = {}

    def kernels_of(names: list[str]) -> list[str]:
        # the same few op lists recur (a broadcast every layer reads is named by every layer's
        # records): each list's kernels are sorted once, and the records share that list
        key = tuple(names)
        got = memo.get(key)
        if got is None:
            got = memo[key] = sorted({k for n in names for k in p2k.get(n, ())})
        return got

    for d in out_records:
        d["producer_kernels"] = kernels_of(d["producer_pre"])
        d["consumer_kernels"] = kernels_of(d["consumer_pre"])
    edges = crossing_edges(pre, p2k) if pre is not None else []
    # the records naming both ends of each crossing edge (only those: a big program's records
    # name ten times more pairs than it has crossing edges)
    consumers_of: dict[str, set[str]] = {}
    for p, c in edges:
        consumers_of.setdefault(p, set()).add(c)
    by_edge: dict[tuple[str, str], list[int]] = {}
    reasons: dict[str, int] = {}
    for i, d in enumerate(out_records):
        for p in d["producer_pre"]:
            wanted = consumers_of.get(p)
            if wanted:
                for c in d["consumer_pre"]:
                    if c in wanted and p != c:
                        by_edge.setdefault((p, c), []).append(i)
        if d["reason"]:
            reasons[d["reason"]] = reasons.get(d["reason"], 0) + 1
    # the matched records by the ops they name on each side, for the edges no record names
    # both ends of (looked up, not scanned: a scan per edge grew with edges x records), and
    # only for those edges' ends
    lack_p = {p for p, c in edges if (p, c) not in by_edge}
    lack_c = {c for p, c in edges if (p, c) not in by_edge}
    by_producer: dict[str, list[int]] = {}
    by_consumer: dict[str, list[int]] = {}
    if lack_p:
        for i, d in enumerate(out_records):
            if d["matched"]:
                for n in dict.fromkeys(n for n in d["producer_pre"] if n in lack_p):
                    by_producer.setdefault(n, []).append(i)
                for n in dict.fromkeys(n for n in d["consumer_pre"] if n in lack_c):
                    by_consumer.setdefault(n, []).append(i)
    edge_rows = []
    for p, c in edges:
        ids, how = by_edge.get((p, c), []), "ops"
        if not ids:
            # a decision about the same two kernels that names one end of the edge (the other
            # end was folded away or renamed before the pass ran, e.g. a reshape that became a bitcast)
            pk, ck = set(p2k.get(p, [])), set(p2k.get(c, []))
            hit = {i for i in by_producer.get(p, ()) if ck.intersection(out_records[i]["consumer_kernels"])}
            hit.update(i for i in by_consumer.get(c, ()) if pk.intersection(out_records[i]["producer_kernels"]))
            ids = sorted(hit)
            how = "kernels" if ids else ""
        edge_rows.append({"producer": p, "consumer": c, "records": ids, "how": how})
    explained = sum(1 for e in edge_rows if e["records"])
    return {
        "platform": platform, "source": source, **(extra or {}),
        "records": out_records,
        "unmatched": unmatched,
        "reasons": reasons,
        "edges": edge_rows,
        "crossing_edges": len(edge_rows),
        "explained_edges": explained,
        "no_decision_logged": len(edge_rows) - explained,
    }


def _users(module: Module, all_instructions: bool = False) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    insts = [i for c in module.computations for i in c.instructions] if all_instructions else compute_ops(module)
    names = {i.name for i in insts}
    for inst in insts:
        for o in inst.operands:
            if o in names:
                out.setdefault(o, []).append(inst.name)
    return out


def crossing_edges(pre: Module, pre_to_kernels: dict) -> list[tuple[str, str]]:
    """Pre-optimization edges producer -> consumer between two compute ops that both reached a
    kernel and share none (the value crosses a kernel boundary through memory)."""
    ops = {i.name: i for i in compute_ops(pre)}
    out = []
    for inst in ops.values():
        ck = set(pre_to_kernels.get(inst.name, []))
        if not ck:
            continue
        for o in dict.fromkeys(inst.operands):
            if o not in ops or o == inst.name:
                continue
            pk = set(pre_to_kernels.get(o, []))
            if pk and not (pk & ck):
                out.append((o, inst.name))
    return out


# --- reading a bundle's decisions ----------------------------------------------------------

def records_touching(fd: dict | None, op: str) -> list[dict]:
    """The records whose producer or consumer is ``op`` (a pre-optimization op, a kernel, or a
    name as the log printed it)."""
    if not fd:
        return []
    out = []
    for r in fd.get("records", []):
        names = {r.get("producer"), r.get("consumer"), r.get("fusion"), *r.get("producer_pre", []),
                 *r.get("consumer_pre", []), *r.get("producer_kernels", []), *r.get("consumer_kernels", [])}
        if op in names:
            out.append(r)
    return out


def edge_notes(fd: dict | None) -> dict[tuple[str, str], str]:
    """For each pre-optimization edge that crosses a kernel boundary, one line: XLA's reason
    (the most telling decision about that pair: a refusal first) or "no decision logged"."""
    if not fd:
        return {}
    recs = fd.get("records", [])
    out = {}
    for e in fd.get("edges", []):
        rs = [recs[i] for i in e.get("records", []) if 0 <= i < len(recs)]
        refused = [r for r in rs if r.get("decision") == NOT_FUSED]
        pick = (refused or rs)
        if pick:
            r = pick[-1]
            out[(e["producer"], e["consumer"])] = f"{r['pass_name']}: {r['decision']} — {r['reason'] or '(no reason printed)'}"
        else:
            out[(e["producer"], e["consumer"])] = "no decision logged"
    return out


def op_lines(fd: dict | None, op: str, kernel_of: dict | None = None) -> list[str]:
    """"fused with X because ..." / "not fused with X because ..." lines for one op or kernel."""
    lines = []
    seen = set()
    for r in records_touching(fd, op):
        mine_p = op in (r.get("producer"), *r.get("producer_pre", []), *r.get("producer_kernels", []))
        other = r.get("consumer") if mine_p else r.get("producer")
        if r["decision"] == CREATED:
            text = f"{r['pass_name']}: started fusion {r.get('fusion') or ''} ({r['reason']})".replace("  ", " ")
        else:
            verb = "fused with" if r["decision"] in (FUSED, MERGED) else "not fused with"
            text = f"{verb} {other} because {r['reason'] or 'XLA printed no reason'} ({r['pass_name']})"
        if text not in seen:
            seen.add(text)
            lines.append(text)
    return lines


def from_texts(pre: Module | None, post: Module | None, provenance, platform: str, log: str | None,
               dumps: list[str], extra: dict | None = None, parsed: LogParser | None = None,
               matcher: RecordMatcher | None = None) -> dict | None:
    """A captured log and/or fusion process dumps -> a bundle's ``fusion_decisions`` (``None``
    when there is neither). With both, the log's records are kept (they carry metadata, which
    matches better) and the dump adds the producers priority fusion found ineligible. ``parsed``:
    the whole log already read by a ``LogParser`` (then ``log`` is only whether there was one);
    ``matcher``: its records matched to ``pre`` as they were read (``RecordMatcher``)."""
    if log is None and parsed is None and not dumps:
        return None
    module = post.name if post is not None else None
    if parsed is None:
        parsed = LogParser()
        for ln, raw in enumerate((log or "").splitlines(), 1):
            parsed.feed(raw, ln)
    records, facts = parsed.result(module)
    known = parsed.instructions(facts["module"])
    source = "log"
    dump_module = None
    if dumps:
        recs, text = parse_fusion_dump(dumps[0])
        if text:
            try:
                dump_module = parse_module(text)
            except Exception:  # noqa: BLE001 - the dump's module only names users; not required
                dump_module = None
        if parsed.fed:
            records = records + [r for r in recs if r.decision == NOT_FUSED]
            source = "log+dump"
        else:
            records, source = recs, "dump"
    return decisions_for_bundle(records, pre, provenance, platform=platform, source=source,
                                extra={**(extra or {}), **facts}, dump_module=dump_module,
                                matcher=matcher if source == "log" else None, known=known)
