"""Lines of a kernel's generated code linked to the HLO instructions they come from (the ``ops``
of ``analysis.codegen.kernel_code``; how, and why this way: docs/code.md).

XLA:CPU's emitters do not name LLVM values after HLO instructions (``%12 = fmul float ...``), so
a line is linked by what the text does carry:

- the kernel's function (``define ... @<kernel>(`` / the ``<kernel>:`` label) is the kernel;
- a load through buffer *i* is the fused computation's ``parameter(i)`` (XLA passes a kernel
  its operands first, then its results); a store is the fused computation's result (its root,
  or the root tuple's element of that output). Which buffer a pointer is: ``analysis.codegen.llvm_ir``
  (the call frame's argument slot it was loaded from, followed through the IR);
- an arithmetic instruction is every instruction of the matching HLO opcode in the kernel
  (``fsub`` -> ``subtract``, ``@xla.rsqrt.f32`` -> ``rsqrt``; ``OPCODES``): the kind of the
  operation is all the text says, so a kernel with two subtracts links each ``fsub`` to both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from analysis import linear_re
from analysis.codegen.llvm_ir import assignment
from analysis.codegen.llvm_ir import accesses

# LLVM IR instruction -> the HLO opcodes it computes
OPCODES = {
    "fadd": ("add",), "add": ("add",), "fsub": ("subtract",), "sub": ("subtract",),
    "fmul": ("multiply",), "mul": ("multiply",), "fdiv": ("divide",), "sdiv": ("divide",),
    "udiv": ("divide",), "frem": ("remainder",), "srem": ("remainder",), "urem": ("remainder",),
    "fneg": ("negate",), "fcmp": ("compare",), "icmp": ("compare",), "select": ("select", "clamp"),
    "and": ("and",), "or": ("or",), "xor": ("xor", "not"), "shl": ("shift-left",),
    "sitofp": ("convert",), "uitofp": ("convert",), "fptosi": ("convert",), "fptoui": ("convert",),
    "fpext": ("convert",), "fptrunc": ("convert",), "sext": ("convert",), "zext": ("convert",),
    "trunc": ("convert",),
}
# a called intrinsic or XLA math function (``@llvm.NAME.*``, ``@xla.NAME.*``) -> HLO opcodes
CALLS = {
    "exp": ("exponential",), "exp2": ("exponential",), "expm1": ("exponential-minus-one",),
    "log": ("log",), "log1p": ("log-plus-one",), "sqrt": ("sqrt", "rsqrt"), "rsqrt": ("rsqrt",),
    "cbrt": ("cbrt",), "tanh": ("tanh",), "sin": ("sine",), "cos": ("cosine",), "tan": ("tan",),
    "maxnum": ("maximum",), "maximum": ("maximum",), "minnum": ("minimum",), "minimum": ("minimum",),
    "fabs": ("abs",), "abs": ("abs",), "pow": ("power",), "floor": ("floor",), "ceil": ("ceil",),
    "round": ("round-nearest-afz",), "roundeven": ("round-nearest-even",), "copysign": ("sign",),
    "fma": ("multiply", "add"), "fmuladd": ("multiply", "add"), "erf": ("erf",), "logistic": ("logistic",),
    "atan2": ("atan2",), "smax": ("maximum",), "smin": ("minimum",), "umax": ("maximum",), "umin": ("minimum",),
}
# x86 mnemonic stems (after a leading ``v``, before the ``ps``/``ss``/``pd``/``sd`` suffix)
ASM = {"add": ("add",), "sub": ("subtract",), "mul": ("multiply",), "div": ("divide",),
       "max": ("maximum",), "min": ("minimum",), "sqrt": ("sqrt", "rsqrt"), "rsqrt": ("rsqrt",),
       "rcp": ("divide",), "fmadd": ("multiply", "add"), "fmsub": ("multiply", "subtract"),
       "fnmadd": ("multiply", "add", "negate"), "fnmsub": ("multiply", "subtract", "negate")}


@dataclass
class KernelOps:
    """What a kernel's code is linked to: its name, its fused computation's parameters by number
    and its outputs in order (a kernel that is one instruction: none, and itself as output),
    and its instructions by opcode."""

    kernel: str
    params: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    by_opcode: dict = field(default_factory=dict)
    types: dict = field(default_factory=dict)  # op name -> its element type as LLVM writes it (float, i32, ...)
    function: str | None = None  # the compiled function's name, where the kernel runs another's (docs/code.md)


def canonical_ops(ops: KernelOps) -> tuple[tuple, KernelOps, list[str]]:
    """``ops`` up to its names: (a key equal for two kernels whose code links equal up to names,
    the ``KernelOps`` with each name replaced by its number, the names by number). A stack's
    twins (the same fused computation with other names, running one compiled function) share a
    key, so their links are made once and renamed (``RenamedLinks``): links depend on the names
    only through their identity, except the function's, which the text itself names and which
    stays as it is."""
    number: dict[str, str] = {}

    def n(name):
        if name is None:
            return None
        got = number.get(name)
        if got is None:
            got = number[name] = str(len(number))
        return got

    canon = KernelOps(kernel=n(ops.kernel), params=[n(p) for p in ops.params], outputs=[n(o) for o in ops.outputs],
                      by_opcode={op: [n(x) for x in xs] for op, xs in ops.by_opcode.items()},
                      types={n(x): t for x, t in ops.types.items()}, function=ops.function or ops.kernel)
    key = (canon.kernel, canon.function, tuple(canon.params), tuple(canon.outputs),
           tuple((op, tuple(xs)) for op, xs in canon.by_opcode.items()), tuple(canon.types.items()))
    return key, canon, list(number)


class RenamedLinks(Mapping):
    """{line: [op names]} of a kernel: ``template`` (links made on a ``canonical_ops`` form,
    shared by its twins) in the kernel's own ``names``, written out when first read. (A stack's
    1,441 kernels have 190,000 linked lines; the report carries each template once and each
    kernel's names, docs/performance.md.)"""

    __slots__ = ("template", "names", "_made")

    def __init__(self, template: dict[int, list[str]], names: list[str]):
        self.template, self.names, self._made = template, names, None

    def _links(self) -> dict[int, list[str]]:
        if self._made is None:
            names = self.names
            self._made = {line: [names[int(x)] for x in xs] for line, xs in self.template.items()}
        return self._made

    def __getitem__(self, line):
        return self._links()[line]

    def __iter__(self):
        return iter(self.template)

    def __len__(self) -> int:
        return len(self.template)

    def __repr__(self) -> str:
        return repr(self._links())


