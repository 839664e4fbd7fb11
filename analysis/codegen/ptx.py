"""Facts read from an XLA:GPU kernel's code: its PTX, ptxas's ``-v`` report and its SASS (issue
#36; docs/code.md, "On the GPU"). Pure Python: texts in, the facts dict of ``analysis.codegen.kernel_code`` out,
and the splitting of a module's texts into its kernels.

The definitions (the same for every view, the CLI and the report; a kernel's facts in a bundle
are all read from its PTX, which every GPU compile has, so a bundle made with or without ptxas
says the same; only ``registers`` and ``spills`` need ptxas):

- ``global_loads``: instructions written in the code that read global memory: ``ld.global``
  (``.nc`` too, any vector width), ``cp.async`` copies from global into shared memory (a Triton
  GEMM's operands), ``cp.async.bulk`` loads from global (TMA) and ``atom.global`` (it reads).
  Counted in the text, not executed: a loop's body counts once.
- ``global_stores``: ``st.global``, ``red.global``, ``atom.global`` and ``cp.async.bulk`` copies
  from shared into global memory.
- ``vector_width``: bits of the widest vector global load or store (``ld.global.v4.b32``: 4 x
  32 = 128); ``None`` when every one is scalar.
- ``instructions``: the PTX instructions (statements ending with ``;`` that are not directives
  such as ``.reg``), each statement of an inline-asm block too.
- ``registers``: the registers per thread ptxas allocated (``Used N registers``); ``None``
  without ptxas. The PTX's ``.reg`` declarations are virtual registers, far more than the
  hardware ones (``declared_registers``), and are not this fact.
- ``spills``: bytes ptxas spilled to local memory (its ``spill stores``); ``None`` without it.
- ``shared_bytes``: the shared memory a block of the kernel uses: the PTX's static ``.shared``
  arrays plus what the launch asks for (XLA's thunk sequence: Triton kernels' dynamic shared
  memory); ``None`` when neither is known.
"""

from __future__ import annotations

from analysis import linear_re
from analysis.codegen.kernel_code import empty_facts

# The texts come from a user's dump or bundle as well as from our compiles: RE2 patterns
# (``analysis.linear_re``), each run where a cheap test of the line finds what it needs; what meets
# every statement or instruction line is read with str methods.

# -- PTX ---------------------------------------------------------------------------------------

_FUNC_START = linear_re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?"
                                r"([\w$.]+)\s*\(?")
STATEMENT_OP = linear_re.compile(r"^(?:@!?%?\w+\s+)?([a-z][a-z0-9_]*(?:\.[a-z0-9_:]+)*)")
_REG_DECL = linear_re.compile(r"\.reg\s+\.\w+\s+%\w+(?:<(\d+)>)?")
# a static .shared array (not an .extern one, whose size the launch gives: see ptx_facts)
_SHARED_DECL = linear_re.compile(r"^\s*(?:\.\w+\s+)*\.shared\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+[\w$]+((?:\[\d*\])*)\s*;")
_DIMENSION = linear_re.compile(r"\[(\d*)\]")
_ASCII_DIGITS = frozenset("0123456789")
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")  # RE2's \w
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_OPCODE_CHARS = _LOWER | _ASCII_DIGITS | frozenset("_.:")
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_SASS_OPCODE_CHARS = _UPPER | _ASCII_DIGITS | frozenset("_.")
_HEX = frozenset("0123456789abcdef")


def _ptx_opcode(token: str) -> bool:
    """Whether ``token`` is a whole ``[a-z][a-z0-9_]*(?:\\.[a-z0-9_:]+)*``: a head that starts with
    a letter and has no ``:``, and no empty modifier."""
    if not token or token[0] not in _LOWER or not _OPCODE_CHARS.issuperset(token):
        return False
    head, *mods = token.split(".")
    return ":" not in head and all(mods)


def _after_blank(s: str) -> str | None:
    """``s`` past the spaces and tabs that open it (``\\s+``), None where none does or another
    kind of whitespace follows them (the pattern decides those)."""
    rest = s.lstrip(" \t")
    return rest if len(rest) < len(s) and not rest[:1].isspace() else None


