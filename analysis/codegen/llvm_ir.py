"""The memory accesses of an XLA:CPU kernel's LLVM IR: which loads and stores go through the
kernel's buffers, and which buffer (the one definition ``analysis.codegen.kernel_code``'s facts and
``analysis.codegen.links``' links both read; docs/code.md).

XLA:CPU calls a kernel as ``ptr @KERNEL(ptr %frame)``: the call frame
(``%XLA_CPU_KernelCallFrame = { ptr, ptr, i64, ptr }``) holds at field 3 an array of
``%XLA_CPU_KernelArg = { ptr, i64 }``, one per buffer (the kernel's operands, then its
results). A buffer pointer is a pointer loaded from slot *k* of that array (buffer *k*), a
pointer made from one (``getelementptr``, ``bitcast``, ``phi``, ``select``), and a parameter of
a function the kernel passes one to (the emitters' ``_wrapped``/``_impl`` functions; where no call
names them, the function's ``dereferenceable`` pointer parameters, in order). Loads and stores
through buffer pointers are the kernel's memory accesses; ``llvm.memcpy``/``memmove`` count as
a load of the source and a store to the destination, ``llvm.memset`` and ``llvm.masked.store``
as a store, ``llvm.masked.load`` as a load. Stack memory (``alloca``) and the call frame are not
buffers. Counted in the text (a loop's body once), not as executed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from analysis import linear_re

# The text is a user's upload (a dump, a bundle): RE2 patterns only (``analysis.linear_re``), each
# behind a cheap test of the line. What meets every line or operand (an assignment, a label, the
# values a line names, the usual ``ptr %v``) is read with str methods: an RE2 call costs ten times
# what ``re`` did on a short line.
_DEFINE = linear_re.compile(r"^define\b[^@]*@\"?([\w.$-]+)\"?\s*\((.*)\)[^(]*$")
_RETURNS_PTR = linear_re.compile(r"\bptr\s+@")
PTR = linear_re.compile(r"\bptr\b(?:\s+addrspace\(\d+\))?(?:\s+(?:noalias|nonnull|noundef|nocapture|readonly|"
                         r"writeonly|align\s+\d+|dereferenceable(?:_or_null)?\(\d+\)|captures\([^)]*\)|nofree|"
                         r"[\w]+))*\s+%([\w.$-]+)")
_FRAME_FIELD = linear_re.compile(r"getelementptr\b.*%XLA_CPU_KernelCallFrame,\s*ptr\s+%([\w.$-]+),\s*i\d+\s+0,"
                                 r"\s*i\d+\s+3\b")
_SLOT = linear_re.compile(r"getelementptr\b.*%XLA_CPU_KernelArg,\s*ptr\s+%([\w.$-]+),\s*i\d+\s+(\d+)"
                          r"(?:,\s*i\d+\s+0)?\s*$")
_BYTES = linear_re.compile(r"getelementptr\b[^,]*\bi8,\s*ptr\s+%([\w.$-]+),\s*i64\s+(\d+)\s*$")
_CALL = linear_re.compile(r"\bcall\b[^@]*@\"?([\w.$-]+)\"?\s*\((.*)\)")
_VECTOR = linear_re.compile(r"<\s*(\d+)\s+x\s+(\w+)\s*>")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.$-")  # RE2's [\w.$-]
_DIGITS = frozenset("0123456789")
_BLANKS = " \t\n\r\f"  # RE2's \s
_DERIVES = ("getelementptr", "bitcast", "phi", "select", "addrspacecast")
_SCALAR_BITS = {"half": 16, "bfloat": 16, "float": 32, "double": 64, "fp128": 128, "ptr": 64}
FRAME_ARGS_OFFSET = 24  # bytes to field 3 of the call frame
KERNEL_ARG_BYTES = 16  # sizeof(XLA_CPU_KernelArg)


@dataclass(frozen=True)
class Access:
    line: int  # 1-based, in the text
    kind: str  # "load" | "store"
    buffers: frozenset  # the buffer numbers it may touch (operands first, then results)
    bits: int | None  # a vector access's width in bits; None for a scalar one


@dataclass
class _Function:
    name: str
    params: list  # parameter value names, in order (pointers and not)
    deref: list  # the dereferenceable pointer parameters, in order
    lines: list  # (line number, text) of its body
    frame: bool  # ``ptr @f(ptr %frame)``: XLA:CPU's kernel entry


def is_name(s: str) -> bool:
    """Whether ``s`` is an LLVM value or label name: ``[\\w.$-]+`` (ASCII, as LLVM writes them
    and as the RE2 patterns here read ``\\w``)."""
    return bool(s) and _NAME_CHARS.issuperset(s)


def _name_at(s: str, i: int = 0) -> str:
    """The longest name (``[\\w.$-]*``) that starts at ``s[i]``."""
    j, n = i, len(s)
    while j < n and s[j] in _NAME_CHARS:
        j += 1
    return s[i:j]


def values(text: str) -> list[str]:
    """The values a text names, in order: ``%([\\w.$-]+)``'s ``findall``, read with str methods
    (it meets every instruction that derives a pointer)."""
    return [v for piece in text.split("%")[1:] if (v := _name_at(piece))]


def pointer_of(operand: str) -> str | None:
    """The value of an operand's pointer (``ptr [attributes] %v``: ``PTR``), or None. The usual
    operand, ``ptr %v``, is read with str methods; any other goes to the pattern."""
    s = operand.lstrip()
    if s.startswith("ptr %"):
        v = _name_at(s, 5)
        if v:
            return v
    p = PTR.search(operand) if "ptr" in operand else None
    return p.group(1) if p else None


def assignment(line: str) -> tuple[str, str] | None:
    """``(name, rest)`` of an instruction line ``%name = rest`` (``^\\s*%([\\w.$-]+)\\s*=\\s*(.*)$``
    on a line), else None: read with str methods, it meets every line of a body."""
    s = line.lstrip(_BLANKS)
    if s[:1] != "%":
        return None
    head, eq, rest = s.partition("=")
    name = head[1:].rstrip(_BLANKS)
    if not eq or not name or not _NAME_CHARS.issuperset(name):  # is_name, inline: every line comes here
        return None
    return name, rest.lstrip(_BLANKS)


def functions(text: str) -> list[_Function]:
    out, cur = [], None
    for n, line in enumerate(text.splitlines(), 1):
        if cur is None:
            m = _DEFINE.match(line) if line.startswith("define") else None
            if m:
                params = _split(m.group(2))
                names = [(values(p) or [None])[-1] for p in params]
                cur = _Function(m.group(1), names, [v for p, v in zip(params, names) if v and "dereferenceable" in p
                                                     and p.lstrip().startswith("ptr")],
                                [], _RETURNS_PTR.search(line) is not None
                                and len(params) == 1 and params[0].lstrip().startswith("ptr"))
            continue
        if line.startswith("}"):
            out.append(cur)
            cur = None
        else:
            cur.lines.append((n, line))
    return out


def _split(args: str) -> list[str]:
    """Top-level comma-separated parts (commas inside (), [], {}, <> are kept)."""
    parts, depth, cur = [], 0, []
    for ch in args:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def _int(digits: str) -> int | None:
    """A number the text writes, or None past 30 digits (no index or width is that long, and
    ``int`` refuses a string of thousands)."""
    return int(digits) if len(digits) <= 30 else None


def _type_bits(t: str) -> int | None:
    m = _VECTOR.search(t) if "<" in t else None
    if not m:
        return None
    elem = m.group(2)
    bits = _SCALAR_BITS.get(elem) or (_int(elem[1:]) if elem[:1] == "i" and elem[1:].isdigit() else None)
    lanes = _int(m.group(1))
    return lanes * bits if bits and lanes is not None else None


def buffers(text: str) -> tuple[list[_Function], dict]:
    """The functions of ``text`` and, per function name, {value: buffer numbers} of its buffer
    pointers (the module docstring's definition)."""
    fns = functions(text)
    bodies = {id(f): _body(f) for f in fns}  # read once; the rounds below only follow names
    given: dict[str, dict[int, set]] = {}  # callee -> parameter position -> buffer numbers
    result: dict[str, dict] = {}
    for _ in range(8):  # a call passes buffers on to the next function; a few levels deep at most
        before = {f: {p: set(s) for p, s in v.items()} for f, v in given.items()}
        for f in fns:
            result[f.name] = _function_buffers(f, bodies[id(f)], given.get(f.name), given)
        if before == given:
            break
    return fns, result


def _body(f: _Function) -> tuple[list, list]:
    """What ``_function_buffers`` follows in a body, read from the text once: the values it
    defines that may hold a pointer (``[name, "derive", text, values used, its _gep_fields or
    None until asked]`` and ``[name, "load ptr", address]``), and the calls to functions that are
    not intrinsics (``(callee, [(argument position, pointer value)])``)."""
    defs: list[list] = []
    for _, line in f.lines:
        a = assignment(line)
        if a is None:
            continue
        name, rhs = a[0], a[1].strip()
        if rhs.startswith(_DERIVES):
            defs.append([name, "derive", rhs, values(rhs), None])
        elif rhs.startswith("load ptr"):
            src = values(rhs.split(",", 1)[1]) if "," in rhs else []
            defs.append([name, "load ptr", src[0] if src else None])
    calls: list[tuple] = []
    for _, line in f.lines:  # buffers passed on to the functions it calls
        c = _CALL.search(line) if "call" in line else None
        if not c or c.group(1).startswith("llvm."):
            continue
        args = []
        for pos, a in enumerate(_split(c.group(2))):
            if a.lstrip().startswith("ptr"):
                vs = values(a)
                if vs:
                    args.append((pos, vs[-1]))
        calls.append((c.group(1), args))
    return defs, calls


def _gep_fields(rhs: str) -> tuple:
    """(the call frame whose field 3 it addresses, (arg array, slot), (base, byte offset)) of a
    ``getelementptr``, each None where it is not one."""
    gep = "getelementptr" in rhs
    fm = _FRAME_FIELD.search(rhs) if gep and "%XLA_CPU_KernelCallFrame," in rhs else None
    sm = _SLOT.search(rhs) if gep and "%XLA_CPU_KernelArg," in rhs else None
    bm = _BYTES.search(rhs) if gep and "i8," in rhs and rhs[-1:] in _DIGITS else None
    slot = (sm.group(1), _int(sm.group(2))) if sm and _int(sm.group(2)) is not None else None
    offset = (bm.group(1), _int(bm.group(2))) if bm and _int(bm.group(2)) is not None else None
    return fm.group(1) if fm else None, slot, offset


def _function_buffers(f: _Function, body: tuple[list, list], from_calls: dict | None, given: dict) -> dict:
    arg_of: dict[str, set] = {}
    if from_calls:
        for pos, bufs in from_calls.items():
            if pos < len(f.params) and f.params[pos]:
                arg_of[f.params[pos]] = set(bufs)
    elif not f.frame:
        arg_of = {v: {k} for k, v in enumerate(f.deref)}
    frame = {f.params[0]} if f.frame and f.params and f.params[0] else set()
    field3, arrays, slots = set(), set(), {}
    defs, calls = body
    for _ in range(20):  # phis can name values defined below them
        changed = False
        for d in defs:
            name = d[0]
            if d[1] == "derive":
                used = d[3]
                # the frame or an arg array is one of the values it uses, or none of the three is
                # what it is (the patterns run for those few lines alone)
                if any(v in frame or v in arrays for v in used):
                    if d[4] is None:
                        d[4] = _gep_fields(d[2])
                    fm, sm, bm = d[4]
                    if fm is not None and fm in frame or bm and bm[0] in frame and bm[1] == FRAME_ARGS_OFFSET:
                        field3.add(name)
                        continue
                    if sm and sm[0] in arrays:
                        slots[name] = sm[1]
                        continue
                    if bm and bm[0] in arrays and bm[1] % KERNEL_ARG_BYTES == 0:
                        slots[name] = bm[1] // KERNEL_ARG_BYTES
                        continue
                hit = set().union(*[arg_of[v] for v in used if v in arg_of])
                if hit and not hit <= arg_of.get(name, set()):
                    arg_of[name] = arg_of.get(name, set()) | hit
                    changed = True
            else:
                src = d[2]
                if src in field3:
                    arrays.add(name)
                elif src in slots and name not in arg_of:
                    arg_of[name] = {slots[src]}
                    changed = True
                elif src in arrays and name not in arg_of:
                    arg_of[name] = {0}  # slot 0, read from the array's start
                    changed = True
        if not changed:
            break
    for callee, args in calls:
        for pos, v in args:
            if v in arg_of:
                given.setdefault(callee, {}).setdefault(pos, set()).update(arg_of[v])
    return arg_of


def is_label(s: str) -> bool:
    """``^[\\w.$-]+:``: a basic block's label line (stripped)."""
    head, colon, _ = s.partition(":")
    return bool(colon) and is_name(head)


def accesses(text: str) -> tuple[list[Access], int]:
    """The memory accesses through the kernel's buffers, and the number of instructions."""
    fns, bufs = buffers(text)
    out, insts = [], 0
    type_bits = functools.lru_cache(maxsize=256)(_type_bits)  # a kernel's accesses use a few types, over and over
    for f in fns:
        arg_of = bufs.get(f.name, {})
        for n, line in f.lines:
            s = line.strip()
            if not s or s.startswith(";") or is_label(s):
                continue
            insts += 1
            a = assignment(line)
            rhs = a[1].strip() if a else s
            if rhs.startswith("load "):
                ty, _, rest = rhs[5:].partition(",")
                p = pointer_of(rest)
                if p in arg_of:
                    out.append(Access(n, "load", frozenset(arg_of[p]), type_bits(ty)))
            elif rhs.startswith("store "):
                parts = _split(rhs[6:])
                p = pointer_of(parts[1]) if len(parts) > 1 else None
                if p in arg_of:
                    out.append(Access(n, "store", frozenset(arg_of[p]), type_bits(parts[0])))
            elif "call" in rhs:
                c = _CALL.search(rhs)
                if not c or not c.group(1).startswith("llvm."):
                    continue
                callee, args = c.group(1), _split(c.group(2))

                def buf(i):
                    return arg_of.get(pointer_of(args[i])) if i < len(args) else None

                if callee.startswith(("llvm.memcpy", "llvm.memmove")):
                    if buf(1):
                        out.append(Access(n, "load", frozenset(buf(1)), None))
                    if buf(0):
                        out.append(Access(n, "store", frozenset(buf(0)), None))
                elif callee.startswith("llvm.memset") and buf(0):
                    out.append(Access(n, "store", frozenset(buf(0)), None))
                elif callee.startswith("llvm.masked.load") and buf(0):
                    out.append(Access(n, "load", frozenset(buf(0)), type_bits(rhs.split("@")[0])))
                elif callee.startswith("llvm.masked.store") and buf(1):
                    out.append(Access(n, "store", frozenset(buf(1)), type_bits(args[0])))
    return out, insts
