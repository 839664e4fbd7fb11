"""Fusion decisions: why XLA fused two ops, or did not, in XLA's own words.

XLA's fusion passes say what they decide when their verbose logging is on for a compile
(``analysis.compile.decisions`` turns it on and captures it); XLA:GPU's priority fusion also
writes a *fusion process dump* (``*.priority_fusion_dump.txt``) when dumping is on for that pass.
This module is pure: text in, records out.

- ``parse_log(text, module)`` reads the log lines of the passes below into ``Decision`` records,
  keeping only those made while the pipeline ran on ``module`` (XLA runs the fusion pipeline on
  scratch modules too, e.g. the Triton softmax rewriter's fallback check). ``LogParser`` is the
  same, fed one line at a time (the compile's log is read while XLA writes it).
- ``parse_fusion_dump(text)`` reads a fusion process dump into the same records.
- ``decisions_for_bundle(records, pre, provenance)`` maps each record's producer and consumer
  to pre-optimization ops (and, through provenance, to kernels), says how each side was matched,
  counts what it could not match, and checks every pre-optimization edge that crosses a kernel
  boundary for a decision. The result is the Bundle's ``fusion_decisions`` (docs/bundle.md).
- ``GLOSSES``: a short plain-language gloss for each reason XLA printed here.

The passes read (jax 0.10.2; docs/xla-findings.md has the lines):
CPU ``fusion`` (instruction_fusion.cc, cpu_instruction_fusion.cc) and ``dot-library-rewriter``
(library_rewriter.cc); GPU ``priority-fusion`` (priority_fusion.cc) and
``triton-gemm-rewriter`` (gemm_fusion.cc).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from analysis.hlo import Module

FUSED, NOT_FUSED, CREATED, MERGED = "fused", "not fused", "created fusion", "merged"
DECISIONS = (FUSED, NOT_FUSED, CREATED, MERGED)
PLUMBING = frozenset({"parameter", "constant", "tuple", "get-tuple-element"})

# The log lines each capture asks for (TF_CPP_VMODULE style: source file stem -> verbosity).
VMODULES = {
    "cpu": {"instruction_fusion": 5, "cpu_instruction_fusion": 2, "library_rewriter": 4,
            "hlo_pass_pipeline": 1},
    "gpu": {"priority_fusion": 10, "gemm_fusion": 5, "instruction_fusion": 5,
            "hlo_pass_pipeline": 1},
}

# Each reason XLA printed in the compiles we checked, in XLA's words (the string literal in
# XLA's source, found in the installed jaxlib / CUDA plugin binary), with a gloss for a student.
GLOSSES: dict[str, str] = {
    # XLA:CPU loop fusion (cpu_instruction_fusion.cc, instruction_fusion.cc)
    "Fusing: consumer is elementwise or fusible.":
        "the consumer is a simple per-element op, so the producer's value can be computed inside "
        "the same loop",
    "Fusing: consumer is a fusion node.":
        "the consumer is already a loop fusion; the producer joins it",
    "Fusion OK: Can create output fusion.":
        "a matrix-vector dot feeding an add: the add is done as the dot writes its output",
    "Fusing small matrix-vector product.":
        "a small matrix-vector product is computed inline rather than called out to a GEMM library",
    "Fusion is not profitable.":
        "the producer is expensive (exp, tanh, rsqrt, a reduce, ...) and the consumer reads each of "
        "its elements several times (a broadcast, a reduce): fusing would recompute it each time",
    "operand can not be duplicated":
        "before fusing, XLA marks the producers it must not copy into a consumer (work that "
        "would be repeated for several users, or a library fusion such as YNNPACK's); this is one",
    "Don't fuse instructions from custom fusions/calls":
        "the consumer sits inside a library (YNNPACK) fusion or custom call, which loop fusion "
        "leaves alone",
    "Don't fuse non-scalar constants.":
        "a constant array stays in memory instead of being baked into the loop",
    "Bailing because producer can be output-fused into some operand.":
        "the producer is an add that a matrix-vector dot will absorb as its output; it is kept "
        "for that",
    "Producer is not loop-fusible.":
        "the producer (a dot, convolution, custom call, sort, ...) is not something a loop fusion "
        "can compute element by element",
    "Concatenate fusion is inefficient.":
        "a concatenate with many inputs or on the minor dimension runs faster as a plain copy",
    "Too many reductions inside single fusion.":
        "the fusion already holds several reductions; more would make the generated code too big",
    "Not fusing: insufficient non-constant nodes.":
        "a constant next to one op is not worth a fusion of its own",
    "Not fusing: producer is itself a fusion node.":
        "the producer is already a fusion; XLA:CPU does not fuse a fusion into its consumer",
    "Code duplication too high":
        "fusing would repeat the producer's computation too many times inside the fusion",
    "Not fusing: not found a fusible case":
        "the consumer is neither elementwise nor a loop fusion, so nothing can be fused into it",
    "not fusing into the output of the root instruction":
        "the producer is the program's result, which must be written to memory anyway",
    "expensive producer would be duplicated":
        "the producer has several users and is expensive; fusing would compute it once per user",
    "fusion pass cannot duplicate":
        "the producer has several users and this pass may not duplicate work",
    "multi-output fusion creates a cycle":
        "fusing would make the fusion both feed and wait for another op",
    "Operand is not fusible":
        "the operand (a parameter, a library call, ...) cannot be computed inside another kernel",
    # XLA:CPU library (YNNPACK) fusion (library_rewriter.cc)
    "Starting a fusion with":
        "a dot (or reduction) that the YNNPACK library can run starts a library fusion",
    "Fusing with":
        "a neighbour YNNPACK supports joins the library fusion",
    "Skipping unsupported instruction":
        "YNNPACK cannot run this op, so it stays out of the library call",
    # XLA:GPU priority fusion (priority_fusion.cc, gpu_fusible.cc)
    "chosen by the cost model":
        "priority fusion fused this pair because its cost model estimated the fused kernel faster",
    "the producer is not fusible":
        "the producer (a library call, a Triton GEMM, ...) cannot be fused into its consumer",
    "the consumer is not fusible":
        "the consumer cannot take a producer inside it",
    "not fusing because there are only bitcast users":
        "its only users are bitcasts (free reinterpretations); there is nothing to fuse into",
    "No users to fuse":
        "nothing uses this value, so there is nothing to fuse it into",
    "fusion into output of a reduce fusion would create a loop fusion":
        "the reduction's output is smaller than its input; fusing a consumer after it would "
        "turn the reduction kernel into a different (loop) kind",
    # XLA:GPU Triton GEMM rewriter (gemm_fusion.cc)
    "Not obviously profitable to fuse as input.":
        "the op feeding the matmul is not cheap enough to recompute inside the GEMM's tiles",
    "Slicing of fragmented dimension.":
        "slicing a dimension the GEMM has split into pieces cannot be expressed in its tiling",
    "Reductions are not fused yet.":
        "the Triton GEMM does not take a reduction (e.g. split-K's partial-sum reduce) after it",
    "Unimplemented instruction.":
        "the Triton GEMM emitter has no code for this op, so it stays outside the GEMM",
    "Unsupported opcode.":
        "the Triton GEMM emitter does not support this kind of op inside a GEMM fusion",
    "Triton GEMM created":
        "the matmul becomes a Triton GEMM fusion; cheap ops around it may join",
}

# Reasons whose verbatim text carries instance detail: gloss them by this prefix.
_GLOSS_PREFIXES = ("Reductions are not fused", "Starting a fusion with", "Fusing with",
                   "Skipping unsupported instruction")


def gloss(reason: str) -> str:
    """The plain-language gloss of a reason XLA printed ("" when none is known)."""
    r = re.sub(r"^(?:Up|Down): ", "", (reason or "").strip())
    if r in GLOSSES:
        return GLOSSES[r]
    for p in _GLOSS_PREFIXES:
        if r.startswith(p):
            return GLOSSES.get(p, GLOSSES.get(r, ""))
    return ""


@dataclass(frozen=True)
class LogInstr:
    """An instruction as a log line prints it (``%name = shape opcode(...), metadata=...``)."""

    name: str
    opcode: str = ""
    op_name: str = ""
    frame: int | None = None


@dataclass
class Decision:
    """One decision of a fusion pass about a producer -> consumer pair."""

    pass_name: str
    decision: str  # one of DECISIONS
    producer: str
    consumer: str
    reason: str = ""
    fusion: str | None = None
    producer_opcode: str = ""
    consumer_opcode: str = ""
    producer_op_name: str = ""
    consumer_op_name: str = ""
    producer_frame: int | None = None
    consumer_frame: int | None = None
    line: int = 0
    source: str = "log"

    def to_dict(self) -> dict:
        return dict(self.__dict__)  # every field is a scalar: asdict's deep copy only cost time


# --- the log --------------------------------------------------------------------------------

# XLA's log prefix (severity, date, time, thread, file:line); the message is the rest of the line
# (``line[m.end():]``). Also how the capture sorts the log's lines (``analysis.compile.decisions``).
LOG_PREFIX = re.compile(r"[IWEF]\d{4} [\d:.]+\s+\d+ (?P<file>[\w.\-]+\.(?:cc|h)):\d+\] ")
_INSTR = re.compile(r"^\s*%?(?P<name>[\w.\-]+) = (?P<rest>.*)$")
_OPCODE = re.compile(r"(?:^|[\s)}\]])(?P<op>[a-z][a-z0-9\-]*)\(")
_OPNAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_FRAME = re.compile(r"stack_frame_id=(\d+)")
_INTO = re.compile(r" into %?(?=[\w.\-]+ = )")


def parse_instr(text: str) -> LogInstr:
    """Name, opcode, op_name and stack frame of an instruction's text (or of a bare name)."""
    text = text.strip()
    m = _INSTR.match(text)
    if not m:
        return LogInstr(text.lstrip("%").strip("'"))
    rest = m.group("rest")
    op = _OPCODE.search(rest)
    # searched from where ``find`` sees them first: the metadata is at the end of a long line
    i = rest.find('op_name="')
    on = _OPNAME.search(rest, i) if i >= 0 else None
    i = rest.find("stack_frame_id=")
    fr = _FRAME.search(rest, i) if i >= 0 else None
    return LogInstr(m.group("name"), op.group("op") if op else "",
                    on.group(1).replace("\\'", "'") if on else "", int(fr.group(1)) if fr else None)


