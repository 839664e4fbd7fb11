"""XLA's fusion log: the lines XLA's fusion passes write about what they decide, when their
verbose logging is on for a compile (``analysis.compile.decisions`` turns it on and captures
it), read into ``Decision`` records. Pure: text in, records out.

- ``parse_log(text, module)`` keeps only the decisions made while the pipeline ran on
  ``module`` (XLA runs the fusion pipeline on scratch modules too, e.g. the Triton softmax
  rewriter's fallback check). ``LogParser`` is the same, fed one line at a time (the compile's
  log is read while XLA writes it).
- ``Decision`` is also what ``analysis.fusion_dump`` reads XLA:GPU's fusion process dump into;
  ``analysis.fusion_decisions`` maps the records onto the program.

The passes read (jax 0.10.2; docs/xla-findings.md has the lines):
CPU ``fusion`` (instruction_fusion.cc, cpu_instruction_fusion.cc) and ``dot-library-rewriter``
(library_rewriter.cc); GPU ``priority-fusion`` (priority_fusion.cc) and
``triton-gemm-rewriter`` (gemm_fusion.cc).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FUSED, NOT_FUSED, CREATED, MERGED = "fused", "not fused", "created fusion", "merged"
DECISIONS = (FUSED, NOT_FUSED, CREATED, MERGED)

# The log lines each capture asks for (TF_CPP_VMODULE style: source file stem -> verbosity).
VMODULES = {
    "cpu": {"instruction_fusion": 5, "cpu_instruction_fusion": 2, "library_rewriter": 4,
            "hlo_pass_pipeline": 1},
    "gpu": {"priority_fusion": 10, "gemm_fusion": 5, "instruction_fusion": 5,
            "hlo_pass_pipeline": 1},
}


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
    # producer in each decision about it): each distinct text is parsed once (docs/performance.md)
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

    def records_of(self, module: str) -> list[Decision] | None:
        """The records logged for ``module`` so far: the very list this parser appends to (a
        record's ``fusion`` may still be set by the line after it), or None before any."""
        return self._per_module.get(module)

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
