"""HLO text -> Module / Computation / Instruction (pure Python, no JAX).

The grammar, as XLA prints it::

    HloModule NAME[, key=value]*
    [FileNames / FunctionNames / FileLocations / StackFrames tables]
    [ENTRY] [%]comp_name [(params) -> shape] {
      [ROOT] [%]name = SHAPE opcode(operands)[, key=value]*
    }[, execution_thread="..."]

Why a parser of our own: the only complete HLO parser is XLA's C++ one, reachable from jaxlib
through a private module; the viewer must run without JAX, and we need source positions and the
raw attribute text, which XLA's object model does not keep.

Speed: a module is scanned with precompiled regular expressions whose bracket matching is
unrolled to a fixed depth (possessive, so linear time); only deeper nesting falls back to a
character scanner. Shapes, metadata and backend configs are decoded on first access.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from analysis.hlo.shape import Shape, ShapeParseError, parse_shape


class HloParseError(ValueError):
    """Malformed HLO text. ``line``/``column`` are 1-based; ``snippet`` is the offending line."""

    def __init__(self, message: str, line: int, column: int, snippet: str):
        self.message, self.line, self.column, self.snippet = message, line, column, snippet
        short = snippet.strip()
        if len(short) > 100:
            short = short[:97] + "..."
        super().__init__(f"line {line}, column {column}: {message}: {short!r}")


# ----------------------------------------------------------------------------- lexical pieces

_STR = r'"(?:[^"\\]|\\.)*+"'


def _balanced(depth: int, newline: bool = True) -> str:
    """Regex for text whose (), {}, [] and strings balance, up to ``depth`` levels of nesting."""
    plain = r'[^{}()\[\]"/]++|/(?!\*)|/\*.*?\*/' if newline else r'[^{}()\[\]"/\n]++|/(?!\*)|/\*.*?\*/'
    inner = f"(?:{plain}|{_STR})*+"
    for _ in range(depth):
        inner = f"(?:{plain}|{_STR}|\\{{{inner}\\}}|\\({inner}\\)|\\[{inner}\\])*+"
    return inner


# Four levels covers the HLO XLA prints (backend_config JSON nests three deep inside its
# braces); deeper text takes the slower scanner path. Each level triples the pattern, so
# depth 7 cost ~6 s of regex compilation at import, depth 4 costs ~0.1 s.
_BAL = _balanced(4)
# An attribute value: a run without top-level ',' or newline, brackets balanced inside.
_VALUE = (
    r'(?:[^,{}()\[\]"\n/]++|/(?!\*)|' + _STR + r"|\{" + _BAL + r"\}|\(" + _BAL + r"\)|\[" + _BAL + r"\])*+"
)
_NAME = r"[A-Za-z_$.\-][\w.\-$]*"
# An array shape: element type, dimensions (static, '<=N' bounded, '?' unbounded), layout.
_ARRAY_SHAPE = r"[a-z][a-z0-9]*\[[0-9,<=?]*+\](?:\{[0-9,]*+(?::[^}\n]*+)?\})?"

_INSTR_RE = re.compile(
    r"[ \t]*(?P<root>ROOT[ \t]+)?%?(?P<name>" + _NAME + r")[ \t]*=[ \t]*"
    r"(?P<shape>\((?:" + _BAL + r")\)|" + _ARRAY_SHAPE + r")[ \t]+"
    r"(?P<opcode>[a-z][a-z0-9\-]*)\((?P<operands>" + _BAL + r")\)"
)
_ATTR_RE = re.compile(r"[ \t]*,[ \t]*(?P<key>[A-Za-z_][\w.\-]*)=(?P<value>" + _VALUE + r")")
_END_RE = re.compile(r"[ \t]*(?:/\*.*?\*/[ \t]*)?(?://[^\n]*)?(?:\n|$|(?=\}))")
_COMP_RE = re.compile(
    r"(?P<entry>ENTRY[ \t]+)?%?(?P<name>" + _NAME + r")[ \t]*"
    r"(?P<sig>\((?:" + _BAL + r")\)[ \t]*->[ \t]*(?:\((?:" + _BAL + r")\)"
    # an array result may print its layout: '-> f32[4]{0} {'
    r"|[a-z][a-z0-9]*\[[^\]\n]*\](?:\{[^{}\n]*\})?(?=[ \t]*\{)|[^{\n]*?))?[ \t]*\{[ \t]*\n"
)
_COMP_SUFFIX_RE = re.compile(r"\}[ \t]*(?:,[ \t]*execution_thread=\"(?P<thread>[^\"]*)\")?[ \t]*(?:\n|$)")
_HEADER_RE = re.compile(r"\s*HloModule[ \t]+(?P<name>[^\s,]+)(?P<attrs>(?:" + _ATTR_RE.pattern + r")*)[ \t]*(?:\n|$)")
_BLANK_RE = re.compile(r"(?:[ \t]*(?://[^\n]*)?\n)+")
_TABLE_RE = re.compile(
    r"(?P<table>FileNames|FunctionNames|FileLocations|StackFrames)[ \t]*\n"
    r"(?P<rows>(?:[ \t]*\d+[ \t]+[^\n]*\n?)*)"
)
_OPERAND_NAME_RE = re.compile(r"%?(" + _NAME + r")\s*$")
_COMMENT_RE = re.compile(r"/\*.*?\*/", re.S)
_META_RE = re.compile(r"(\w+)=(" + _STR + r"|[^\s}]+)")
_KV_RE = re.compile(r"(\w+)=(" + _STR + r"|-?\d+)")

# Attributes that name called computations, and which role each plays.
CALL_ATTRS = ("calls", "to_apply", "body", "condition", "branch_computations",
              "true_computation", "false_computation", "called_computations", "async_wrapped")
_CALL_ATTR_SET = frozenset(CALL_ATTRS)


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at top-level separators (outside brackets and strings)."""
    out, depth, start, i, n = [], 0, 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            out.append(text[start:i])
            start = i + 1
        i += 1
    out.append(text[start:])
    return out