def kernel_ops(module, name: str, index: dict | None = None) -> KernelOps | None:
    """``KernelOps`` of the kernel instruction ``name`` of an optimized ``analysis.hlo.Module``
    (``index``: the module's instructions by name, made once for many kernels)."""
    inst = (index if index is not None else {i.name: i for i in module.instructions()}).get(name)
    if inst is None:
        return None
    comps = module.by_name
    called = [comps[c] for c in inst.called_computations if c in comps] if inst.opcode == "fusion" else []
    if not called:
        return KernelOps(kernel=name, outputs=[name], by_opcode={inst.opcode: [name]}, types={name: _llvm_type(inst)})
    body, seen, todo = [], set(), [called[0]]
    while todo:  # the fused computation, nested fusions' bodies included
        comp = todo.pop()
        if comp.name in seen:
            continue
        seen.add(comp.name)
        body.extend(comp.instructions)
        todo.extend(comps[c] for i in comp.instructions if i.opcode == "fusion" for c in i.called_computations
                    if c in comps)
    params = {}
    for i in called[0].instructions:
        if i.opcode == "parameter":
            m = _PARAMETER_NUMBER.match(i.operand_text or (i.operands[0] if i.operands else ""))
            if m:
                params[int(m.group(1))] = i.name
    root = called[0].root
    outputs = ([o for o in root.operands] if root is not None and root.opcode == "tuple" else [root.name] if root else [])
    by_opcode: dict = {}
    for i in body:
        if i.opcode not in ("parameter", "constant", "tuple", "get-tuple-element", "bitcast", "fusion"):
            by_opcode.setdefault(i.opcode, []).append(i.name)
    return KernelOps(kernel=name, params=[params.get(n) for n in range(max(params, default=-1) + 1)],
                     outputs=outputs, by_opcode=by_opcode, types={i.name: _llvm_type(i) for i in body})