def _split_into(msg: str, st: "_State") -> tuple[LogInstr, LogInstr] | None:
    m = _INTO.search(msg)
    if not m:
        return None
    return st.instr(msg[:m.start()]), st.instr(msg[m.end():])


def _rec(pass_name, decision, p: LogInstr, c: LogInstr, reason="", fusion=None, line=0) -> Decision:
    return Decision(pass_name, decision, p.name, c.name, reason, fusion, p.opcode, c.opcode,
                    p.op_name, c.op_name, p.frame, c.frame, line)


@dataclass
class _State:
    module: str = ""
    pipeline: str = ""
    pass_name: str = ""
    # "Considering fusion of: C with operand P": C's text, parsed when a decision names it (half
    # of the consumers considered never are)
    consumer: str | None = None
    allow: str = ""  # the reason ShouldFuse gave for the next "Fusing P into C"
    library: LogInstr | None = None  # the centroid of the YNNPACK fusion being grown
    dot: LogInstr | None = None  # the dot the Triton GEMM rewriter is looking at
    seen: dict[str, LogInstr] = field(default_factory=dict)
    # A log prints the same instruction many times (a consumer once per operand considered, a
    # producer in each decision about it): at 48 layers 30,000 instruction texts, 12,000 distinct
    parsed: dict[str, LogInstr] = field(default_factory=dict)

    def instr(self, text: str) -> LogInstr:
        got = self.parsed.get(text)
        if got is None:
            got = self.parsed[text] = parse_instr(text)
        return got