def _unquote(s: str) -> str:
    if len(s) >= 2 and s[0] == '"' and s[-1] == '"':
        if "\\" not in s:  # nothing escaped: skip the JSON decoder
            return s[1:-1]
        try:
            return json.loads(s)
        except ValueError:
            pass
        # XLA escapes strings C-style (CEscape), which JSON does not fully accept: \' for a quote,
        # octal bytes. Decode those escapes by hand.
        return _c_unescape(s[1:-1])
    return s


_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "'": "'", '"': '"', "\\": "\\", "?": "?"}


def _c_unescape(body: str) -> str:
    out = bytearray()  # octal/hex escapes are bytes of UTF-8 text
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == "\\" and i + 1 < n:
            nxt = body[i + 1]
            if nxt in _C_ESCAPES:
                out += _C_ESCAPES[nxt].encode()
                i += 2
                continue
            if nxt in "01234567":
                j = i + 1
                while j < min(i + 4, n) and body[j] in "01234567":
                    j += 1
                out.append(int(body[i + 1:j], 8) & 0xFF)
                i = j
                continue
            if nxt == "x":
                j = i + 2
                while j < min(i + 4, n) and body[j] in "0123456789abcdefABCDEF":
                    j += 1
                if j > i + 2:
                    out.append(int(body[i + 2:j], 16))
                    i = j
                    continue
        out += c.encode()
        i += 1
    return out.decode("utf-8", errors="replace")


@lru_cache(maxsize=65536)
def _cached_shape(text: str) -> Shape:
    return parse_shape(text)


# ----------------------------------------------------------------------------- data model


@dataclass(frozen=True)
class SourceLocation:
    file: str | None
    line: int | None
    end_line: int | None = None
    column: int | None = None
    end_column: int | None = None
    function: str | None = None

    def __str__(self) -> str:
        where = f"{self.file or '?'}:{self.line}"
        return where + (f" ({self.function})" if self.function else "")


@dataclass(frozen=True)
class Metadata:
    """``metadata={...}`` resolved: op_name/op_type, and the source location (either printed
    inline as ``source_file``/``source_line`` or through a stack frame id)."""

    op_name: str = ""
    op_type: str = ""
    source: SourceLocation | None = None
    stack: tuple[SourceLocation, ...] = ()  # innermost first
    raw: dict = field(default_factory=dict)