_LLVM_TYPES = {"f32": "float", "f64": "double", "f16": "half", "bf16": "bfloat", "pred": "i1",
               "s8": "i8", "u8": "i8", "s16": "i16", "u16": "i16", "s32": "i32", "u32": "i32",
               "s64": "i64", "u64": "i64"}


def _llvm_type(inst) -> str | None:
    try:
        return _LLVM_TYPES.get(inst.shape.element_type)
    except Exception:  # noqa: BLE001 - a shape that does not decode: no type to match
        return None


# The texts are a user's upload (a dump, a bundle): RE2 patterns (``analysis.linear_re``), each run
# where a cheap test of the line passes; a disassembly's every line is read with str methods.
_PARAMETER_NUMBER = linear_re.compile(r"\s*(\d+)")
_DEFINE = linear_re.compile(r"^define\b[^@]*@\"?([\w.$-]+)\"?\s*\(")


def llvm_lines(text: str) -> list[tuple]:
    """What an LLVM IR text's lines are, read once for every kernel that runs the same text (a
    stack's twins): ``(line, "define", function)`` and ``(line, "arith", opcodes, type)``."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        d = _DEFINE.match(line) if line.startswith("define") else None
        if d:
            out.append((n, "define", d.group(1)))
            continue
        a = assignment(line)
        got = _arith_want(a[1].strip() if a else line.strip())
        if got:
            out.append((n, "arith") + got)
    return out


def link_llvm(text: str, ops: KernelOps, acc=None, lines: list | None = None) -> dict[int, list[str]]:
    """{1-based line: [HLO op names]} of an LLVM IR text (either stage) of kernel ``ops``
    (``acc``: its ``analysis.codegen.llvm_ir.accesses``, ``lines``: its ``llvm_lines``, where the caller
    has them)."""
    out: dict[int, list[str]] = {}
    if acc is None:
        acc, _ = accesses(text)
    first_output = len(ops.params)
    for a in acc:
        if a.kind == "load":
            names = [ops.params[b] for b in sorted(a.buffers) if b < len(ops.params) and ops.params[b]]
        else:  # a store writes a result (an output buffer, or an operand's buffer reused in place)
            outs = [ops.outputs[b - first_output] for b in sorted(a.buffers) if 0 <= b - first_output < len(ops.outputs)]
            names = outs or list(ops.outputs)
        if names:
            out.setdefault(a.line, []).extend(names)
    function = ops.function or ops.kernel
    for n, kind, *what in (lines if lines is not None else llvm_lines(text)):
        if kind == "define":
            if what[0] == function:
                out[n] = [ops.kernel]
            continue
        names = _arith_names(what[0], what[1], ops)
        if names:
            out.setdefault(n, []).extend(names)
    return {n: list(dict.fromkeys(v)) for n, v in sorted(out.items())}


TYPE = linear_re.compile(r"<\s*\d+\s+x\s+(\w+)\s*>|\b(float|double|half|bfloat|i\d+)\b")
_INTRINSIC = linear_re.compile(r"@(?:llvm|xla)\.([a-z0-9]+)")
_UNTYPED = ("compare", "convert", "select", "clamp")  # their operands' type is not their result's


def _arith_want(rhs: str) -> tuple[tuple, str | None] | None:
    """The HLO opcodes an arithmetic line's instruction computes and its element type, or None."""
    parts = rhs.split(None, 1)
    word = parts[0] if parts else ""
    want: tuple = OPCODES.get(word, ())
    if "call " in rhs or word == "call" or rhs.startswith("tail call"):
        m = _INTRINSIC.search(rhs) if "@" in rhs else None
        want = CALLS.get(m.group(1), (m.group(1),)) if m else ()
    if not want:
        return None
    return want, element_type(parts[1] if " " in rhs and len(parts) > 1 else "")


_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")  # RE2's \w
_SCALARS = frozenset(("float", "double", "half", "bfloat"))


def _scalar(word: str) -> bool:
    return word in _SCALARS or word[:1] == "i" and word[1:].isdigit() and word.isascii()