def _pass(st: _State, default: str) -> str:
    return st.pass_name or default


class LogParser:
    """The log read line by line, as XLA writes it: ``feed`` each line with its number (the
    app feeds the lines while the compile runs, beside it), ``result`` once the log is closed.
    ``parse_log`` is the same over a whole text."""

    def __init__(self) -> None:
        self._per_module: dict[str, list[Decision]] = {}
        self._st = _State()
        self.lines = 0  # log lines (XLA's prefix)
        self.fed = 0  # any lines

    def feed(self, raw: str, ln: int) -> None:
        self.fed += 1
        m = LOG_PREFIX.match(raw)
        if m:
            self._message(m.group("file"), raw[m.end():], ln)

    def feed_message(self, f: str, msg: str, ln: int) -> None:
        """A log line already split at its prefix (``LOG_PREFIX``): the file that logged it and the
        message (the follower splits each line once, to sort it and to parse it)."""
        self.fed += 1
        self._message(f, msg, ln)

    def _message(self, f: str, msg: str, ln: int) -> None:
        self.lines += 1
        st = self._st
        out = self._per_module.get(st.module)
        if out is None:
            out = self._per_module[st.module] = []
        if f == "hlo_pass_pipeline.cc":
            mm = re.match(r"Running HLO pass pipeline on module (\S+): (.*)$", msg)
            if mm:
                st.module, st.pipeline, st.pass_name = mm.group(1), mm.group(2), ""
                return
            mm = re.match(r"\s*HLO pass (\S+)$", msg)
            if mm:
                st.pass_name = mm.group(1)
            return
        if f in ("instruction_fusion.cc", "cpu_instruction_fusion.cc"):
            _cpu_fusion_line(msg, st, out, ln)
        elif f == "library_rewriter.cc":
            _library_line(msg, st, out, ln)
        elif f == "priority_fusion.cc":
            _priority_line(msg, st, out, ln)
        elif f == "gemm_fusion.cc":
            _gemm_line(msg, st, out, ln)

    def result(self, module: str | None = None) -> tuple[list[Decision], dict]:
        counts = {k: len(v) for k, v in self._per_module.items() if v}
        if module is None or module not in counts:
            module = max(counts, key=counts.get) if counts else (module or "")
        return self._per_module.get(module, []), {"log_lines": self.lines, "modules": counts, "module": module}