@dataclass(eq=False)
class Instruction:
    name: str
    opcode: str
    shape_text: str
    operands: list[str]
    attributes: dict[str, str]
    is_root: bool = False
    line: int = 0
    operand_text: str = ""
    computation: "Computation | None" = field(default=None, repr=False)

    @cached_property
    def shape(self) -> Shape:
        return _cached_shape(self.shape_text)

    @property
    def text(self) -> str:
        """The instruction re-printed in HLO syntax."""
        attrs = "".join(f", {k}={v}" for k, v in self.attributes.items())
        return f"{'ROOT ' if self.is_root else ''}%{self.name} = {self.shape_text} {self.opcode}({self.operand_text}){attrs}"

    @cached_property
    def called_computations(self) -> list[str]:
        out: list[str] = []
        for key, v in self.attributes.items():  # in text order: condition before body, ...
            if key not in _CALL_ATTR_SET:
                continue
            v = v.strip()
            if v.startswith("{"):
                v = v[1:-1]
            out.extend(p.strip().lstrip("%") for p in v.split(",") if p.strip())
        return out

    @cached_property
    def control_predecessors(self) -> list[str]:
        v = self.attributes.get("control-predecessors", "").strip("{} ")
        return [p.strip().lstrip("%") for p in v.split(",") if p.strip()]

    @cached_property
    def metadata(self) -> Metadata:
        raw_text = self.attributes.get("metadata")
        if not raw_text:
            return Metadata()
        raw = {k: _unquote(v) for k, v in _META_RE.findall(raw_text[1:-1])}
        mod = self.computation.module if self.computation is not None else None
        source = None
        stack: tuple[SourceLocation, ...] = ()
        frame = str(raw.get("stack_frame_id", ""))
        if frame.isdigit() and mod is not None:  # a malformed id resolves to no location
            stack = mod.stack_trace(int(frame))
            source = stack[0] if stack else None
        elif "source_file" in raw or "source_line" in raw:
            def num(k):
                return int(raw[k]) if k in raw and str(raw[k]).lstrip("-").isdigit() else None
            source = SourceLocation(raw.get("source_file"), num("source_line"), num("source_end_line"),
                                    num("source_column"), num("source_end_column"))
            stack = (source,)
        return Metadata(raw.get("op_name", ""), raw.get("op_type", ""), source, stack, raw)

    @cached_property
    def backend_config(self):
        """``backend_config`` decoded from JSON (raw or quoted-escaped); None if absent/invalid."""
        v = self.attributes.get("backend_config")
        if not v:
            return None
        v = v.strip()
        try:
            obj = json.loads(v)
            if isinstance(obj, str):
                obj = json.loads(obj) if obj.strip().startswith("{") else obj
            return obj
        except ValueError:
            return None

    @property
    def custom_call_target(self) -> str | None:
        v = self.attributes.get("custom_call_target")
        return _unquote(v) if v is not None else None

    @cached_property
    def fusion_kind(self) -> str | None:
        """``kLoop``/``kInput``/``kOutput``, or for ``kCustom`` the backend's kind
        (``__triton_gemm``, ``__cudnn$fusion``, ``__ynn_fusion``, ...)."""
        if self.opcode != "fusion":
            return None
        kind = self.attributes.get("kind")
        if kind == "kCustom":
            bc = self.backend_config
            if isinstance(bc, dict):
                for key in ("fusion_backend_config", "fusion_config"):
                    sub = bc.get(key)
                    if isinstance(sub, dict) and sub.get("kind"):
                        return sub["kind"]
        return kind

    def operand_instructions(self) -> list["Instruction"]:
        comp = self.computation
        return [comp.by_name[o] for o in self.operands if comp is not None and o in comp.by_name]


@dataclass(eq=False)
class Computation:
    name: str
    instructions: list[Instruction]
    is_entry: bool = False
    execution_thread: str | None = None
    signature: str = ""
    line: int = 0
    module: "Module | None" = field(default=None, repr=False)

    @cached_property
    def by_name(self) -> dict[str, Instruction]:
        return {i.name: i for i in self.instructions}

    @cached_property
    def root(self) -> Instruction | None:
        for i in self.instructions:
            if i.is_root:
                return i
        return self.instructions[-1] if self.instructions else None

    def users(self) -> dict[str, list[Instruction]]:
        """Instruction name -> the instructions that use it, each once (as XLA's users())."""
        out: dict[str, list[Instruction]] = {i.name: [] for i in self.instructions}
        for i in self.instructions:
            for o in dict.fromkeys(i.operands):
                if o in out:
                    out[o].append(i)
        return out