def _vector_element(text: str) -> str | None:
    """T of a text that starts ``<N x T>`` (``TYPE``'s first form, spaces only), else None."""
    inner = text[1:text.find(">")] if ">" in text else ""
    parts = [p for p in inner.split(" ") if p]
    if len(parts) == 3 and parts[0].isdigit() and parts[0].isascii() and parts[1] == "x" and _WORD.issuperset(parts[2]):
        return parts[2]
    return None


def element_type(text: str) -> str | None:
    """The element type ``TYPE`` finds first in an instruction's operands (``<8 x float> %a, %b``
    -> float). The usual forms are read with str methods: words (``contract``, ``olt``) up to a
    scalar or a vector type, where no match can start before the type; anything else goes to the
    pattern."""
    at = 0
    for word in text.split(" ", 4):  # the rest, past four words, has spaces: it goes to the pattern
        if word.startswith("<"):
            vector = _vector_element(text[at:])
            if vector is not None:
                return vector
            break
        if not word or not _WORD.issuperset(word):
            break  # punctuation: a match may start inside it
        if _scalar(word):
            return word
        at += len(word) + 1
    else:
        return None
    t = TYPE.search(text)
    return (t.group(1) or t.group(2)) if t else None


def _arith_names(want: tuple, ty: str | None, ops: KernelOps) -> list[str]:
    """The kernel's ops of those opcodes and that element type (so the loops' index arithmetic,
    ``add i64``, is not linked to a float ``add``)."""
    return [n for op in want for n in ops.by_opcode.get(op, [])
            if op in _UNTYPED or ty is None or ops.types.get(n) in (None, ty)]


_HEX = frozenset("0123456789abcdef")
_MNEMONIC = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_BLANKS = " \t\n\r\f"  # RE2's \s
_SIMD_SUFFIXES = frozenset(("ps", "ss", "pd", "sd", "ph", "sh"))


def mnemonic_of(line: str) -> str | None:
    """The mnemonic of a disassembly line ``  offset:<whitespace>mnemonic operands``
    (``^\\s*[0-9a-f]+:\\s+([a-z][a-z0-9]*)\\b``), else None."""
    head, colon, rest = line.lstrip(_BLANKS).partition(":")
    if not (colon and head and _HEX.issuperset(head) and rest[:1] and rest[0] in _BLANKS):
        return None
    rest = rest.lstrip(_BLANKS)
    end = 0
    while end < len(rest) and rest[end] in _MNEMONIC:
        end += 1
    if end == 0 or not rest[0].isalpha() or rest[end:end + 1] and rest[end] in _WORD:  # [a-z] first, \b after
        return None
    return rest[:end]


def asm_lines(text: str) -> list[tuple]:
    """What a disassembly's lines are, read once for the kernels that share it: ``(line, label,
    opcodes)``, the line's text where it is a label, else the HLO opcodes of its mnemonic."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.rstrip().endswith(":"):
            out.append((n, line.rstrip(), None))
            continue
        mnemonic = mnemonic_of(line)
        if mnemonic is None:
            continue
        stem = mnemonic[1:] if mnemonic.startswith("v") else mnemonic
        if stem[-2:] in _SIMD_SUFFIXES:  # vfmadd231ps -> fmadd
            stem = stem[:-2]
            if stem[-3:] in ("132", "213", "231"):
                stem = stem[:-3]
        if stem in ASM:
            out.append((n, None, ASM[stem]))
    return out


def link_asm(text: str, ops: KernelOps, lines: list | None = None) -> dict[int, list[str]]:
    """{1-based line: [HLO op names]} of a disassembly (``analysis.codegen.disassemble``): the kernel's
    label, and arithmetic by its mnemonic (``vsubps`` -> ``subtract``; ``ASM``). ``lines``: its
    ``asm_lines``, where the caller has them."""
    out: dict[int, list[str]] = {}
    label = f"{ops.function or ops.kernel}:"
    for n, text_label, want in (lines if lines is not None else asm_lines(text)):
        if text_label is not None:
            if text_label == label:
                out[n] = [ops.kernel]
            continue
        names = [x for op in want for x in ops.by_opcode.get(op, [])]
        if names:
            out[n] = list(dict.fromkeys(names))
    return out