def parse_log(text: str, module: str | None = None) -> tuple[list[Decision], dict]:
    """Decisions in a captured XLA log; and facts about the log (lines, modules seen, which
    module was kept). Only decisions made while the pipeline ran on ``module`` are kept (when
    ``None``: the module the most fusion lines were logged for)."""
    parser = LogParser()
    for ln, raw in enumerate(text.splitlines(), 1):
        parser.feed(raw, ln)
    return parser.result(module)


_CPU_UNUSED = ("Considering for fusion: ", "Evaluating fusion: ")  # a third of the lines; no decision in them


def _cpu_fusion_line(msg: str, st: _State, out: list, ln: int) -> None:
    if msg.startswith(_CPU_UNUSED):
        return
    if msg.startswith("Considering fusion of: "):
        body = msg[len("Considering fusion of: "):]
        i = body.rfind(" with operand ")
        st.consumer = body[:i] if i >= 0 else body
        st.allow = ""
        return
    if msg.startswith(("Fusing: ", "Fusion OK: ", "Fusing small matrix-vector")):
        st.allow = msg.strip()
        return
    if msg.startswith("Operand (") and msg.endswith(") is not fusible"):
        p = st.instr(msg[len("Operand ("):-len(") is not fusible")])
        if st.consumer is not None and p.opcode not in ("parameter", "constant", ""):
            out.append(_rec(_pass(st, "fusion"), NOT_FUSED, p, st.instr(st.consumer), "Operand is not fusible",
                            line=ln))
        return
    if msg.startswith("not fusing operand "):
        body = msg[len("not fusing operand "):]
        i = body.rfind(" because ")
        p = st.instr(body[:i] if i >= 0 else body)
        reason = body[i + len(" because "):].strip() if i >= 0 else ""
        if st.consumer is not None:
            out.append(_rec(_pass(st, "fusion"), NOT_FUSED, p, st.instr(st.consumer), reason, line=ln))
        return
    for prefix, kind in (("Fusing ", FUSED), ("Multi-output fusing ", FUSED)):
        if msg.startswith(prefix) and not msg.startswith("Fusing: "):
            pc = _split_into(msg[len(prefix):], st)
            if pc:
                p, c = pc
                fusion = c.name if c.opcode == "fusion" else None
                out.append(_rec(_pass(st, "fusion"), kind, p, c, st.allow, fusion, ln))
                st.allow = ""
            return
    if msg.lstrip().startswith("created new fusion: "):  # lstrip copies only an indented line
        f = st.instr(msg.strip()[len("created new fusion: "):])
        if out and out[-1].decision == FUSED and out[-1].fusion is None:
            out[-1].fusion = f.name


