"""The memory accesses of an XLA:CPU kernel's LLVM IR: which loads and stores go through the
kernel's buffers, and which buffer (the one definition ``analysis.code``'s facts and
``analysis.code_links``' links both read; docs/code.md).

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

import re
from dataclasses import dataclass

_DEFINE = re.compile(r"^define\b[^@]*@\"?([\w.$-]+)\"?\s*\((.*)\)[^(]*$")
_ASSIGN = re.compile(r"^\s*%([\w.$-]+)\s*=\s*(.*)$")
_VALUE = re.compile(r"%([\w.$-]+)")
_PTR = re.compile(r"\bptr\b(?:\s+addrspace\(\d+\))?(?:\s+(?:noalias|nonnull|noundef|nocapture|readonly|writeonly|"
                  r"align\s+\d+|dereferenceable(?:_or_null)?\(\d+\)|captures\([^)]*\)|nofree|[\w]+))*\s+%([\w.$-]+)")
_FRAME_FIELD = re.compile(r"getelementptr\b.*%XLA_CPU_KernelCallFrame,\s*ptr\s+%([\w.$-]+),\s*i\d+\s+0,\s*i\d+\s+3\b")
_SLOT = re.compile(r"getelementptr\b.*%XLA_CPU_KernelArg,\s*ptr\s+%([\w.$-]+),\s*i\d+\s+(\d+)(?:,\s*i\d+\s+0)?\s*$")
_BYTES = re.compile(r"getelementptr\b[^,]*\bi8,\s*ptr\s+%([\w.$-]+),\s*i64\s+(\d+)\s*$")
_CALL = re.compile(r"\bcall\b[^@]*@\"?([\w.$-]+)\"?\s*\((.*)\)")
_VECTOR = re.compile(r"<\s*(\d+)\s+x\s+(\w+)\s*>")
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


def functions(text: str) -> list[_Function]:
    out, cur = [], None
    for n, line in enumerate(text.splitlines(), 1):
        if cur is None:
            m = _DEFINE.match(line)
            if m:
                params = _split(m.group(2))
                names = [(_VALUE.findall(p) or [None])[-1] for p in params]
                cur = _Function(m.group(1), names, [v for p, v in zip(params, names) if v and "dereferenceable" in p
                                                     and p.lstrip().startswith("ptr")],
                                [], line.lstrip().startswith("define") and re.search(r"\bptr\s+@", line) is not None
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


def _type_bits(t: str) -> int | None:
    m = _VECTOR.search(t)
    if not m:
        return None
    elem = m.group(2)
    bits = _SCALAR_BITS.get(elem) or (int(elem[1:]) if re.fullmatch(r"i\d+", elem) else None)
    return int(m.group(1)) * bits if bits else None


def buffers(text: str) -> tuple[list[_Function], dict]:
    """The functions of ``text`` and, per function name, {value: buffer numbers} of its buffer
    pointers (the module docstring's definition)."""
    fns = functions(text)
    given: dict[str, dict[int, set]] = {}  # callee -> parameter position -> buffer numbers
    result: dict[str, dict] = {}
    for _ in range(8):  # a call passes buffers on to the next function; a few levels deep at most
        before = {f: {p: set(s) for p, s in v.items()} for f, v in given.items()}
        for f in fns:
            result[f.name] = _function_buffers(f, given.get(f.name), given)
        if before == given:
            break
    return fns, result


def _function_buffers(f: _Function, from_calls: dict | None, given: dict) -> dict:
    arg_of: dict[str, set] = {}
    if from_calls:
        for pos, bufs in from_calls.items():
            if pos < len(f.params) and f.params[pos]:
                arg_of[f.params[pos]] = set(bufs)
    elif not f.frame:
        arg_of = {v: {k} for k, v in enumerate(f.deref)}
    frame = {f.params[0]} if f.frame and f.params and f.params[0] else set()
    field3, arrays, slots = set(), set(), {}
    defs = [(m.group(1), m.group(2).strip()) for _, line in f.lines if (m := _ASSIGN.match(line))]
    for _ in range(20):  # phis can name values defined below them
        changed = False
        for name, rhs in defs:
            if rhs.startswith(_DERIVES):
                fm, sm, bm = _FRAME_FIELD.search(rhs), _SLOT.search(rhs), _BYTES.search(rhs)
                if fm and fm.group(1) in frame or bm and bm.group(1) in frame and int(bm.group(2)) == FRAME_ARGS_OFFSET:
                    field3.add(name)
                    continue
                if sm and sm.group(1) in arrays:
                    slots[name] = int(sm.group(2))
                    continue
                if bm and bm.group(1) in arrays and int(bm.group(2)) % KERNEL_ARG_BYTES == 0:
                    slots[name] = int(bm.group(2)) // KERNEL_ARG_BYTES
                    continue
                hit = set().union(*[arg_of[v] for v in _VALUE.findall(rhs) if v in arg_of])
                if hit and not hit <= arg_of.get(name, set()):
                    arg_of[name] = arg_of.get(name, set()) | hit
                    changed = True
            elif rhs.startswith("load ptr"):
                src = _VALUE.findall(rhs.split(",", 1)[1]) if "," in rhs else []
                src = src[0] if src else None
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
    for _, line in f.lines:  # buffers passed on to the functions it calls
        c = _CALL.search(line)
        if not c or c.group(1).startswith("llvm."):
            continue
        for pos, a in enumerate(_split(c.group(2))):
            vs = _VALUE.findall(a)
            if a.lstrip().startswith("ptr") and vs and vs[-1] in arg_of:
                given.setdefault(c.group(1), {}).setdefault(pos, set()).update(arg_of[vs[-1]])
    return arg_of


def accesses(text: str) -> tuple[list[Access], int]:
    """The memory accesses through the kernel's buffers, and the number of instructions."""
    fns, bufs = buffers(text)
    out, insts = [], 0
    for f in fns:
        arg_of = bufs.get(f.name, {})
        for n, line in f.lines:
            s = line.strip()
            if not s or s.startswith(";") or re.match(r"^[\w.$-]+:", s):
                continue
            insts += 1
            m = _ASSIGN.match(line)
            rhs = m.group(2).strip() if m else s
            if rhs.startswith("load "):
                ty, _, rest = rhs[5:].partition(",")
                p = _PTR.search(rest)
                if p and p.group(1) in arg_of:
                    out.append(Access(n, "load", frozenset(arg_of[p.group(1)]), _type_bits(ty)))
            elif rhs.startswith("store "):
                parts = _split(rhs[6:])
                p = _PTR.search(parts[1]) if len(parts) > 1 else None
                if p and p.group(1) in arg_of:
                    out.append(Access(n, "store", frozenset(arg_of[p.group(1)]), _type_bits(parts[0])))
            elif "call" in rhs:
                c = _CALL.search(rhs)
                if not c or not c.group(1).startswith("llvm."):
                    continue
                callee, args = c.group(1), _split(c.group(2))

                def buf(i):
                    p = _PTR.search(args[i]) if i < len(args) else None
                    return arg_of.get(p.group(1)) if p else None

                if callee.startswith(("llvm.memcpy", "llvm.memmove")):
                    if buf(1):
                        out.append(Access(n, "load", frozenset(buf(1)), None))
                    if buf(0):
                        out.append(Access(n, "store", frozenset(buf(0)), None))
                elif callee.startswith("llvm.memset") and buf(0):
                    out.append(Access(n, "store", frozenset(buf(0)), None))
                elif callee.startswith("llvm.masked.load") and buf(0):
                    out.append(Access(n, "load", frozenset(buf(0)), _type_bits(rhs.split("@")[0])))
                elif callee.startswith("llvm.masked.store") and buf(1):
                    out.append(Access(n, "store", frozenset(buf(1)), _type_bits(args[0])))
    return out, insts
