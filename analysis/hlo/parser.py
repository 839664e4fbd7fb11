"""HLO text -> Module / Computation / Instruction (pure Python, no JAX).

The grammar, as XLA's parser takes it (docs/hlo-grammar.md has the details and the sources)::

    [HloModule NAME[, key=value]*]
    [FileNames / FunctionNames / FileLocations / StackFrames tables]
    [ENTRY] [%]comp_name [(params) -> shape] {
      [ROOT] [%]name = [SHAPE] opcode(operands)[, key=value]*
    }[, execution_thread="..."]

Whitespace (newlines included) and comments (``// ...`` to the end of the line, ``/* ... */``)
may stand between any two tokens, as in XLA's lexer: instructions and signatures may be wrapped
over lines, ``} // name`` may close a computation. An operand may be an instruction written
inline (``broadcast(f32[2] parameter(0))``); a called computation may be written inline
(``calls={ ... }``). The header is optional (a bare computation is a module), and so is
``ENTRY`` (the last computation is the entry).

Why a parser of our own: the only complete HLO parser is XLA's C++ one, reachable from jaxlib
through a private module; the viewer must run without JAX, and we need source positions and the
raw attribute text, which XLA's object model does not keep.

Speed: an instruction that sits on one line, the way XLA prints it, is read by one precompiled
regular expression (bracket matching unrolled to a fixed depth, possessive, so linear time);
anything else (wrapped lines, comments, deeper nesting, inline instructions, a missing shape) is
read by the general tokenizing parser below, which is also what reports errors. Shapes, metadata
and backend configs are decoded on first access.

Why one module of 800 lines: its speed. The fast path and the general parser are two readers of
one grammar that must agree token for token (the tests parse every text both ways), built from
the same lexical patterns; the fast path is written out inside the body's loop (one match per
instruction, no call per instruction), and the general parser is what it falls back to on the
first thing it does not take. Shapes are read by ``analysis.hlo.shape``; a missing one is
inferred by ``analysis.hlo.shape_inference``.
"""

from __future__ import annotations

import re
import threading

from analysis.hlo.ir import (CALL_ATTRS, Computation, Instruction, Metadata, Module,  # noqa: F401
                             SourceLocation, cached_shape, unquote)
from analysis.hlo.shape import ShapeParseError, parse_shape
from analysis.hlo.shape_inference import INFERRED, inferred_shape


class HloParseError(ValueError):
    """Malformed HLO text. ``line``/``column`` are 1-based; ``snippet`` is the offending line;
    ``source`` names the text where whoever parsed it knows (``"hlo_after of mlp"``)."""

    def __init__(self, message: str, line: int, column: int, snippet: str):
        self.message, self.line, self.column, self.snippet = message, line, column, snippet
        self.source: str | None = None
        short = snippet.strip()
        if len(short) > 100:
            short = short[:97] + "..."
        super().__init__(f"line {line}, column {column}: {message}: {short!r}")


# ----------------------------------------------------------------------------- lexical pieces

_STR = r'"(?:[^"\\]|\\.)*+"'
_NAME = r"[A-Za-z_$.\-][\w.\-$]*"
_CALL_ATTR_SET = frozenset(CALL_ATTRS)


def _balanced(depth: int) -> str:
    """Regex for text whose (), {}, [] and strings balance, up to ``depth`` levels of nesting."""
    plain = r'[^{}()\[\]"/]++|/(?![*/])|/\*(?:[^*]|\*(?!/))*+\*/'
    inner = f"(?:{plain}|{_STR})*+"
    for _ in range(depth):
        inner = f"(?:{plain}|{_STR}|\\{{{inner}\\}}|\\({inner}\\)|\\[{inner}\\])*+"
    return inner


# Four levels covers the HLO XLA prints (backend_config JSON nests three deep inside its
# braces); deeper text takes the general parser. Each level triples the pattern.
_BAL = _balanced(4)
# An attribute value: no top-level whitespace or ',' (XLA's values are single tokens or
# bracketed groups), brackets balanced inside.
_VALUE = (r'(?:[^\s,{}()\[\]"/]++|/(?![*/])|' + _STR + r"|\{" + _BAL + r"\}|\(" + _BAL + r"\)|\[" + _BAL
          + r"\])++")
# An array shape as XLA prints it: element type, dimensions (static, '<=N' bounded, '?'
# unbounded), layout.
_ARRAY_SHAPE = r"[a-z][a-z0-9]*\[[0-9,<=?]*+\](?:\{[0-9,]*+(?::[^{}\n]*+)?\})?"
_ATTRS = r"(?:[ \t]*,[ \t]*[A-Za-z_][\w.\-]*=" + _VALUE + r")*+"