def _library_line(msg: str, st: _State, out: list, ln: int) -> None:
    pass_name = _pass(st, "dot-library-rewriter")
    if msg.startswith("Starting a fusion with: "):
        st.library = st.instr(msg[len("Starting a fusion with: "):])
        out.append(_rec(pass_name, CREATED, st.library, st.library, "Starting a fusion with", line=ln))
        return
    mm = re.match(r"\s*(Up|Down): Fusing with: (.*)$", msg)
    if mm and st.library is not None:
        other = st.instr(mm.group(2))
        p, c = (other, st.library) if mm.group(1) == "Up" else (st.library, other)
        kind = MERGED if other.opcode == "fusion" else FUSED
        out.append(_rec(pass_name, kind, p, c, f"{mm.group(1)}: Fusing with", line=ln))
        return
    mm = re.match(r"\s*Skipping unsupported instruction: (.*)$", msg)
    if mm and st.library is not None:
        other = st.instr(mm.group(1))
        # The log does not say on which side; the mapping orients the pair by the graph.
        out.append(_rec(pass_name, NOT_FUSED, other, st.library, "Skipping unsupported instruction", line=ln))


def _priority_line(msg: str, st: _State, out: list, ln: int) -> None:
    pass_name = _pass(st, "priority-fusion")
    if msg.startswith("Fusing "):
        pc = _split_into(msg[len("Fusing "):], st)
        if pc:
            p, c = pc
            st.seen[p.name], st.seen[c.name] = p, c
            out.append(_rec(pass_name, FUSED, p, c, "chosen by the cost model",
                            c.name if c.opcode == "fusion" else None, ln))
        return
    if msg.strip().startswith("created new fusion: "):
        f = st.instr(msg.strip()[len("created new fusion: "):])
        st.seen[f.name] = f
        if out and out[-1].decision == FUSED and out[-1].fusion is None:
            out[-1].fusion = f.name
        return
    mm = re.match(r"Cannot fuse (\S+) with (\S+), because: (.*)$", msg)
    if mm:
        p = st.seen.get(mm.group(1), LogInstr(mm.group(1)))
        c = st.seen.get(mm.group(2), LogInstr(mm.group(2)))
        out.append(_rec(pass_name, NOT_FUSED, p, c, mm.group(3).strip(), line=ln))


def _gemm_line(msg: str, st: _State, out: list, ln: int) -> None:
    pass_name = _pass(st, "triton-gemm-rewriter")
    i = _INSTR.match(msg)
    if i and not msg.startswith(("Not fusing", "Fusing")):
        li = st.instr(msg)
        if li.opcode == "dot":
            st.dot = li
        return
    mm = re.match(r"Not fusing (.*) to the (output|input) due to the decision: (.*)$", msg)
    if mm and st.dot is not None:
        other = st.instr(mm.group(1))
        # Seen here: "to the output" names an op feeding the dot, "to the input" one after it.
        p, c = (other, st.dot) if mm.group(2) == "output" else (st.dot, other)
        out.append(_rec(pass_name, NOT_FUSED, p, c, mm.group(3).strip(), line=ln))
        return
    if msg.startswith("Fusing "):
        d = st.instr(msg[len("Fusing "):])
        out.append(_rec(pass_name, CREATED, d, d, "Triton GEMM created", f"gemm_fusion_{d.name}", ln))


# --- the fusion process dump (XLA:GPU priority fusion) --------------------------------------