@dataclass(eq=False)
class Module:
    name: str
    computations: list[Computation]
    attributes: dict[str, str] = field(default_factory=dict)
    file_names: dict[int, str] = field(default_factory=dict)
    function_names: dict[int, str] = field(default_factory=dict)
    file_locations: dict[int, dict[str, int]] = field(default_factory=dict)
    stack_frames: dict[int, dict[str, int]] = field(default_factory=dict)
    text: str = field(default="", repr=False)

    @cached_property
    def by_name(self) -> dict[str, Computation]:
        return {c.name: c for c in self.computations}

    @cached_property
    def entry(self) -> Computation:
        for c in self.computations:
            if c.is_entry:
                return c
        return self.computations[-1]

    @property
    def is_scheduled(self) -> bool:
        return self.attributes.get("is_scheduled") == "true"

    def instructions(self):
        for c in self.computations:
            yield from c.instructions

    @cached_property
    def _parent_offset(self) -> int:
        # XLA prints ``parent_frame_id`` one higher than the id of the parent frame (0 = none),
        # so a root frame appears to name itself. Seen with jax 0.10: ``1 {.. parent_frame_id=1}``
        # for a root and ``4 {.. parent_frame_id=4}`` for a frame whose parent is 3. If no frame
        # names itself, read the ids as written.
        return 1 if any(f.get("parent_frame_id") == fid for fid, f in self.stack_frames.items()) else 0

    def location(self, file_location_id: int) -> SourceLocation | None:
        loc = self.file_locations.get(file_location_id)
        if loc is None:
            return None
        return SourceLocation(
            self.file_names.get(loc.get("file_name_id", -1)), loc.get("line"), loc.get("end_line"),
            loc.get("column"), loc.get("end_column"), self.function_names.get(loc.get("function_name_id", -1)),
        )

    @cached_property
    def _stack_cache(self) -> dict[int, tuple[SourceLocation, ...]]:
        return {}

    def stack_trace(self, frame_id: int) -> tuple[SourceLocation, ...]:
        """Source locations from the frame outwards (innermost first)."""
        cached = self._stack_cache.get(frame_id)
        if cached is None:
            cached = self._stack_cache[frame_id] = self._walk_stack(frame_id)
        return cached

    def _walk_stack(self, frame_id: int) -> tuple[SourceLocation, ...]:
        out: list[SourceLocation] = []
        seen: set[int] = set()
        fid = frame_id
        while fid and fid in self.stack_frames and fid not in seen:
            seen.add(fid)
            frame = self.stack_frames[fid]
            loc = self.location(frame.get("file_location_id", -1))
            if loc is not None:
                out.append(loc)
            fid = frame.get("parent_frame_id", 0) - self._parent_offset
        return tuple(out)

    def called_by(self) -> dict[str, list[Instruction]]:
        """Computation name -> the instructions that call it."""
        out: dict[str, list[Instruction]] = {}
        for inst in self.instructions():
            for c in inst.called_computations:
                out.setdefault(c, []).append(inst)
        return out


# ----------------------------------------------------------------------------- parser