# One instruction on one line, the way XLA prints it. Operand lists with parentheses (tuple
# shapes, inline instructions) and anything else go to the general parser.
_FAST = (
    r"[ \t]*(ROOT[ \t]+)?%?(" + _NAME + r")[ \t]*=[ \t]*"
    r"(\((?:" + _BAL + r")\)|" + _ARRAY_SHAPE + r")[ \t]+"
    r"([a-z][a-z0-9\-]*)\(([^()\n\"]*+)\)(" + _ATTRS + r")[ \t]*(?://[^\n]*+)?\n"
)
_ATTR = r"[ \t]*,[ \t]*([A-Za-z_][\w.\-]*)=(" + _VALUE + r")"
# Operand lists: shapes and /*index=N*/ comments taken out, what is left must be names.
_OPERAND_SHAPE_RE = re.compile(_ARRAY_SHAPE + r"|/\*[^*]*\*/")
# ``%t#1`` is element 1 of the tuple ``t`` (XLA 0.12's printer leaves the get-tuple-element out
# and its parser puts one back, ``_Scope.element``); ``%t#1#0`` an element of that.
_ELEMENT_SUFFIX = r"(?:#[0-9]+)*"
_OPERAND_LIST_RE = re.compile(r"[ \t]*%?" + _NAME + _ELEMENT_SUFFIX + r"[ \t]*(?:,[ \t]*%?" + _NAME
                              + _ELEMENT_SUFFIX + r"[ \t]*)*")
_OPERAND_RE = re.compile(r"%?(" + _NAME + _ELEMENT_SUFFIX + r")")
_HASH_INDEX_RE = re.compile(r"\s*#\s*([0-9]+)")
# A computation header on one line: '[ENTRY] [%]name [(params) -> shape] {'.
_COMP = (
    r"(ENTRY[ \t]+)?%?(" + _NAME + r")[ \t]*"
    r"(\((?:" + _BAL + r")\)[ \t]*->[ \t]*(?:\((?:" + _BAL + r")\)|" + _ARRAY_SHAPE + r"))?[ \t]*\{[ \t]*\n"
)

# The three patterns above are 20-39 KB of text each (the nesting unrolled), and Python's
# ``re`` compiles them in pure Python: every sandboxed worker is a fresh process, and at import
# that came before each job's model even loaded (docs/performance.md).
# They are compiled on first use (``prepare``), which the compile's thread beside XLA calls
# while XLA (C++, without the GIL) compiles, so that the time is hidden there. ``re`` has no
# way to keep a compiled pattern across processes (a pickled one is compiled again).
_BIG: tuple | None = None
_BIG_LOCK = threading.Lock()


def prepare() -> tuple:
    """The instruction, attribute and computation-header patterns, compiled once per process."""
    global _BIG
    if _BIG is None:
        with _BIG_LOCK:
            if _BIG is None:
                _BIG = (re.compile(_FAST), re.compile(_ATTR), re.compile(_COMP))
    return _BIG


_BLANK_RE = re.compile(r"(?:[ \t]*(?://[^\n]*)?\n)+")
_TABLE_RE = re.compile(
    r"(?P<table>FileNames|FunctionNames|FileLocations|StackFrames)[ \t]*\n"
    r"(?P<rows>(?:[ \t]*\d+[ \t]+[^\n]*\n?)*)"
)
_KV_RE = re.compile(r"(\w+)=(" + _STR + r"|-?\d+)")

# General parser tokens.
_WS_RE = re.compile(r"(?:\s++|//[^\n]*+|/\*(?:[^*]|\*(?!/))*+\*/)*+")
_NAME_RE = re.compile(r"%?(" + _NAME + r")")
_OPCODE_RE = re.compile(r"%?([a-z][a-z0-9\-]*)")
_KEY_RE = re.compile(r"([A-Za-z_][\w.\-]*)[ \t]*=")
_ROOT_RE = re.compile(r"ROOT(?![\w.\-$])")
_ENTRY_RE = re.compile(r"ENTRY(?![\w.\-$])")
_HEADER_RE = re.compile(r"HloModule(?![\w.\-$])")
_MODULE_NAME_RE = re.compile(r"[^\s,]+")
_ELEMENT_RE = re.compile(r"([a-z][a-z0-9]*)[ \t]*\[")
_DIMS_RE = re.compile(r"[^\]\n]*\]")
_LAYOUT_START_RE = re.compile(r"\{\s*(?:\d|:|\})")
_LAYOUT_RE = re.compile(r"\{[^{}]*\}")
_PLAIN_VALUE_RE = re.compile(r'[^\s,{}()\[\]"/]++')
_PLAIN_RUN_RE = re.compile(r'[^{}()\[\]"/,\n]++')
_STR_RE = re.compile(_STR)
_CLOSER = {"(": ")", "[": "]", "{": "}"}
_MAX_DEPTH = 64  # tuple shapes / inline instructions nested deeper: an error, not a RecursionError
_INLINE_CALL_RE = re.compile(r"(?:^|,)[ \t]*(?:" + "|".join(CALL_ATTRS) + r")=\{\s*(?:ROOT\s|%?" + _NAME + r"\s*=)")
_SPACE = " \t\r\n"

# Opcodes whose parenthesised text is a literal or an index, not operand names.
_NON_OPERAND_OPCODES = frozenset({"constant", "parameter", "iota", "rng-get-and-update-state"})