def statement_op(s: str) -> str | None:
    """The opcode of a PTX statement (``STATEMENT_OP``'s group): the usual forms, an opcode or
    a predicate guard and an opcode (``@!%p1 bra``), read with str methods, where the pattern
    would stop at the token's end; any other goes to the pattern."""
    rest = s
    if s.startswith("@"):
        guard = s.split(None, 1)[0]
        name = guard[1:].removeprefix("!").removeprefix("%")
        rest = _after_blank(s[len(guard):]) if name and _WORD.issuperset(name) else None
    if rest is not None:
        token = rest.split(None, 1)[0] if rest and not rest[0].isspace() else ""  # the pattern's ^: no blank
        if _ptx_opcode(token):
            return token
    m = STATEMENT_OP.match(s)
    return m.group(1) if m else None


def _function_start(line: str):
    return _FUNC_START.match(line) if ".entry" in line or ".func" in line else None


def _type_bits(part: str) -> int | None:
    """N of a type modifier ``bN``/``sN``/``uN``/``fN`` (``^[bsuf](\\d+)$``), else None."""
    digits = part[1:]
    if part[:1] in ("b", "s", "u", "f") and digits and _ASCII_DIGITS.issuperset(digits):
        return int(digits) if len(digits) <= 30 else None
    return None


def after_labels(s: str) -> str:
    """A statement without the labels before it (``$L__BB0_2: add.s32 ...``: ``^[$\\w]+:\\s*``,
    again and again), read with str methods: every statement comes here."""
    if ":" not in s:
        return s
    i, n = 0, len(s)
    while True:
        j = i
        while j < n and (s[j] in _WORD or s[j] == "$"):
            j += 1
        if j == i or j == n or s[j] != ":":
            return s[i:]
        i = j + 1
        while i < n and s[i] in " \t\n\r\f":
            i += 1


def split_ptx(text: str) -> tuple[str, dict[str, str]]:
    """A PTX module -> (its header: version, target and module-level declarations; {name: text}
    of each ``.entry`` and ``.func`` defined, with the comment lines just above it; one whose
    body does not close, a damaged file's, is left out)."""
    header: list[str] = []
    funcs: dict[str, str] = {}
    lines = text.splitlines()
    i, n = 0, len(lines)
    pending: list[str] = []  # comment lines that may open the next function (``// .globl X``)
    while i < n:
        m = _function_start(lines[i])
        if not m or lines[i].rstrip().endswith(";"):  # a declaration (``.extern .func f(...);``)
            if lines[i].lstrip().startswith("//") or not lines[i].strip():
                pending.append(lines[i])
            else:
                header.extend(pending + [lines[i]])
                pending = []
            i += 1
            continue
        body = pending + [lines[i]]
        pending = []
        code = lines[i].split("//")[0]
        depth, opened = code.count("{") - code.count("}"), "{" in code
        i += 1
        while i < n and not (opened and depth <= 0):  # to the brace that closes its body
            body.append(lines[i])
            code = lines[i].split("//")[0]
            depth += code.count("{") - code.count("}")
            opened = opened or "{" in code
            i += 1
        if opened and depth <= 0:  # a function cut before its closing brace is not one
            funcs[m.group(2)] = "\n".join(body) + "\n"
    header.extend(pending)
    return "\n".join(header).rstrip() + "\n", funcs


def ptx_entries(text: str) -> list[str]:
    """The kernels (``.entry``) a PTX module defines, in order."""
    return [m.group(2) for m in map(_function_start, text.splitlines())
            if m and m.group(1) == "entry" and not m.string.rstrip().endswith(";")]


def _statements(text: str):
    """The PTX statements of a text: comments dropped, split at ``;``, braces and labels
    removed; directives (``.reg``...) kept (they start with a dot)."""
    for line in text.splitlines():
        code = line.split("//")[0]
        for part in code.split(";"):
            s = after_labels(part.strip().lstrip("{}").strip())
            s = s.rstrip("}").strip()
            if s:
                yield s