class _Text:
    def __init__(self, text: str):
        self.text = text
        self._lines: list[int] | None = None

    def line_of(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1

    def error(self, message: str, pos: int) -> HloParseError:
        pos = min(max(pos, 0), len(self.text))
        line_start = self.text.rfind("\n", 0, pos) + 1
        line_end = self.text.find("\n", pos)
        if line_end < 0:
            line_end = len(self.text)
        return HloParseError(message, self.line_of(pos), pos - line_start + 1, self.text[line_start:line_end])


def _parse_attrs(text: str) -> dict[str, str]:
    return {m.group("key"): m.group("value").strip() for m in _ATTR_RE.finditer(text)}


def _parse_table(name: str, rows: str, src: _Text, base: int) -> dict:
    out: dict = {}
    for raw in rows.splitlines():
        raw = raw.strip()
        if not raw:
            continue
        num, _, rest = raw.partition(" ")
        rest = rest.strip()
        if name in ("FileNames", "FunctionNames"):
            out[int(num)] = _unquote(rest)
        else:
            out[int(num)] = {k: int(v) for k, v in _KV_RE.findall(rest) if v.lstrip("-").isdigit()}
    return out


def _operand_names(text: str) -> list[str]:
    if not text.strip():
        return []
    if "/*" in text:
        text = _COMMENT_RE.sub("", text)
    names = []
    for part in _split_top(text) if ("(" in text or "{" in text or "[" in text) else text.split(","):
        m = _OPERAND_NAME_RE.search(part.strip())
        if m:
            names.append(m.group(1))
    return names


# Opcodes whose parenthesised text is a literal or an index, not operand names.
_NON_OPERAND_OPCODES = {"constant", "parameter", "iota", "rng-get-and-update-state"}


def parse_module(text: str) -> Module:
    """Parse an HLO module's text. Raises HloParseError (with line and column) if malformed."""
    if not isinstance(text, str):
        raise TypeError("parse_module expects str")
    if "\r" in text:  # Windows line endings (a file saved on Windows, a browser upload)
        text = text.replace("\r\n", "\n")
    src = _Text(text)
    m = _HEADER_RE.match(text)
    if not m:
        pos = len(text) - len(text.lstrip())
        raise src.error("expected 'HloModule NAME' at the start", pos)
    module = Module(m.group("name"), [], _parse_attrs(m.group("attrs")), text=text)
    pos = m.end()
    n = len(text)
    comps: list[Computation] = []
    tables = {"FileNames": module.file_names, "FunctionNames": module.function_names,
              "FileLocations": module.file_locations, "StackFrames": module.stack_frames}
    line = 1 + text.count("\n", 0, pos)
    while True:
        b = _BLANK_RE.match(text, pos)
        if b:
            line += text.count("\n", pos, b.end())
            pos = b.end()
        while pos < n and text[pos] in " \t\r":
            pos += 1
        if pos >= n:
            break
        t = _TABLE_RE.match(text, pos)
        if t:
            tables[t.group("table")].update(_parse_table(t.group("table"), t.group("rows"), src, pos))
            line += text.count("\n", pos, t.end())
            pos = t.end()
            continue
        c = _COMP_RE.match(text, pos)
        if not c:
            raise src.error("expected a computation header like 'ENTRY %main {' or a stack-frame table", pos)
        comp = Computation(c.group("name"), [], bool(c.group("entry")), signature=(c.group("sig") or "").strip(),
                           line=line, module=module)
        line += 1
        pos = c.end()
        insts = comp.instructions
        while True:
            b = _BLANK_RE.match(text, pos)
            if b:
                line += text.count("\n", pos, b.end())
                pos = b.end()
            s = pos
            while s < n and text[s] in " \t\r":
                s += 1
            if s >= n:
                raise src.error(f"computation {comp.name!r} is not closed with '}}'", s)
            if text[s] == "}":
                e = _COMP_SUFFIX_RE.match(text, s)
                if not e:
                    raise src.error("unexpected text after '}'", s + 1)
                comp.execution_thread = e.group("thread")
                line += text.count("\n", s, e.end())
                pos = e.end()
                break
            im = _INSTR_RE.match(text, s)
            e = None
            if im:
                p = im.end()
                attrs: dict[str, str] = {}
                while True:
                    am = _ATTR_RE.match(text, p)
                    if not am:
                        break
                    attrs[am.group("key")] = am.group("value").strip()
                    p = am.end()
                e = _END_RE.match(text, p)
            if e:
                is_root, name, shape_text = bool(im.group("root")), im.group("name"), im.group("shape")
                opcode, operand_text = im.group("opcode"), im.group("operands")
            else:
                # Slow path: nesting deeper than the regexes unroll, or an error to locate.
                try:
                    is_root, name, shape_text, opcode, operand_text, attrs, p = _scan_instruction(text, s)
                except _ScanError as err:
                    raise src.error(err.message, err.pos) from None
                e = _END_RE.match(text, p)
                if not e:
                    raise src.error("unexpected text after instruction (expected ', key=value' or end of line)", p)
            # Every shape is checked now (the scan regexes only find where a shape ends), so a
            # module that parses never raises later from Instruction.shape. Cached: cheap.
            try:
                _cached_shape(shape_text)
            except ShapeParseError as err:
                raise src.error(f"bad shape: {err}", s) from None
            inst = Instruction(
                name, opcode, shape_text,
                [] if opcode in _NON_OPERAND_OPCODES else _operand_names(operand_text),
                attrs, is_root, line, operand_text, comp,
            )
            insts.append(inst)
            line += text.count("\n", s, e.end())
            pos = e.end()
        comps.append(comp)
    if not comps:
        raise src.error("module has no computations", n)
    module.computations = comps
    _check(module, src)
    return module


class _ScanError(Exception):
    def __init__(self, message: str, pos: int):
        super().__init__(message)
        self.message, self.pos = message, pos


_PLAIN_RUN_RE = re.compile(r'[^{}()\[\]"/,\n]++')
_STR_RE = re.compile(_STR)
_CLOSER = {"(": ")", "[": "]", "{": "}"}
_INSTR_HEAD_RE = re.compile(r"[ \t]*(?P<root>ROOT[ \t]+)?%?(?P<name>" + _NAME + r")[ \t]*=[ \t]*")
_ARRAY_SHAPE_RE = re.compile(_ARRAY_SHAPE)
_OPCODE_RE = re.compile(r"[ \t]+(?P<opcode>[a-z][a-z0-9\-]*)\(")
_ATTR_KEY_RE = re.compile(r"[ \t]*,[ \t]*(?P<key>[A-Za-z_][\w.\-]*)=")


def _scan(text: str, pos: int, group: bool) -> int:
    """Linear-time bracket scanner for any nesting depth; returns the end position.

    ``group``: ``text[pos]`` opens a bracket; stop after its partner. Otherwise scan an attribute
    value: stop at a top-level ',' or newline or an unmatched closing bracket.
    """
    n = len(text)
    stack: list[tuple[str, int]] = []
    while pos < n:
        m = _PLAIN_RUN_RE.match(text, pos)
        if m:
            pos = m.end()
            if pos >= n:
                break
        c = text[pos]
        if c == '"':
            m = _STR_RE.match(text, pos)
            if not m:
                raise _ScanError("unterminated string", pos)
            pos = m.end()
        elif c == "/":
            if text.startswith("/*", pos):
                j = text.find("*/", pos + 2)
                if j < 0:
                    raise _ScanError("unterminated /* comment", pos)
                pos = j + 2
            else:
                pos += 1
        elif c in "([{":
            stack.append((_CLOSER[c], pos))
            pos += 1
        elif c in ")]}":
            if not stack:
                return pos
            if c != stack[-1][0]:
                raise _ScanError(f"{text[stack[-1][1]]!r} is not closed: found {c!r} where "
                                 f"{stack[-1][0]!r} was expected", stack[-1][1])
            stack.pop()
            pos += 1
            if group and not stack:
                return pos
        else:  # ',' or newline
            if not stack:
                return pos
            pos += 1
    if stack:
        raise _ScanError(f"{text[stack[-1][1]]!r} is not closed before the end of the text", stack[-1][1])
    return pos


def _scan_instruction(text: str, s: int):
    """The instruction at ``s`` read with ``_scan`` instead of the fixed-depth regexes.

    Returns (is_root, name, shape_text, opcode, operand_text, attributes, end) or raises _ScanError
    with a one-line reason and the position it refers to."""
    h = _INSTR_HEAD_RE.match(text, s)
    if not h:
        raise _ScanError("expected an instruction 'name = shape opcode(operands)'", s)
    p = h.end()
    if text.startswith("(", p):
        e = _scan(text, p, True)
        shape = text[p:e]
    else:
        m = _ARRAY_SHAPE_RE.match(text, p)
        if not m:
            end = p
            while end < len(text) and not text[end].isspace():
                end += 1
            raise _ScanError(f"bad shape {text[p:end][:40]!r} (expected e.g. f32[2,3]{{1,0}})", p)
        shape, e = m.group(), m.end()
    o = _OPCODE_RE.match(text, e)
    if not o:
        raise _ScanError("expected 'opcode(operands)' after the shape", e)
    oe = _scan(text, o.end() - 1, True)
    operands = text[o.end():oe - 1]
    p = oe
    attrs: dict[str, str] = {}
    while True:
        k = _ATTR_KEY_RE.match(text, p)
        if not k:
            break
        p = _scan(text, k.end(), False)
        attrs[k.group("key")] = text[k.end():p].strip()
    return bool(h.group("root")), h.group("name"), shape, o.group("opcode"), operands, attrs, p


def _check(module: Module, src: _Text) -> None:
    names = module.by_name
    if len(names) != len(module.computations):
        seen: set[str] = set()
        for c in module.computations:
            if c.name in seen:
                raise HloParseError(f"duplicate computation name {c.name!r}", c.line, 1, c.name)
            seen.add(c.name)
    for comp in module.computations:
        local = comp.by_name
        if len(local) != len(comp.instructions):
            seen = set()
            for i in comp.instructions:
                if i.name in seen:
                    raise HloParseError(f"duplicate instruction name {i.name!r}", i.line, 1, i.text)
                seen.add(i.name)
        for inst in comp.instructions:
            for o in inst.operands:
                if o not in local:
                    raise HloParseError(f"operand {o!r} of {inst.name!r} is not defined in computation "
                                        f"{comp.name!r}", inst.line, 1, inst.text)
            for cc in inst.called_computations:
                if cc not in names:
                    raise HloParseError(f"{inst.name!r} calls unknown computation {cc!r}", inst.line, 1, inst.text)