class _Fail(Exception):
    """Raised inside the general parser: ``message`` about ``pos``; ``at`` is how far it got."""

    def __init__(self, message: str, pos: int, at: int | None = None):
        super().__init__(message)
        self.message, self.pos, self.at = message, pos, pos if at is None else at


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
                raise _Fail("unterminated string", pos)
            pos = m.end()
        elif c == "/":
            if text.startswith("/*", pos):
                j = text.find("*/", pos + 2)
                if j < 0:
                    raise _Fail("unterminated /* comment", pos)
                pos = j + 2
            elif text.startswith("//", pos) and stack:
                # a comment inside brackets (a wrapped list): to the end of the line
                j = text.find("\n", pos)
                pos = n if j < 0 else j
            else:
                pos += 1
        elif c in "([{":
            stack.append((_CLOSER[c], pos))
            pos += 1
        elif c in ")]}":
            if not stack:
                return pos
            if c != stack[-1][0]:
                raise _Fail(f"{text[stack[-1][1]]!r} is not closed: found {c!r} where "
                            f"{stack[-1][0]!r} was expected", stack[-1][1], pos)
            stack.pop()
            pos += 1
            if group and not stack:
                return pos
        else:  # ',' or newline
            if not stack:
                return pos
            pos += 1
    if stack:
        raise _Fail(f"{text[stack[-1][1]]!r} is not closed before the end of the text", stack[-1][1], n)
    return pos


def _balanced_literal(text: str, open_pos: int, close_pos: int) -> bool:
    try:
        return _scan(text, open_pos, True) == close_pos + 1
    except _Fail:
        return False


def _operand_names(text: str) -> list[str] | None:
    """Names in a one-line operand list (``f32[4]{0} %a, %b``); None if it is not just names."""
    if not text or text.isspace():
        return []
    if "[" in text or "/" in text:
        text = _OPERAND_SHAPE_RE.sub("", text)
    if not _OPERAND_LIST_RE.fullmatch(text):
        return None
    return _OPERAND_RE.findall(text)


def _parse_table(name: str, rows: str) -> dict:
    out: dict = {}
    for raw in rows.splitlines():
        raw = raw.strip()
        if not raw:
            continue
        num, _, rest = raw.partition(" ")
        rest = rest.strip()
        if name in ("FileNames", "FunctionNames"):
            out[int(num)] = unquote(rest)
        else:
            out[int(num)] = {k: int(v) for k, v in _KV_RE.findall(rest) if v.lstrip("-").isdigit()}
    return out


def _short(s: str, n: int = 40) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def _one_line(s: str) -> str:
    """Text that was wrapped over lines (a shape, an operand list), on one line."""
    return " ".join(s.split()) if "\n" in s else s


# ----------------------------------------------------------------------------- the parser


class _Scope:
    """The names of one computation as it is read.

    ``names`` maps each instruction's name to it (the computation's ``by_name`` when done).
    Some instructions are made up by the parser, as XLA's parser makes them: an instruction
    written inline as an operand (``negate.anon``) and the element of a tuple an operand takes
    with ``%t#1`` (``t_1``, a get-tuple-element). A made-up name gives way to an instruction the
    text names the same later: that one is renamed (``t_1.1``) and the text's references to it
    follow it through ``renamed``, as in XLA.
    """

    __slots__ = ("names", "made", "renamed", "elements")

    def __init__(self) -> None:
        self.names: dict[str, Instruction] = {}
        self.made: set[str] = set()
        self.renamed: dict[str, str] = {}
        self.elements: dict[tuple[str, tuple[int, ...]], str] = {}

    def fresh(self, base: str) -> str:
        """``base``, or ``base.1``, ``base.2``, ... whichever is free."""
        name, k = base, 0
        while name in self.names:
            k += 1
            name = f"{base}.{k}"
        return name

    def claim(self, name: str) -> str | None:
        """The name an instruction the text calls ``name`` gets; None where it is taken."""
        if name not in self.names:
            return name
        if name not in self.made:
            return None
        new = self.fresh(name)
        self.renamed[name] = new
        return new

    def resolve(self, name: str) -> str:
        return self.renamed.get(name, name)

    def element(self, ref: str, comp: Computation, line: int) -> str:
        """The instruction for operand ``ref`` (``t#1#0``): one get-tuple-element per tuple
        and index, added to ``comp`` where first used (before its user), named as XLA names it
        (``t_1``, then ``t_1_0``). Raises ``ValueError`` with the reason where it cannot be."""
        base, *rest = ref.split("#")
        parent = self.resolve(base)
        if parent not in self.names:
            raise ValueError(f"operand {_short(ref)!r} takes an element of {_short(base)!r}, which is not "
                             f"defined before it in computation {_short(comp.name)!r}")
        path: tuple[int, ...] = ()
        label = base
        for piece in rest:
            index = int(piece)
            path += (index,)
            label += f"_{index}"
            known = self.elements.get((self.resolve(base), path))
            if known is not None:
                parent = known
                continue
            of = self.names[parent]
            try:
                shape = cached_shape(of.shape_text)
            except ShapeParseError:
                shape = None
            if shape is None or not shape.is_tuple or index >= len(shape.tuple_shapes):
                what = (f"its shape {_short(of.shape_text)} is not a tuple" if shape is None or not shape.is_tuple
                        else f"its tuple has {len(shape.tuple_shapes)} elements")
                raise ValueError(f"operand {_short(ref)!r}: {_short(parent)!r} has no element {index} ({what})")
            name = self.fresh(label)
            inst = Instruction(name, "get-tuple-element", str(shape.tuple_shapes[index]), [parent],
                               {"index": str(index)}, False, line, "%" + parent, comp)
            comp.instructions.append(inst)
            self.names[name] = inst
            self.made.add(name)
            self.elements[(self.resolve(base), path)] = name
            parent = name
        return parent