def _global_access(op: str) -> tuple[int, int, int | None]:
    """(loads, stores, vector bits) of one PTX opcode (``ld.global.nc.v4.f32``)."""
    parts = op.split(".")
    head = parts[0]
    spaces = [p for p in parts[1:] if p in ("global", "shared", "shared::cta", "shared::cluster", "local", "param", "const")]
    bits = None
    vec = next((int(p[1:]) for p in parts[1:]
                if p[:1] == "v" and 1 < len(p) <= 31 and _ASCII_DIGITS.issuperset(p[1:])), None)
    if vec:
        t = next((b for p in reversed(parts) if (b := _type_bits(p)) is not None), None)
        bits = vec * t if t else None
    if head in ("ld", "ldu") and spaces[:1] == ["global"]:
        return 1, 0, bits
    if head == "st" and spaces[:1] == ["global"]:
        return 0, 1, bits
    if head == "red" and "global" in spaces:
        return 0, 1, None
    if head == "atom" and "global" in spaces:
        return 1, 1, None
    if head == "cp" and len(parts) > 2 and parts[1].startswith("async") or head == "cp" and "reduce" in parts[1:2]:
        # cp.async[.bulk[.tensor...]].DST.SRC...: the first state space is where it writes
        where = [p.split("::")[0] for p in parts[1:] if p.split("::")[0] in ("global", "shared")]
        if where[:2] == ["shared", "global"]:
            return 1, 0, None
        if where[:2] == ["global", "shared"]:
            return 0, 1, None
    return 0, 0, None


def ptx_facts(text: str) -> dict:
    """The facts of a PTX text (one kernel's, or a module's: summed): ``global_loads``,
    ``global_stores``, ``vector_width``, ``instructions``, ``shared_bytes`` (static ``.shared``
    arrays; ``None`` when there are none) and ``declared_registers`` (the ``.reg`` declarations'
    virtual registers, not a bundle fact). ``registers`` and ``spills`` stay ``None``: they are
    ptxas's (``ptxas_facts``)."""
    facts = empty_facts()
    loads = stores = insts = declared = 0
    width = shared = None
    for s in _statements(text):
        if s.startswith("."):
            if ".reg" in s:
                for m in _REG_DECL.finditer(s):
                    declared += int(m.group(1)) if m.group(1) else 1
            sm = _SHARED_DECL.match(s + ";") if ".shared" in s and not s.lstrip().startswith(".extern") else None
            if sm:
                elem = _type_bits(sm.group(1))
                count = 1
                for d in _DIMENSION.findall(sm.group(2)):
                    count *= int(d) if d else 0
                shared = (shared or 0) + count * (elem // 8 if elem is not None else 1)
            continue
        op = statement_op(s)
        if op is None:
            continue
        insts += 1
        ld, st, bits = _global_access(op)
        loads += ld
        stores += st
        if bits and (ld or st) and (width is None or bits > width):
            width = bits
    facts.update(global_loads=loads, global_stores=stores, vector_width=width, instructions=insts,
                 shared_bytes=shared, stage="ptx")
    facts["declared_registers"] = declared
    return facts


# -- ptxas -v ----------------------------------------------------------------------------------

_PTXAS_ENTRY = linear_re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_USED = linear_re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = linear_re.compile(r"(\d+) bytes spill stores,\s*(\d+) bytes spill loads")
_PTXAS_SMEM = linear_re.compile(r"(\d+) bytes smem")


def split_ptxas(text: str) -> dict[str, str]:
    """ptxas's ``-v`` report of a module -> {entry name: its lines}, from ``Compiling entry
    function 'X'`` to the next one (the device functions compiled with it are in its lines; the
    module's own lines before the first entry, such as ``N bytes gmem``, are in none)."""
    out: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in text.splitlines():
        m = _PTXAS_ENTRY.search(line) if "Compiling entry function '" in line else None
        if m:
            cur = out.setdefault(m.group(1), [])
        if cur is not None:
            cur.append(line)
    return {k: "\n".join(v) + "\n" for k, v in out.items()}


def ptxas_facts(text: str) -> dict:
    """Facts of one entry's ptxas ``-v`` report: ``registers`` (``Used N registers``),
    ``spills`` (bytes of spill stores, of the entry and the device functions in its lines) and
    ``shared_bytes`` (``N bytes smem``, static shared memory). What the report does not say is
    ``None``; loads and stores are not in it (0)."""
    facts = empty_facts()
    regs = [int(x) for x in _PTXAS_USED.findall(text) if len(x) <= 30] if "Used " in text else []
    spills = [int(a) for a, _ in _PTXAS_SPILL.findall(text) if len(a) <= 30] if "spill stores" in text else []
    smem = [int(x) for x in _PTXAS_SMEM.findall(text) if len(x) <= 30] if " bytes smem" in text else []
    facts.update(registers=max(regs) if regs else None, spills=sum(spills) if spills else None,
                 shared_bytes=max(smem) if smem else (0 if regs else None), stage="ptxas")
    return facts


# -- SASS (nvdisasm / cuobjdump -sass) ---------------------------------------------------------

_SASS_SECTION = linear_re.compile(r"^\s*\.section\s+\.text\.([\w$.]+)|^\s*Function\s*:\s*([\w$.]+)")
SASS_INST = linear_re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)")
_SASS_BITS = {"8": 8, "U8": 8, "S8": 8, "16": 16, "U16": 16, "S16": 16, "64": 64, "128": 128}


