"""XLA's fusion log: the lines XLA's fusion passes write about what they decide, when their
verbose logging is on for a compile (``analysis.compile.decisions`` turns it on and captures
it), read into ``Decision`` records. Pure: text in, records out.

- ``parse_log(text, module)`` keeps only the decisions made while the pipeline ran on
  ``module`` (XLA runs the fusion pipeline on scratch modules too, e.g. the Triton softmax
  rewriter's fallback check). ``LogParser`` is the same, fed one line at a time (the compile's
  log is read while XLA writes it).
- ``Decision`` is also what ``analysis.fusion.gpu_dump`` reads XLA:GPU's fusion process dump into;
  ``analysis.fusion.decisions`` maps the records onto the program.

The passes read (jax 0.10.2; docs/xla-findings.md has the lines):
CPU ``fusion`` (instruction_fusion.cc, cpu_instruction_fusion.cc) and ``dot-library-rewriter``
(library_rewriter.cc); GPU ``priority-fusion`` (priority_fusion.cc) and
``triton-gemm-rewriter`` (gemm_fusion.cc).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis import linear_re

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
    shape: str = ""  # as printed, layout and all (``f32[8]{0}``)
    operands: tuple[str, ...] = ()  # the names its operand list gives, in order


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
# A log may be a user's upload: RE2 patterns only (``analysis.linear_re``), a message tried against
# one only where a cheap test finds the pattern's words. What every line or instruction meets (the
# prefix, an instruction's parts, "X into Y", a pass's name) is read with str methods, as its
# pattern reads it (tests/ground/test_linear_readers.py checks they agree); the pattern takes the rest.
LOG_PREFIX = linear_re.compile(r"[IWEF]\d{4} [\d:.]+\s+\d+ (?P<file>[\w.\-]+\.(?:cc|h)):\d+\] ")
_DIGITS = frozenset("0123456789")
_TIME_CHARS = frozenset("0123456789:.")
_BLANK_SET = frozenset(" \t\n\r\f")  # RE2's \s
_FILE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


_WHERE: dict[str, str] = {}  # ``file.cc:line`` -> its file, "" where it is not one (log_line)


def log_line(line: str) -> tuple[str, int] | None:
    """(the file that logged it, where its message starts) of an XLA log line, as ``LOG_PREFIX``
    matches it. Every line of a log comes here: the usual prefix (``I1205 12:30:09.643435    6209
    file.cc:303] ``) is read with str methods; a line that starts like one and is not read so goes
    to the pattern."""
    if line[:1] not in ("I", "W", "E", "F") or line[5:6] != " " or not _DIGITS.issuperset(line[1:5]):
        return None
    close = line.find("] ", 6)
    time, _, rest = line[6:close].partition(" ")
    thread, _, where = rest.lstrip(" ").partition(" ")
    # a log names few places (``file.cc:line``): each is checked once
    file = _WHERE.get(where)
    if file is None:
        file, _, number = where.partition(":")
        if not (number and _DIGITS.issuperset(number) and _FILE_CHARS.issuperset(file)
                and (file.endswith(".cc") and len(file) > 3 or file.endswith(".h") and len(file) > 2)):
            file = ""
        if len(_WHERE) < 4096 and len(where) <= 256:  # a made-up log's places do not grow it without bound
            _WHERE[where] = file
    if close > 0 and file and time and thread and _TIME_CHARS.issuperset(time) and _DIGITS.issuperset(thread):
        return file, close + 2
    m = LOG_PREFIX.match(line)
    return (m.group(1), m.end()) if m else None


INSTR = linear_re.compile(r"^\s*%?([\w.\-]+) = (.*)$")  # read by instr_parts
OPCODE = linear_re.compile(r"(?:^|[\s)}\]])([a-z][a-z0-9\-]*)\(")  # read by opcode_of
OPNAME = linear_re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
FRAME = linear_re.compile(r"stack_frame_id=(\d+)")
INTO = linear_re.compile(r" into %?([\w.\-]+ = )")  # read by into_of: the consumer's text starts at group 1
_PIPELINE = linear_re.compile(r"Running HLO pass pipeline on module (\S+): (.*)$")
PASS = linear_re.compile(r"\s*HLO pass (\S+)$")  # read by pass_run
_LIBRARY_FUSING = linear_re.compile(r"\s*(Up|Down): Fusing with: (.*)$")
_LIBRARY_SKIPPING = linear_re.compile(r"\s*Skipping unsupported instruction: (.*)$")
_CANNOT_FUSE = linear_re.compile(r"Cannot fuse (\S+) with (\S+), because: (.*)$")
_NOT_FUSING = linear_re.compile(r"Not fusing (.*) to the (output|input) due to the decision: (.*)$")


_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_OPCODE_CHARS = _LOWER | _DIGITS | frozenset("-")
_BEFORE_OPCODE = frozenset(" \t\n\r\f)}]")
_BRACKETS = frozenset("()[]{}")


def instr_parts(text: str) -> tuple[str, str] | None:
    """(name, rest) of ``%name = rest`` (``INSTR``), else None."""
    s = text.lstrip(" \t\n\r\f")
    if s[:1] == "%":
        s = s[1:]
    i = s.find(" = ")
    if i <= 0 or not _FILE_CHARS.issuperset(s[:i]) or "\n" in s:
        return None
    return s[:i], s[i + 3:]


def opcode_of(rest: str) -> str:
    """``OPCODE``'s op: the first word of lowercase letters, digits and ``-`` that starts with a
    letter, follows a blank or a closing bracket (or nothing) and opens a ``(``; "" where none."""
    return _opcode_at(rest)[0]


def _opcode_at(rest: str) -> tuple[str, int]:
    """``opcode_of``'s op and where it starts (-1 where there is none)."""
    k = rest.find("(")
    while k >= 0:
        p = k
        while p > 0 and rest[p - 1] in _OPCODE_CHARS:
            p -= 1
        if p < k and rest[p] in _LOWER and (p == 0 or rest[p - 1] in _BEFORE_OPCODE):
            return rest[p:k], p
        k = rest.find("(", k + 1)
    return "", -1


def operands_of(rest: str, opcode: str, at: int) -> tuple[str, ...]:
    """The operand names in ``opcode(...)`` at ``at`` of an instruction's text: each top-level
    item's last word, its ``%`` dropped (``add(%a, %b)``, and ``add(f32[8]{0} %a, ...)`` where
    the operands' shapes are printed). One pass over the text, brackets counted."""
    if at < 0:
        return ()
    start = at + len(opcode) + 1
    # most operand lists hold names only (``(%a, %b)``): split at the commas, as the walk below
    # reads them (the walk is for printed shapes, whose brackets it counts)
    close = rest.find(")", start)
    if close >= 0 and _BRACKETS.isdisjoint(rest[start:close]):
        return tuple(w for w in (item.rsplit(" ", 1)[-1].lstrip("%") for item in rest[start:close].split(",")) if w)
    out: list[str] = []
    depth = 0
    for j in range(start, len(rest)):
        ch = rest[j]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                if ch == ")":
                    word = rest[start:j].rsplit(" ", 1)[-1].lstrip("%")
                    if word:
                        out.append(word)
                return tuple(out)
            depth -= 1
        elif ch == "," and depth == 0:
            word = rest[start:j].rsplit(" ", 1)[-1].lstrip("%")
            if word:
                out.append(word)
            start = j + 1
    return ()  # the list never closed: no operands read


def op_name_of(rest: str) -> str:
    """``OPNAME``'s value (the metadata is at the end of a long line: found with ``find``)."""
    i = rest.find('op_name="')
    if i < 0:
        return ""
    end = rest.find('"', i + 9)
    if end >= 0 and "\\" not in rest[i + 9:end]:
        return rest[i + 9:end]
    on = OPNAME.search(rest[i:])  # a slice: RE2 counts a start position from the text's start
    return on.group(1) if on else ""


def frame_of(rest: str) -> int | None:
    """``FRAME``'s number, None where there is none (or past 30 digits)."""
    i = rest.find("stack_frame_id=")
    if i < 0:
        return None
    tail = rest[i + 15:]
    digits = tail[:len(tail) - len(tail.lstrip("0123456789"))]
    if not digits:
        fr = FRAME.search(rest[i:])
        digits = fr.group(1) if fr else ""
    return int(digits) if digits and len(digits) <= 30 else None


def parse_instr(text: str) -> LogInstr:
    """Name, opcode, op_name and stack frame of an instruction's text (or of a bare name)."""
    text = text.strip()
    parts = instr_parts(text)
    if parts is None:
        return LogInstr(text.lstrip("%").strip("'"))
    name, rest = parts
    opcode, at = _opcode_at(rest)
    return LogInstr(name, opcode, op_name_of(rest).replace("\\'", "'"), frame_of(rest),
                    rest[:at].strip() if at > 0 else "",
                    operands_of(rest, opcode, at) if opcode != "constant" else ())


def _split_into(msg: str, st: "_State") -> tuple[LogInstr, LogInstr] | None:
    at = into_of(msg)
    if at is None:
        return None
    return st.instr(msg[:at[0]]), st.instr(msg[at[1]:])


def into_of(msg: str) -> tuple[int, int] | None:
    """(where ``INTO`` starts, where its group starts: the consumer's text) in ``msg``, or None:
    each `` into `` tried in turn, its name read up to the next space."""
    q = msg.find(" into ")
    while q >= 0:
        j = q + 6 + (msg[q + 6:q + 7] == "%")
        space = msg.find(" ", j)
        if space > j and msg.startswith(" = ", space) and _FILE_CHARS.issuperset(msg[j:space]):
            return q, j
        q = msg.find(" into ", q + 1)
    return None


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
    # every instruction's text the module's lines print, by its name (``LogParser.instructions``)
    known: dict[str, str] = field(default_factory=dict)
    # A log prints the same instruction many times (a consumer once per operand considered, a
    # producer in each decision about it): each distinct text is parsed once (docs/performance.md)
    parsed: dict[str, LogInstr] = field(default_factory=dict)

    def instr(self, text: str) -> LogInstr:
        got = self.parsed.get(text)
        if got is None:
            got = self.parsed[text] = parse_instr(text)
        if got.opcode:
            self.known[got.name] = text
        return got

    def saw(self, text: str) -> None:
        """An instruction's text printed with no decision in it (a consumer considered), kept by
        its name unparsed: the matching reads it only where it needs the graph around an op."""
        parts = instr_parts(text)
        if parts is not None:
            self.known[parts[0]] = text


def pass_run(msg: str) -> str | None:
    """The pass of ``  HLO pass NAME`` (``PASS``), else None."""
    s = msg.lstrip(" \t\n\r\f")
    name = s[9:]
    if not s.startswith("HLO pass ") or not name or not _BLANK_SET.isdisjoint(name):
        return None
    return name


def _pass(st: _State, default: str) -> str:
    return st.pass_name or default


class LogParser:
    """The log read line by line, as XLA writes it: ``feed`` each line with its number (the
    app feeds the lines while the compile runs, beside it), ``result`` once the log is closed.
    ``parse_log`` is the same over a whole text."""

    def __init__(self) -> None:
        self._per_module: dict[str, list[Decision]] = {}
        self._known: dict[str, dict[str, str]] = {}
        self._st = _State()
        self.lines = 0  # log lines (XLA's prefix)
        self.fed = 0  # any lines

    def feed(self, raw: str, ln: int) -> None:
        self.fed += 1
        got = log_line(raw)
        if got is not None:
            self._message(got[0], raw[got[1]:], ln)

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
            st.known = self._known.setdefault(st.module, {})
        if f == "hlo_pass_pipeline.cc":
            mm = _PIPELINE.match(msg) if msg.startswith("Running HLO pass pipeline on module ") else None
            if mm:
                st.module, st.pipeline, st.pass_name = mm.group(1), mm.group(2), ""
                st.known = self._known.setdefault(st.module, {})
                return
            name = pass_run(msg)
            if name is not None:
                st.pass_name = name
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

    def instructions(self, module: str) -> dict[str, str]:
        """The texts of the instructions the lines about ``module`` printed, by name (the very
        dict the parser adds to): what the fusion passes saw of the module's graph, with the
        names it had then."""
        return self._known.setdefault(module, {})

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
        st.saw(st.consumer)
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
    mm = _LIBRARY_FUSING.match(msg) if ": Fusing with: " in msg else None
    if mm and st.library is not None:
        other = st.instr(mm.group(2))
        p, c = (other, st.library) if mm.group(1) == "Up" else (st.library, other)
        kind = MERGED if other.opcode == "fusion" else FUSED
        out.append(_rec(pass_name, kind, p, c, f"{mm.group(1)}: Fusing with", line=ln))
        return
    mm = _LIBRARY_SKIPPING.match(msg) if "Skipping unsupported instruction: " in msg else None
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
    mm = _CANNOT_FUSE.match(msg) if msg.startswith("Cannot fuse ") else None
    if mm:
        p = st.seen.get(mm.group(1), LogInstr(mm.group(1)))
        c = st.seen.get(mm.group(2), LogInstr(mm.group(2)))
        out.append(_rec(pass_name, NOT_FUSED, p, c, mm.group(3).strip(), line=ln))


def _gemm_line(msg: str, st: _State, out: list, ln: int) -> None:
    pass_name = _pass(st, "triton-gemm-rewriter")
    if instr_parts(msg) is not None and not msg.startswith(("Not fusing", "Fusing")):
        li = st.instr(msg)
        if li.opcode == "dot":
            st.dot = li
        return
    mm = _NOT_FUSING.match(msg) if msg.startswith("Not fusing ") else None
    if mm and st.dot is not None:
        other = st.instr(mm.group(1))
        # Seen here: "to the output" names an op feeding the dot, "to the input" one after it.
        p, c = (other, st.dot) if mm.group(2) == "output" else (st.dot, other)
        out.append(_rec(pass_name, NOT_FUSED, p, c, mm.group(3).strip(), line=ln))
        return
    if msg.startswith("Fusing "):
        d = st.instr(msg[len("Fusing "):])
        out.append(_rec(pass_name, CREATED, d, d, "Triton GEMM created", f"gemm_fusion_{d.name}", ln))