_STEP = re.compile(r"^fusion_steps \{\n(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r'^\s*(\w+): (?:"((?:[^"\\]|\\.)*)"|(\S+))', re.M)


def parse_fusion_dump(text: str) -> tuple[list[Decision], str | None]:
    """Decisions of a ``*.priority_fusion_dump.txt`` and its ``hlo_module_before_fusion`` text
    (``None`` when absent). ``fusion`` steps become "fused" (the new fusion's name), ``producer_ineligible``
    steps "not fused" with the reason, consumers left empty (the users come from the module)."""
    out: list[Decision] = []
    for n, m in enumerate(_STEP.finditer(text), 1):
        body = m.group(1)
        kind = re.match(r"\s*(\w+) \{", body)
        if not kind:
            continue
        fields: dict[str, list[str]] = {}
        for f in _FIELD.finditer(body):
            fields.setdefault(f.group(1), []).append(f.group(2) if f.group(2) is not None else f.group(3))
        first = lambda k: (fields.get(k) or [""])[0]  # noqa: E731
        if kind.group(1) == "fusion":
            d = Decision("priority-fusion", FUSED, first("producer_name"), first("consumer_name"),
                         "chosen by the cost model", first("fusion_name") or None, line=n, source="dump")
            out.append(d)
        elif kind.group(1) == "producer_ineligible":
            out.append(Decision("priority-fusion", NOT_FUSED, first("producer_name"), "",
                                first("reason"), line=n, source="dump"))
    before = re.search(r'^hlo_module_before_fusion: "((?:[^"\\]|\\.)*)"', text, re.M)
    module_text = None
    if before:
        module_text = before.group(1).encode("utf-8").decode("unicode_escape")
    return out, module_text


# --- mapping to the program ----------------------------------------------------------------

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


def _index(pre: Module) -> _Index:
    from analysis.provenance import _walk_compute

    by_name, by_opname, by_frame = {}, {}, {}
    for inst, key in _walk_compute(pre):  # op_names composed through nested jits, as XLA prints them
        if inst.name in by_name:
            continue
        by_name[inst.name] = inst
        op_name = key[0] if key else inst.metadata.op_name
        if op_name:
            by_opname.setdefault(op_name, []).append(inst)
            fr = inst.metadata.stack_frame_id
            if fr is not None:
                by_frame.setdefault((op_name, str(fr)), []).append(inst)
    return _Index(by_name, by_opname, by_frame, {})


_CLONE = re.compile(r"^(.*?)(?:\.clone(?:\.\d+)?|\.0)$")


def _strip_clone(name: str) -> str | None:
    m = _CLONE.match(name)
    return m.group(1) if m else None


def _match(idx: _Index, name: str, opcode: str, op_name: str, frame: int | None) -> tuple[list[str], str]:
    """Pre-optimization ops an instruction of the log stands for, and how they were found:
    ``fusion`` (a fusion made earlier in the log: its members), ``name`` (the same name and
    opcode), ``renamed`` (a clone's ``.0`` / ``.clone`` suffix dropped), ``library`` (a YNNPACK
    fusion, by the metadata of the op it started from), ``op_name+frame`` / ``op_name`` (the
    ops of the JAX operation whose metadata it carries: one op, or the few one JAX op lowered
    to). Nothing else is tried: the rest is counted as unmatched."""
    members = idx.fusions.get(name)
    if members:
        got = idx.sorted_fusions.get(name)
        if got is None or got[0] != len(members):
            got = idx.sorted_fusions[name] = (len(members), sorted(members))
        return got[1], "fusion"
    inst = idx.by_name.get(name)
    if inst is not None and (not opcode or inst.opcode == opcode):
        return [name], "name"
    base = _strip_clone(name)
    if base and base in idx.by_name and (not opcode or idx.by_name[base].opcode == opcode):
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
    return [], "unmatched"


def decisions_for_bundle(records: list[Decision], pre: Module | None, provenance=None,
                         platform: str = "", source: str = "log", extra: dict | None = None,
                         dump_module: Module | None = None) -> dict:
    """The Bundle's ``fusion_decisions``: the records with their producer and consumer mapped
    to pre-optimization ops and kernels, the unmatched count, and the pre-optimization edges
    that cross a kernel boundary, each with the decisions about it (or counted as "no decision
    logged")."""
    p2k = dict(getattr(provenance, "pre_to_kernels", None) or {})
    idx = _index(pre) if pre is not None else _Index({}, {}, {}, {})
    users = _users(pre) if pre is not None else {}
    dump_users = _users(dump_module, all_instructions=True) if dump_module is not None else {}
    out_records = []
    unmatched = 0
    lib_start = None
    memo: dict[tuple, list] = {}

    def kernels_of(names: list[str]) -> list[str]:
        # the same few op lists recur (a broadcast every layer reads is named by every layer's
        # records): each list's kernels are sorted once, and the records share that list
        key = tuple(names)
        got = memo.get(key)
        if got is None:
            got = memo[key] = sorted({k for n in names for k in p2k.get(n, ())})
        return got

    for r in records:
        if r.producer_opcode in PLUMBING or r.consumer_opcode in PLUMBING:
            continue  # a constant or parameter joining a kernel is no edge between two ops
        d = r.to_dict()
        prod, how_p = _match(idx, r.producer, r.producer_opcode, r.producer_op_name, r.producer_frame)
        cons, how_c = (_match(idx, r.consumer, r.consumer_opcode, r.consumer_op_name, r.consumer_frame)
                       if r.consumer else ([], ""))
        if r.source == "dump" and r.decision == NOT_FUSED and not r.consumer:
            # the dump names only the producer: its users in the module priority fusion saw
            names = dump_users.get(r.producer, [])
            d["consumer"] = ", ".join(names)
            cons = sorted({n for u in names for n in _match(idx, u, "", "", None)[0]})
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
                lib_start = start
                idx.library[lib_start] = set(prod)
            elif idx.library:
                idx.library[lib_start].update(prod if r.reason.startswith("Up") else cons)
        if r.decision in (FUSED, MERGED, CREATED) and r.fusion:
            members = idx.fusions.setdefault(r.fusion, set())
            members.update(prod)
            members.update(cons)
            if r.consumer in idx.fusions and r.consumer != r.fusion:
                members.update(idx.fusions[r.consumer])
        d["producer_pre"], d["consumer_pre"] = prod, cons
        d["how"] = {"producer": how_p, "consumer": how_c}
        d["producer_kernels"] = kernels_of(prod)
        d["consumer_kernels"] = kernels_of(cons)
        # no gloss per record: it is gloss(reason), and a 192-layer stack logs 40,000 records
        if not prod or (r.consumer and not cons and r.decision != CREATED):
            unmatched += 1
            d["matched"] = False
        else:
            d["matched"] = True
        for k in ("producer_opcode", "consumer_opcode", "producer_op_name", "consumer_op_name",
                  "producer_frame", "consumer_frame"):
            d.pop(k)
        out_records.append(d)
    edges = crossing_edges(pre, p2k) if pre is not None else []
    by_edge: dict[tuple[str, str], list[int]] = {}
    for i, d in enumerate(out_records):
        for p in d["producer_pre"]:
            for c in d["consumer_pre"]:
                if p != c:
                    by_edge.setdefault((p, c), []).append(i)
    # the matched records by the ops they name on each side, for the edges no record names
    # both ends of (looked up, not scanned: a scan per edge grew with edges x records)
    by_producer: dict[str, list[int]] = {}
    by_consumer: dict[str, list[int]] = {}
    for i, d in enumerate(out_records):
        if d["matched"]:
            for n in dict.fromkeys(d["producer_pre"]):
                by_producer.setdefault(n, []).append(i)
            for n in dict.fromkeys(d["consumer_pre"]):
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
    reasons: dict[str, int] = {}
    for d in out_records:
        if d["reason"]:
            reasons[d["reason"]] = reasons.get(d["reason"], 0) + 1
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
    from analysis.provenance import compute_ops

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
    from analysis.provenance import compute_ops

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
               dumps: list[str], extra: dict | None = None, parsed: LogParser | None = None) -> dict | None:
    """A captured log and/or fusion process dumps -> a bundle's ``fusion_decisions`` (``None``
    when there is neither). With both, the log's records are kept (they carry metadata, which
    matches better) and the dump adds the producers priority fusion found ineligible. ``parsed``:
    the whole log already read by a ``LogParser`` (then ``log`` is only whether there was one)."""
    if log is None and parsed is None and not dumps:
        return None
    from analysis.hlo import parse_module

    module = post.name if post is not None else None
    records, facts = parsed.result(module) if parsed is not None else parse_log(log or "", module)
    source = "log"
    dump_module = None
    if dumps:
        recs, text = parse_fusion_dump(dumps[0])
        if text:
            try:
                dump_module = parse_module(text)
            except Exception:  # noqa: BLE001 - the dump's module only names users; not required
                dump_module = None
        if (parsed.fed if parsed is not None else log):
            records = records + [r for r in recs if r.decision == NOT_FUSED]
            source = "log+dump"
        else:
            records, source = recs, "dump"
    return decisions_for_bundle(records, pre, provenance, platform=platform, source=source,
                                extra={**(extra or {}), **facts}, dump_module=dump_module)