class _Parser:
    def __init__(self, text: str, fast: bool = True):
        self.text = text
        self.n = len(text)
        self.fast = fast
        self.module = Module("", [], {}, text=text)
        # One string object for each opcode, attribute name and shape text of this module: a
        # big program repeats a few hundred of them tens of thousands of times, and each match
        # would otherwise be its own copy (docs/performance.md). Per parse, so that nothing
        # outlives the module.
        self.shared: dict[str, str] = {}
        self.comps: list[Computation] = []
        self.comp_names: set[str] = set()
        self._line_pos, self._line_no = 0, 1

    # -- positions and errors

    def line_at(self, pos: int) -> int:
        if pos < self._line_pos:
            return self.text.count("\n", 0, pos) + 1
        self._line_no += self.text.count("\n", self._line_pos, pos)
        self._line_pos = pos
        return self._line_no

    def error(self, message: str, pos: int, start: int | None = None, at: int | None = None) -> HloParseError:
        """An HloParseError about ``pos``. ``start``: where the instruction (or header) began;
        ``at``: how far the parser had read. Says so when the text was wrapped over lines."""
        text = self.text
        pos = min(max(pos, 0), self.n)
        line = text.count("\n", 0, pos) + 1
        if start is not None:
            first = text.count("\n", 0, start) + 1
            reached = text.count("\n", 0, min(max(at if at is not None else pos, pos), self.n)) + 1
            if line > first:
                message += f" (in the instruction that starts on line {first} and goes on to line {line})"
            elif reached > line:
                message += f" (the instruction goes on over several lines, to line {reached})"
        line_start = text.rfind("\n", 0, pos) + 1
        line_end = text.find("\n", pos)
        if line_end < 0:
            line_end = self.n
        return HloParseError(message, line, pos - line_start + 1, text[line_start:line_end])

    def ws(self, pos: int) -> int:
        pos = _WS_RE.match(self.text, pos).end()
        if self.text.startswith("/*", pos):
            raise _Fail("unterminated /* comment", pos)
        return pos

    # -- module

    def parse(self) -> Module:
        try:
            return self._parse()
        except _Fail as f:  # (the places that know more convert their own)
            raise self.error(f.message, f.pos, None, f.at) from None

    def _parse(self) -> Module:
        text, n, module = self.text, self.n, self.module
        pos = self.ws(0) if not text.startswith("HloModule") else 0
        if _HEADER_RE.match(text, pos):
            p = pos + len("HloModule")
            q = _WS_RE.match(text, p).end()
            m = _MODULE_NAME_RE.match(text, q)
            if q == p or not m:
                raise self.error("expected the module's name after 'HloModule'", q)
            module.name = m.group()
            try:
                pos = self.attributes(m.end(), module.attributes, None)
            except _Fail as f:
                raise self.error(f.message, f.pos, pos, f.at) from None
        tables = {"FileNames": module.file_names, "FunctionNames": module.function_names,
                  "FileLocations": module.file_locations, "StackFrames": module.stack_frames}
        while True:
            b = _BLANK_RE.match(text, pos)
            if b:
                pos = b.end()
            try:
                pos = self.ws(pos)
            except _Fail as f:
                raise self.error(f.message, f.pos) from None
            if pos >= n:
                break
            t = _TABLE_RE.match(text, pos)
            if t:
                tables[t.group("table")].update(_parse_table(t.group("table"), t.group("rows")))
                pos = t.end()
                continue
            pos = self.computation(pos)
        if not self.comps:
            if not module.name:
                raise self.error("expected 'HloModule NAME' or a computation at the start", pos)
            raise self.error("module has no computations", n)
        module.computations = self.comps
        if not any(c.is_entry for c in self.comps):
            self.comps[-1].is_entry = True  # as XLA: without ENTRY, the last computation is the entry
        if not module.name:
            module.name = "module_" + module.entry.name  # (XLA's name for a module without header)
        _check(module)
        return module

    # -- computations

    def computation(self, pos: int, inline_name: str | None = None) -> int:
        """A computation at ``pos`` (or, with ``inline_name``, the body ``{...}`` of one written
        inline as an attribute value). Appends it to the module; returns the end position."""
        text = self.text
        start = pos
        if inline_name is None:
            c = prepare()[2].match(text, pos) if self.fast else None
            if c:
                comp = Computation(c.group(2), [], bool(c.group(1)), signature=(c.group(3) or "").strip(),
                                   line=self.line_at(pos), module=self.module)
                pos = c.end()
            else:
                comp, pos = self.comp_header(pos)
        else:
            comp = Computation(inline_name, [], False, line=self.line_at(pos), module=self.module)
            pos += 1  # '{'
        if comp.name in self.comp_names and inline_name is None:
            raise HloParseError(f"duplicate computation name {_short(comp.name)!r}", comp.line, 1,
                                text[start:text.find("\n", start) if "\n" in text[start:] else self.n])
        pos = self.body(comp, pos)
        if inline_name is not None:  # named when done, as XLA does: inner ones first
            comp.name = self.inline_comp_name()
        self.comp_names.add(comp.name)
        if inline_name is None:
            # '}' then maybe ', execution_thread="..."' and a comment ('} // name')
            attrs: dict[str, str] = {}
            try:
                pos = self.attributes(pos, attrs, None)
            except _Fail as f:
                raise self.error(f.message, f.pos) from None
            if "execution_thread" in attrs:
                comp.execution_thread = unquote(attrs["execution_thread"])
            q = _WS_RE.match(text, pos).end()
            line_end = text.find("\n", pos)
            line_end = self.n if line_end < 0 else line_end
            if q < min(line_end, self.n) and text[q] not in "\n":
                raise self.error("unexpected text after '}' (expected a new line, a comment or "
                                 "', execution_thread=\"...\"')", q)
        self.comps.append(comp)
        return pos

    def comp_header(self, pos: int) -> tuple[Computation, int]:
        text = self.text
        start = pos
        try:
            entry = False
            m = _ENTRY_RE.match(text, pos)
            if m:
                entry = True
                pos = self.ws(m.end())
            m = _NAME_RE.match(text, pos)
            if not m:
                raise _Fail("expected a computation header like 'ENTRY %main {' or a stack-frame table", pos)
            name = m.group(1)
            pos = self.ws(m.end())
            sig = ""
            if text.startswith("(", pos):
                s0 = pos
                pos = _scan(text, pos, True)
                pos = self.ws(pos)
                if not text.startswith("->", pos):
                    raise _Fail("expected '->' and the result shape after the parameters "
                                "(a computation header like 'ENTRY %main (p: f32[4]) -> f32[4] {')", pos)
                pos = self.ws(pos + 2)
                _, pos = self.shape(pos)
                sig = _one_line(text[s0:pos])
                pos = self.ws(pos)
            if not text.startswith("{", pos):
                raise _Fail("expected '{' to open the computation (a computation header like "
                            "'ENTRY %main {')", pos)
        except _Fail as f:
            raise self.error(f.message if "computation header" in f.message
                             else f.message + " in a computation header", f.pos, start, f.at) from None
        return Computation(name, [], entry, signature=sig, line=self.line_at(start), module=self.module), pos + 1

    def body(self, comp: Computation, pos: int) -> int:
        """Instructions up to the closing '}' (returns the position after it)."""
        text, n = self.text, self.n
        fast_re, attr_re, _ = prepare()
        fast = fast_re.match if self.fast else None
        attrs_of = attr_re.findall
        shared = self.shared
        insts = comp.instructions
        scope = _Scope()
        names = scope.names
        line = self.line_at(pos)
        last_end = -1  # where the previous instruction ended
        while True:
            b = _BLANK_RE.match(text, pos)
            if b:
                line += text.count("\n", pos, b.end())
                pos = b.end()
            if fast is not None:
                m = fast(text, pos)
                if m:
                    root, name, shape_text, opcode, operand_text, attr_text = m.groups()
                    if opcode in _NON_OPERAND_OPCODES:  # a literal: its brackets must balance
                        ops = [] if "}" not in operand_text or _balanced_literal(text, m.start(5) - 1, m.end(5)) \
                            else None
                    else:
                        ops = _operand_names(operand_text)
                        if ops:
                            if scope.renamed or "#" in operand_text:
                                ops = self.fast_operands(ops, scope, comp, line, m.start(5))
                            # the defining instruction's name string, not a copy per use
                            ops = [names[o].name if o in names else o for o in ops]
                    if ops is not None and name not in names and not (
                            "\n" in attr_text and _INLINE_CALL_RE.search(attr_text)):
                        wrapped = 0
                        if "\n" in shape_text:  # a tuple shape wrapped over lines
                            wrapped = shape_text.count("\n")
                            shape_text = _one_line(shape_text)
                        try:
                            cached_shape(shape_text)
                        except ShapeParseError as err:
                            raise self.error(f"bad shape: {err}", m.start(3)) from None
                        # names and values one string each: a big module's attribute values (mostly
                        # metadata texts) repeat (docs/performance.md)
                        one = shared.setdefault
                        inst = Instruction(name, one(opcode, opcode), one(shape_text, shape_text), ops,
                                           {one(k, k): one(v, v) for k, v in attrs_of(attr_text)}
                                           if attr_text else {}, root is not None, line, operand_text, comp)
                        insts.append(inst)
                        names[name] = inst
                        pos = m.end()
                        last_end = pos - 1
                        line += 1 + wrapped + attr_text.count("\n")
                        continue
            s = self.ws(pos)
            if s >= n:
                raise self.error(f"computation {_short(comp.name)!r} is not closed with '}}'", s)
            if text[s] == "}":
                comp.__dict__["by_name"] = names
                return s + 1
            pos = last_end = self.instruction(comp, s, scope, last_end)
            line = self.line_at(pos)

    def fast_operands(self, ops: list[str], scope: _Scope, comp: Computation, line: int, pos: int) -> list[str]:
        out = []
        for o in ops:
            if "#" in o:
                try:
                    o = scope.element(o, comp, line)
                except ValueError as e:
                    raise self.error(str(e), pos) from None
            else:
                o = scope.resolve(o)
            out.append(o)
        return out

    # -- instructions (general parser)

    def instruction(self, comp: Computation, s: int, scope: _Scope, last_end: int) -> int:
        text = self.text
        same_line = last_end >= 0 and text.find("\n", last_end, s) < 0
        try:
            if text.startswith(",", s) and comp.instructions:
                # attributes of the previous instruction, wrapped onto this line
                prev = comp.instructions[-1]
                return self.attributes(s, prev.attributes, comp)
            p = s
            m = _ROOT_RE.match(text, p)
            root = False
            if m:
                root, p = True, self.ws(m.end())
            m = _NAME_RE.match(text, p)
            if m:
                name = m.group(1)
                q = self.ws(m.end())
            if not m or not text.startswith("=", q):
                if same_line:
                    raise _Fail("unexpected text after instruction (expected ', key=value' or end of line)", s)
                if not m:
                    raise _Fail("expected an instruction 'name = shape opcode(operands)' or '}'", p)
                raise _Fail(f"expected an instruction 'name = shape opcode(operands)': no '=' after "
                            f"{_short(name)!r}", m.end())
            p = self.ws(q + 1)
            inst, p = self.instruction_rhs(comp, p, name, root, s, scope, 0)
        except _Fail as f:
            raise self.error(f.message, f.pos, s, f.at) from None
        own = scope.claim(name)
        if own is None:
            raise HloParseError(f"duplicate instruction name {_short(name)!r}", inst.line, 1, inst.text)
        inst.name = own
        comp.instructions.append(inst)
        scope.names[own] = inst
        return p

    def instruction_rhs(self, comp: Computation, p: int, name: str | None, root: bool, s: int,
                        scope: _Scope, depth: int) -> tuple[Instruction, int]:
        """``[shape] opcode(operands)[, attrs]`` at ``p``. ``name`` None: an inline operand,
        which goes into the computation (before its user) under a name made up as XLA does."""
        text = self.text
        line = self.line_at(s)
        if depth > _MAX_DEPTH:
            raise _Fail(f"instructions written inside operands nest deeper than {_MAX_DEPTH}", p)
        shape_text = None
        shape_start = shape_end = p
        if self.at_shape(p):
            shape_text, shape_end = self.shape(p)
            p = self.ws(shape_end)
        m = _OPCODE_RE.match(text, p)
        if not m or not text.startswith("(", self.ws(m.end())):
            if shape_text is None:
                raise _Fail(self.shape_error(p), p)
            raise _Fail("expected 'opcode(operands)' after the shape", shape_end)
        opcode = m.group(1)
        p = self.ws(m.end())
        open_pos = p
        if opcode in _NON_OPERAND_OPCODES:
            p = _scan(text, p, True)
            operand_text = text[open_pos + 1:p - 1]
            ops: list[str] = []
        else:
            ops, p, inline = self.operands(comp, p, s, scope, depth)
            operand_text = _one_line(text[open_pos + 1:p - 1])
            if inline:  # written back as names: the inline instructions are instructions now
                operand_text = ", ".join("%" + o for o in ops)
        attrs: dict[str, str] = {}
        if name is not None:  # (an inline operand has no attributes: XLA reads a ',' as the next operand)
            p = self.attributes(p, attrs, comp)
        if shape_text is None:
            shape_text = self.infer_shape(opcode, ops, scope.names, attrs, shape_start)
        else:
            try:
                cached_shape(shape_text)
            except ShapeParseError as err:
                raise _Fail(f"bad shape: {err}", shape_start) from None
        if name is None:
            name = scope.fresh(opcode + ".anon")  # (XLA's name for an instruction written inline as an operand)
            inst = Instruction(name, opcode, shape_text, ops, attrs, False, line, operand_text, comp)
            comp.instructions.append(inst)
            scope.names[name] = inst
            scope.made.add(name)
            return inst, p
        return Instruction(name, opcode, shape_text, ops, attrs, root, line, operand_text, comp), p

    def at_shape(self, p: int) -> bool:
        text = self.text
        if text.startswith(("(", "b("), p):
            return True
        m = _ELEMENT_RE.match(text, p)
        return m is not None

    def shape_error(self, p: int) -> str:
        end = p
        while end < self.n and not self.text[end].isspace() and end - p < 40:
            end += 1
        return (f"bad shape {self.text[p:end]!r} (expected a shape like f32[2,3]{{1,0}} and then "
                "'opcode(operands)')")

    def shape(self, p: int, depth: int = 0) -> tuple[str, int]:
        """A shape at ``p`` (spaces, newlines and comments allowed inside); its text and end."""
        text = self.text
        start = p
        if text.startswith("(", p):
            if depth >= _MAX_DEPTH:
                raise _Fail(f"tuple shape nested deeper than {_MAX_DEPTH}", p)
            p = self.ws(p + 1)
            if not text.startswith(")", p):
                while True:
                    _, p = self.shape(p, depth + 1)
                    p = self.ws(p)
                    if text.startswith(")", p):
                        break
                    if not text.startswith(",", p):
                        raise _Fail("expected ',' or ')' in a tuple shape", p)
                    p = self.ws(p + 1)
            return _one_line(text[start:p + 1]), p + 1
        if text.startswith("b(", p):  # a buffer: 'b(f32[16])'
            _, p = self.shape(self.ws(p + 2), depth + 1)
            p = self.ws(p)
            if not text.startswith(")", p):
                raise _Fail("expected ')' to close a buffer shape b(...)", p)
            return _one_line(text[start:p + 1]), p + 1
        m = _ELEMENT_RE.match(text, p)
        if not m:
            raise _Fail(self.shape_error(p), p)
        d = _DIMS_RE.match(text, m.end())
        if not d:
            raise _Fail("']' expected to close the dimensions of a shape", m.end() - 1)
        p = d.end()
        q = self.ws(p)
        if _LAYOUT_START_RE.match(text, q):
            lm = _LAYOUT_RE.match(text, q)
            if not lm:
                raise _Fail("'{' of a layout is not closed", q)
            p = lm.end()
        return _one_line(text[start:p]), p

    def operands(self, comp: Computation, p: int, s: int, scope: _Scope, depth: int) -> tuple[list[str], int, bool]:
        """``(operand, ...)`` at ``p``; each ``[shape] [%]name[#index...]`` or an instruction
        written inline (``f32[2] parameter(0)``). Returns the names, the end and whether any
        was inline."""
        text, n = self.text, self.n
        open_pos = p
        p = self.ws(p + 1)
        out: list[str] = []
        inline = False
        if text.startswith(")", p):
            return out, p + 1, inline
        while True:
            item = p
            if p >= n:
                raise _Fail("'(' is not closed before the end of the text", open_pos, p)
            has_shape = False
            if self.at_shape(p):
                _, p = self.shape(p)
                p = self.ws(p)
                has_shape = True
            m = _NAME_RE.match(text, p)
            if m and text.startswith("(", self.ws(m.end())):
                sub, p = self.instruction_rhs(comp, item, None, False, s, scope, depth + 1)
                out.append(sub.name)
                inline = True
            elif m:
                ref, p = m.group(1), m.end()
                h = _HASH_INDEX_RE.match(text, self.ws(p)) if "#" in text[p:p + 80] else None
                while h:
                    ref, p = f"{ref}#{int(h.group(1))}", h.end()
                    h = _HASH_INDEX_RE.match(text, self.ws(p))
                if "#" in ref:
                    try:
                        out.append(scope.element(ref, comp, self.line_at(s)))
                    except ValueError as e:
                        raise _Fail(str(e), m.start()) from None
                else:
                    out.append(scope.resolve(ref))
            elif text.startswith((")", ","), p):
                raise _Fail("expected an operand name" + (" after its shape" if has_shape else ""), p)
            else:
                raise _Fail("expected an operand: a name, a shape and a name, or an instruction", p)
            p = self.ws(p)
            if text.startswith(")", p):
                return out, p + 1, inline
            if not text.startswith(",", p):
                if p >= n:
                    raise _Fail("'(' is not closed before the end of the text", open_pos, p)
                if text[p] in "]}":
                    raise _Fail(f"'(' is not closed: found {text[p]!r} where ')' was expected", open_pos, p)
                raise _Fail("expected ',' or ')' after an operand", p)
            p = self.ws(p + 1)
            if text.startswith(")", p):  # a trailing ',' (XLA takes it)
                return out, p + 1, inline

    def attributes(self, p: int, attrs: dict, comp: Computation | None, nested: bool = False) -> int:
        """``, key=value`` pairs from ``p``; returns the position after the last one (before
        the whitespace that follows it). ``nested``: an inline operand's, where a ',' not
        followed by 'key=' separates the next operand."""
        text = self.text
        while True:
            q = self.ws(p)
            if not text.startswith(",", q):
                return p
            q = self.ws(q + 1)
            k = _KEY_RE.match(text, q)
            if not k:
                if nested:
                    return p
                raise _Fail("expected 'key=value' after ','", q)
            key = k.group(1)
            v = self.ws(k.end())
            if (comp is not None and key in _CALL_ATTR_SET and text.startswith("{", v)
                    and self._inline_computation(v)):
                end = self.computation(v, inline_name="")
                attrs[key] = "%" + self.comps[-1].name
                p = end
                continue
            end = self.value(v)
            if key == "literal" and end > v:  # 'literal=s32[2]{0} {1, 2}': a shape, then the values
                q = self.ws(end)
                if text.startswith(("{", "("), q) or _PLAIN_VALUE_RE.match(text, q):
                    end = self.value(q)
            elif key == "replica_groups" and text.startswith("mesh[", v):
                # XLA:GPU's mesh form: "mesh['axis_0'=1,'axis_1'=2] {'axis_1'}" (a mesh, then its axes)
                q = self.ws(end)
                if text.startswith("{", q):
                    end = self.value(q)
            if end == v:
                raise _Fail(f"expected a value after '{_short(key)}='", v)
            attrs[key] = text[v:end].strip()
            p = end

    def _inline_computation(self, v: int) -> bool:
        q = self.ws(v + 1)
        m = _ROOT_RE.match(self.text, q)
        if m:
            return True
        m = _NAME_RE.match(self.text, q)
        return bool(m) and self.text.startswith("=", self.ws(m.end()))

    def inline_comp_name(self) -> str:
        name, k = "_", 0  # (XLA's name for a computation written inline)
        while name in self.comp_names:
            k += 1
            name = f"_.{k}"
        return name

    def value(self, p: int) -> int:
        """An attribute value at ``p``: tokens and bracketed groups up to top-level whitespace,
        ',' or an unmatched closing bracket."""
        text, n = self.text, self.n
        while p < n:
            c = text[p]
            if c in "({[":
                p = _scan(text, p, True)
            elif c == '"':
                m = _STR_RE.match(text, p)
                if not m:
                    raise _Fail("unterminated string", p)
                p = m.end()
            elif c == "/":
                if text.startswith("/*", p) or text.startswith("//", p):
                    return p
                p += 1
            else:
                m = _PLAIN_VALUE_RE.match(text, p)
                if not m:
                    return p
                p = m.end()
        return p

    def infer_shape(self, opcode: str, ops: list[str], names: dict, attrs: dict, pos: int) -> str:
        """The shape XLA would infer for an instruction written without one (common opcodes)."""
        shapes = [names[o].shape if o in names else None for o in ops]
        out = None
        if all(sh is not None for sh in shapes):
            try:
                out = inferred_shape(opcode, shapes, attrs, {c.name: c for c in self.comps})
            except (IndexError, KeyError, ValueError, AttributeError):
                out = None
        if out is None:
            raise _Fail(f"instruction has no shape, and this parser cannot infer it for {_short(opcode)!r} "
                        f"(it infers {INFERRED}); write the shape: 'name = f32[...] {_short(opcode)}(...)'", pos)
        return out