def split_sass(text: str) -> dict[str, str]:
    """A cubin's SASS (nvdisasm's ``.text.NAME`` sections, or cuobjdump's ``Function : NAME``
    blocks) -> {kernel name: its SASS}."""
    out: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in text.splitlines():
        m = _SASS_SECTION.match(line) if ".section" in line or "Function" in line else None
        if m:
            cur = out.setdefault(m.group(1) or m.group(2), [])
        if cur is not None:
            cur.append(line)
    return {k: "\n".join(v) + "\n" for k, v in out.items()}


def plain_whitespace(text: str) -> bool:
    """Whether the whitespace of ``text`` is what both ``str.split()`` and RE2's ``\\s`` take
    (ASCII, no ``\\v``, no ``\\x1c``-``\\x1f``): then a line split at whitespace is split where
    the pattern would be."""
    return text.isascii() and not any(c in text for c in "\x0b\x1c\x1d\x1e\x1f")


def sass_instruction(line: str, plain: bool) -> tuple[str, str] | None:
    """(opcode, its modifiers: ``.E.128`` or "") of a SASS line (``SASS_INST``'s groups). In a
    ``plain_whitespace`` text the usual line, ``  /*0040*/  [@!P0 ]LDG.E.128 R4, ...``, is read with str
    methods (every line comes here); any other that may be one goes to the pattern."""
    if "/*" not in line:
        return None
    if plain:
        parts = line.split(None, 2)
        addr = parts[0]
        if addr[:2] != "/*" or addr[-2:] != "*/" or len(addr) < 8 or not _HEX.issuperset(addr[2:-2]):
            return None  # an encoding line (/* 0x... */), or no address first
        op = parts[1] if len(parts) > 1 else ""
        if op[:1] == "@" and len(parts) > 2:
            name = op[1:].removeprefix("!").removeprefix("U")
            op = parts[2].split(None, 1)[0] if name[:1] == "P" and len(name) > 1 and _WORD.issuperset(name) else ""
        if op[-1:] == ";":  # the pattern stops at it as at a space (``NOP;``)
            op = op[:-1]
        if op[:1] in _UPPER and _SASS_OPCODE_CHARS.issuperset(op) and ".." not in op and op[-1] != ".":
            head, dot, mods = op.partition(".")
            return head, dot + mods
    m = SASS_INST.match(line)
    return (m.group(1), m.group(2)) if m else None


def sass_facts(text: str) -> dict:
    """Facts of a kernel's SASS: ``global_loads`` (``LDG``, ``LDGSTS``: global into shared,
    ``UTMALDG``: TMA loads, ``ATOMG``), ``global_stores`` (``STG``, ``RED``, ``ATOMG``,
    ``UTMASTG``), ``vector_width`` (the widest LDG/STG of more than 32 bits: ``LDG.E.128``),
    ``instructions`` (every instruction line, ``NOP`` padding too)."""
    facts = empty_facts()
    loads = stores = insts = 0
    width = None
    plain = plain_whitespace(text)
    for line in text.splitlines():
        got = sass_instruction(line, plain)
        if got is None:
            continue
        insts += 1
        op = got[0]
        ld = op in ("LDG", "LDGSTS", "UTMALDG", "ATOMG")
        st = op in ("STG", "RED", "REDG", "ATOMG", "UTMASTG", "UTMAREDG")
        loads += ld
        stores += st
        if op in ("LDG", "STG"):
            mods = got[1].lstrip(".").split(".") if got[1] else []
            bits = max((_SASS_BITS.get(x, 0) for x in mods), default=0)
            if bits > 32 and (width is None or bits > width):
                width = bits
    facts.update(global_loads=loads, global_stores=stores, vector_width=width, instructions=insts,
                 stage="sass")
    return facts