def parse_module(text: str) -> Module:
    """Parse an HLO module's text. Raises HloParseError (with line and column) if malformed."""
    return parse_text(text)


def parse_text(text: str, fast: bool = True) -> Module:
    """``fast=False`` reads every instruction with the general parser (tests compare the two)."""
    if not isinstance(text, str):
        raise TypeError("parse_module expects str")
    if "\r" in text:  # Windows line endings (a file saved on Windows, a browser upload)
        text = text.replace("\r\n", "\n")
    # (no collector tuning here: this package imports nothing of the project's; whoever parses
    # a big module does so inside ``analysis.tuning.building``)
    return _Parser(text, fast).parse()


def _check(module: Module) -> None:
    names = module.by_name
    entries = [c for c in module.computations if c.is_entry]
    if len(entries) > 1:
        raise HloParseError(f"more than one ENTRY computation ({_short(entries[0].name)!r} and "
                            f"{_short(entries[1].name)!r})", entries[1].line, 1, "ENTRY " + entries[1].name)
    for comp in module.computations:
        local = comp.by_name
        roots = [i for i in comp.instructions if i.is_root]
        if len(roots) > 1:
            raise HloParseError(f"computation {_short(comp.name)!r} has more than one ROOT", roots[1].line, 1,
                                roots[1].text)
        for inst in comp.instructions:
            for o in inst.operands:
                if o not in local:
                    raise HloParseError(f"operand {_short(o)!r} of {_short(inst.name)!r} is not defined in computation "
                                        f"{_short(comp.name)!r}", inst.line, 1, inst.text)
            if inst.attributes.keys().isdisjoint(_CALL_ATTR_SET):
                continue  # (skips building called_computations for most instructions)
            for cc in inst.called_computations:
                if cc not in names:
                    raise HloParseError(f"{_short(inst.name)!r} calls unknown computation {_short(cc)!r}", inst.line, 1, inst.text)
