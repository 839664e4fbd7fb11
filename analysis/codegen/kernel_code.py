"""The code XLA generated for each kernel: its texts by stage, the facts read from them, and the
lines linked to the kernel's HLO instructions (issue #36; docs/code.md).

A bundle's ``code`` field holds it (schema 6, docs/bundle.md). Every reader goes through this
module: ``analysis.codegen.finish.code_of``, ``library_call``, ``code_stages``, ``totals``; never the raw dict. In a
bundle's JSON each stage text is stored deflated (``{"z": base64 of zlib}``, see ``code_json``);
in memory it is plain text. Pure Python, no JAX: the compile side (``analysis.compile.code_dump``,
``analysis.compile.code_gpu``) fills it, ``check_code`` reads it back from untrusted JSON.

The facts (one definition, used by every view, the CLI and the report):

- ``global_loads`` / ``global_stores``: the load and store instructions written in the code that
  go through the kernel's buffer arguments (its operands and outputs in memory), counted in the
  text, not executed: a loop's body counts once. On the CPU they are read from the LLVM IR before
  LLVM's optimization, where each access the emitter wrote appears once (unrolling and
  vectorization later multiply them).
- ``vector_width``: the bits of the widest vector load or store (LLVM IR, PTX) or SIMD register
  (x86: xmm 128, ymm 256, zmm 512) in the code that runs: the machine code where there is one.
- ``instructions``: the instructions of the code that runs (the machine code where there is one).
- ``registers``, ``spills``, ``shared_bytes``: GPU only (``None`` elsewhere): registers and
  spills from ptxas's report, shared memory from the PTX and the kernel's launch; on the GPU the
  loads, stores, vector width and instructions are the PTX's (``analysis.codegen.ptx`` defines them).
- ``stage``: the stage the loads and stores were read from.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from dataclasses import dataclass, field

from analysis import linear_re
from analysis.errors import ExplorerError
from analysis.codegen.llvm_ir import accesses

STAGE_LABELS = {  # in pipeline order: a Triton fusion's IR comes before the LLVM IR it is lowered to
    "triton-ttir": "Triton IR (ttir)", "triton-ttgir": "Triton IR (ttgir)", "triton-llir": "Triton LLVM IR",
    "llvm-ir": "LLVM IR", "llvm-ir-opt": "LLVM IR (optimized)", "asm": "x86-64 assembly",
    "ptx": "PTX", "sass": "SASS", "ptxas": "ptxas report",
}
TRITON_PREFIX = "triton-"

# Bounds (every text a bundle carries is bounded, like its other texts): per stage of a kernel,
# and for all the code of one bundle (a 4,800-kernel program must not carry gigabytes).
MAX_CODE_LINES = 4000
MAX_LINE_CHARS = 2000
MAX_BUNDLE_CODE_CHARS = 24_000_000
# What the texts come to with every kernel's references to a text it shares written out (twins
# share their code: a 192-layer stack's 2,900 kernels reference about twenty texts, 0.2 G
# characters written out): the most a reader that does write them out could be made to write
MAX_EXPANDED_CODE_CHARS = 16 * MAX_BUNDLE_CODE_CHARS
MAX_CONFIG_CHARS = 4000
MAX_KERNELS = 20_000
FACT_KEYS = ("global_loads", "global_stores", "vector_width", "instructions", "registers", "spills",
             "shared_bytes", "stage")
_INT_FACTS = ("global_loads", "global_stores")
_OPT_INT_FACTS = ("vector_width", "instructions", "registers", "spills", "shared_bytes")


def stage_label(stage: str) -> str:
    """The label a user sees for a stage (a Triton stage not in ``STAGE_LABELS`` by its name)."""
    if stage in STAGE_LABELS:
        return STAGE_LABELS[stage]
    if stage.startswith(TRITON_PREFIX):
        return f"Triton IR ({stage[len(TRITON_PREFIX):]})"
    return stage


def stage_order(stage: str) -> tuple:
    """A stage's place in the pipeline (unknown stages after the known ones, by name)."""
    names = list(STAGE_LABELS)
    return (names.index(stage), "") if stage in names else (len(names), stage)


@dataclass
class KernelCode:
    """One emitted kernel's code: ``stages`` (stage -> text), ``facts`` (``FACT_KEYS``), ``ops``
    (stage -> {1-based line -> [HLO op names]}), ``cut`` (stage -> total lines of a cut text)."""

    name: str
    stages: dict = field(default_factory=dict)
    facts: dict = field(default_factory=dict)
    ops: dict = field(default_factory=dict)
    cut: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)  # one line each: a stage that could not be made (a damaged object)

    def lines_of(self, stage: str, op: str) -> list[int]:
        """The lines of ``stage`` linked to the HLO instruction ``op``, in order."""
        return sorted(n for n, names in (self.ops.get(stage) or {}).items() if op in names)


def code_field(bundle) -> dict | None:
    """The bundle's ``code`` field when it is one (None: no code read, or not a dict)."""
    c = getattr(bundle, "code", None)
    return c if isinstance(c, dict) else None


def has_code(bundle) -> bool:
    """Whether the bundle's compile read its generated code (it may still be empty: library calls only)."""
    return code_field(bundle) is not None


def code_stages(bundle) -> list[str]:
    """The stages this compile's code has, in pipeline order ([] without code)."""
    c = code_field(bundle)
    return list(c.get("stages") or []) if c else []


def facts_as_read(bundle, name: str) -> dict | None:
    """A kernel's facts without finishing its code (``analysis.codegen.finish.code_of`` disassembles and links a CPU
    kernel first): its loads and stores and the stage they were read from; a CPU kernel's machine
    code facts (vector width, instructions) are None until it is finished. None without code."""
    c = code_field(bundle)
    k = (c.get("kernels") or {}).get(name) if c else None
    f = k.get("facts") if isinstance(k, dict) else None
    return dict(empty_facts(), **{key: f.get(key) for key in FACT_KEYS if key in f}) if isinstance(f, dict) else None


def loads_stores(bundle, name: str) -> tuple[int, int] | None:
    """A kernel's ``(global_loads, global_stores)`` without finishing its code (what a summary or
    a lesson needs), or None."""
    f = facts_as_read(bundle, name)
    return (f.get("global_loads") or 0, f.get("global_stores") or 0) if f is not None else None


def kernel_names(bundle) -> list[str]:
    """The kernels with code, in the order the compile side listed them."""
    c = code_field(bundle)
    return list((c.get("kernels") or {})) if c else []


def library_call(bundle, name: str) -> dict | None:
    """What a library kernel calls: ``{"target", "library", "config"}``, or ``None``."""
    c = code_field(bundle)
    hit = (c.get("library") or {}).get(name) if c else None
    return dict(hit) if isinstance(hit, dict) else None


def note(bundle) -> str | None:
    c = code_field(bundle)
    return c.get("note") if c else None


def totals(bundle) -> dict:
    """The code's facts summed over the kernels that have code: ``kernels`` (how many),
    ``global_loads``, ``global_stores``. Zeros without code."""
    out = {"kernels": 0, "global_loads": 0, "global_stores": 0}
    c = code_field(bundle)
    for k in ((c.get("kernels") or {}).values() if c else ()):
        f = k.get("facts") or {}
        out["kernels"] += 1
        out["global_loads"] += f.get("global_loads") or 0
        out["global_stores"] += f.get("global_stores") or 0
    return out


# -- bounding ----------------------------------------------------------------------------------

def cut_line(shown: int, total: int) -> str:
    return f"… cut at {shown:,} of {total:,} lines"


def bound_text(text: str, max_lines: int = MAX_CODE_LINES) -> tuple[str, int | None]:
    """``text`` within ``max_lines`` lines of at most ``MAX_LINE_CHARS`` characters; returns the
    text and, where it was cut, its total number of lines (the text then ends with ``cut_line``)."""
    if text.count("\n") <= max_lines and "\r" not in text and (
            len(text) <= MAX_LINE_CHARS or max(map(len, text.split("\n"))) <= MAX_LINE_CHARS):
        return text, None  # within its bounds already (the common case: checked at C speed)
    lines = text.splitlines()
    long = any(len(line) > MAX_LINE_CHARS for line in lines)
    if long:
        lines = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " …" for line in lines]
    if len(lines) <= max_lines:
        return ("\n".join(lines) + "\n" if long else text), None
    return "\n".join(lines[:max_lines] + [cut_line(max_lines, len(lines))]) + "\n", len(lines)


def make_code(kernels: dict, library: dict | None = None, note: str | None = None) -> dict | None:
    """The ``code`` field from what a compile side read: ``kernels`` {name: {"stages": {stage:
    text}, "ops": {stage: {line: [names]}}}} (facts are read here from the texts), ``library``
    {name: {target, library, config}}. Each text is bounded (``bound_text``) and all of them
    together by ``MAX_BUNDLE_CODE_CHARS`` (kernels past it keep their facts, their texts say so).
    ``None`` when there is neither code nor a library call nor a note."""
    if not kernels and not library and not note:
        return None
    out_k, seen, budget, counted = {}, set(), MAX_BUNDLE_CODE_CHARS, set()
    for name, k in list(kernels.items())[:MAX_KERNELS]:
        stages, cut = {}, {}
        for stage, text in (k.get("stages") or {}).items():
            if not isinstance(text, str):
                continue
            seen.add(stage)
            t, total = bound_text(text)
            if len(t) > budget:
                total = total or len(text.splitlines())
                t = cut_line(0, total) + " (the bundle's code is full)\n"
            budget -= len(t)
            stages[stage] = t
            if total is not None:
                cut[stage] = total
        facts = (dict(k["facts"]) if isinstance(k.get("facts"), dict) and not any(s in stages for s in _GPU_STAGES)
                 and k["facts"].keys() >= set(FACT_KEYS)  # read by the caller from these texts (kernel_facts)
                 else _facts_of({s: k["stages"][s] for s in stages}, k.get("facts"), name))  # the whole texts
        ops = {s: {int(n): [str(x) for x in v][:64] for n, v in lines.items()}
               for s, lines in (k.get("ops") or {}).items() if s in stages}
        out_k[name] = {"stages": stages, "cut": cut, "facts": facts, "ops": ops}
        if isinstance(k.get("elf"), (bytes, bytearray)) or k.get("pending"):
            # its machine code and links are made when first asked for (analysis.codegen.finish)
            elf = k.get("elf")
            if elf is not None and id(elf) not in counted:  # twins share one object: counted once
                counted.add(id(elf))
                budget -= len(elf)
                if budget < 0:
                    elf = None  # the bundle's code is full: no machine code for the kernels past it
            out_k[name].update(pending=True, elf=elf, elf_file=k.get("elf_file"), function=k.get("function"))
            if elf is not None:
                seen.add("asm")
    lib = {name: {"target": str(v.get("target") or ""), "library": str(v.get("library") or ""),
                  "config": _bounded(str(v.get("config") or ""), MAX_CONFIG_CHARS)}
           for name, v in list((library or {}).items())[:MAX_KERNELS]}
    return {"stages": sorted(seen, key=stage_order), "kernels": out_k, "library": lib,
            "note": " ".join(note.split())[:300] if note else None}


def _bounded(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + f" … cut at {n:,} of {len(text):,} characters"


# -- facts ------------------------------------------------------------------------------------

def kernel_facts(stages: dict, analyses: dict | None = None) -> dict:
    """One kernel's facts from its stage texts (the definitions in the module docstring): loads
    and stores from the first IR stage there is, vector width and instructions from the code that
    runs (asm, else the optimized IR, else the IR). ``analyses``: stage -> its
    ``analysis.codegen.llvm_ir.accesses``, where the caller has them already."""
    analyses = analyses or {}
    facts = empty_facts()
    ir_stage = next((s for s in ("llvm-ir", "llvm-ir-opt") if stages.get(s)), None)
    if ir_stage:
        f = llvm_facts(stages[ir_stage], analyses.get(ir_stage))
        facts.update(global_loads=f["global_loads"], global_stores=f["global_stores"], stage=ir_stage)
    runs = next((s for s in ("asm", "llvm-ir-opt", "llvm-ir") if stages.get(s)), None)
    if runs:
        f = asm_facts(stages[runs]) if runs == "asm" else llvm_facts(stages[runs], analyses.get(runs))
        facts.update(vector_width=f["vector_width"], instructions=f["instructions"])
        if facts["stage"] is None:
            facts.update(global_loads=f["global_loads"], global_stores=f["global_stores"], stage=runs)
    return facts


def empty_facts() -> dict:
    return {"global_loads": 0, "global_stores": 0, "vector_width": None, "instructions": None,
            "registers": None, "spills": None, "shared_bytes": None, "stage": None}


def llvm_facts(text: str, analysis: tuple | None = None) -> dict:
    """Facts of an LLVM IR text (``empty_facts`` keys): the loads and stores through the
    kernel's buffers (``analysis.codegen.llvm_ir``: what a buffer pointer is), the widest vector load or
    store, the instruction count. ``analysis``: the text's ``accesses``, where known."""
    acc, insts = analysis if analysis is not None else accesses(text)
    facts = empty_facts()
    widths = [a.bits for a in acc if a.bits]
    facts.update(global_loads=sum(a.kind == "load" for a in acc), global_stores=sum(a.kind == "store" for a in acc),
                 vector_width=max(widths) if widths else None, instructions=insts)
    return facts


def _wider(a, b):
    return b if a is None or (b is not None and b > a) else a


# A disassembly may come from a user's bundle: RE2 patterns (analysis.linear_re; under re a line of
# "[" took time quadratic in it, 100,000 of them minutes). Every line meets these, so each is read
# with str methods as its pattern reads it (tests/ground/test_linear_readers.py checks they agree), the
# pattern taking what they leave.
ASM_LINE = linear_re.compile(r"^\s*(?:[0-9a-f]+:\s+)?(?:(?:[0-9a-f]{2}\s)+\s*)?([a-z][a-z0-9.]*)\b(.*)$")
_SIMD = {"xmm": 128, "ymm": 256, "zmm": 512}
SIMD_REG = linear_re.compile(r"\b([xyz]mm)\d+\b")
MEM = linear_re.compile(r"\[([^\]]*)\]")  # read by memory_operand
STACK = linear_re.compile(r"\b[re]?(sp|bp)\b|\brip\b")  # read by on_stack
_BLANKS = " \t\n\r\f"  # RE2's \s
_HEX = frozenset("0123456789abcdef")
_MNEMONIC = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.")
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")  # RE2's \w
_STACK_WORDS = ("rsp", "rbp", "esp", "ebp", "sp", "bp", "rip")


def asm_line(s: str) -> tuple[str, str] | None:
    """(mnemonic, the rest) of a disassembly line (``ASM_LINE``'s groups), else None. The usual
    line, ``  1f:<blanks>vmovups ymm0, ...``, is read with str methods; where the optional parts
    could be read another way (no address, hex byte pairs, a mnemonic that runs into a word) the
    pattern reads it."""
    head, colon, body = s.lstrip(_BLANKS).partition(":")
    rest = body.lstrip(_BLANKS)
    if colon and head and _HEX.issuperset(head) and len(rest) < len(body) and "\n" not in rest \
            and rest[:1] in _MNEMONIC and not rest[:1].isdigit() and rest[:1] != "." \
            and not (_HEX.issuperset(rest[:2]) and rest[2:3] and rest[2] in _BLANKS):
        word = rest.split(" ", 1)[0]  # the mnemonic, where a space ends it
        if _MNEMONIC.issuperset(word):
            end = len(word)
        else:
            end = 1
            while end < len(rest) and rest[end] in _MNEMONIC:
                end += 1
        if rest[end - 1] != "." and (end == len(rest) or rest[end] not in _WORD):  # \b: a word's end
            return rest[:end], rest[end:]
    m = ASM_LINE.match(s)
    return (m.group(1), m.group(2)) if m else None


def simd_registers(rest: str) -> list[str]:
    """``SIMD_REG.findall``: the xmm/ymm/zmm of each SIMD register named, in order."""
    out, i = [], rest.find("mm", 1)
    while i >= 0:
        start, end = i - 1, i + 2
        while end < len(rest) and rest[end] in "0123456789":
            end += 1
        if rest[start] in "xyz" and end > i + 2 and (start == 0 or rest[start - 1] not in _WORD) \
                and (end == len(rest) or rest[end] not in _WORD):
            out.append(rest[start:i + 2])
        i = rest.find("mm", max(end, i + 1))
    return out


def memory_operand(rest: str) -> str | None:
    """What the first ``[...]`` holds (``MEM``), None where no ``[`` is closed."""
    i = rest.find("[")
    j = rest.find("]", i + 1) if i >= 0 else -1
    return rest[i + 1:j] if j >= 0 else None


def on_stack(operand: str) -> bool:
    """Whether the operand names the stack or the instruction pointer as a whole word (``STACK``)."""
    for word in _STACK_WORDS:
        i = operand.find(word)
        while i >= 0:
            end = i + len(word)
            if (i == 0 or operand[i - 1] not in _WORD) and (end == len(operand) or operand[end] not in _WORD):
                return True
            i = operand.find(word, i + 1)
    return False
# the x86 instructions that only read their memory operand even when it comes first
_READS_FIRST = ("cmp", "test", "prefetch", "bt", "ucomis", "comis", "vucomis", "vcomis", "vptest")


def asm_facts(text: str) -> dict:
    """Facts of an x86-64 disassembly in Intel syntax, one instruction a line (labels, comments
    and directives are not instructions): ``instructions``; ``vector_width``, the widest SIMD
    register used (xmm 128, ymm 256, zmm 512 bits); loads and stores, the memory operands not on
    the stack or the instruction pointer (a memory destination, the first operand, is a store)."""
    facts = empty_facts()
    insts = loads = stores = 0
    width = None
    for line in text.splitlines():
        s = line.split(";")[0].split("#")[0].rstrip()
        if not s.strip() or s.rstrip().endswith(":") or s.strip().startswith("."):
            continue
        m = asm_line(s)
        if not m:
            continue
        insts += 1
        mnemonic, rest = m
        if mnemonic.startswith(("nop", "lea")):  # no memory read, whatever the operand looks like
            continue
        if "mm" in rest:
            for reg in simd_registers(rest):
                width = _wider(width, _SIMD[reg])
        mem = memory_operand(rest)
        if mem is not None and not on_stack(mem):
            first = rest.split(",")[0]
            if "[" in first and not mnemonic.startswith(_READS_FIRST):
                stores += 1
            else:
                loads += 1
    facts.update(global_loads=loads, global_stores=stores, vector_width=width, instructions=insts)
    return facts


# -- JSON --------------------------------------------------------------------------------------

def code_json(code: dict | None) -> dict | None:
    """The ``code`` field as a bundle's JSON writes it: each text deflated (``{"z": base64}``),
    a text an earlier kernel has too (identical kernels share their code) as ``{"ref": [kernel,
    stage]}``."""
    if not isinstance(code, dict):
        return None
    kernels, first = {}, {}
    for name, k in (code.get("kernels") or {}).items():
        stages = {}
        for s, t in (k.get("stages") or {}).items():
            hit = first.get(id(t)) or first.get(t)
            stages[s] = {"ref": list(hit)} if hit else _deflate(t)
            first.setdefault(id(t), (name, s))
            first.setdefault(t, (name, s))
        kernels[name] = {**k, "stages": stages,
                         "ops": {s: {str(n): v for n, v in lines.items()} for s, lines in (k.get("ops") or {}).items()}}
        elf = k.get("elf")
        if isinstance(elf, (bytes, bytearray)):
            hit = first.get(id(elf)) or first.get(bytes(elf))
            kernels[name]["elf"] = {"ref": list(hit)} if hit else _deflate(bytes(elf))
            first.setdefault(id(elf), (name, "elf"))
            first.setdefault(bytes(elf), (name, "elf"))
    return {**code, "kernels": kernels}


def _deflate(data) -> dict:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return {"z": base64.b64encode(zlib.compress(raw, 1)).decode("ascii")}  # level 1: speed (docs/performance.md)


MAX_TEXT_BYTES = (MAX_CODE_LINES + 1) * (MAX_LINE_CHARS + 4) * 4


def _inflate(v, where: str, earlier: dict, binary: bool = False):
    """A stored text (or object file, ``binary``): plain, deflated, or the same as an ``earlier``
    kernel's stage."""
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and "ref" in v:
        r = v["ref"]
        hit = earlier.get(tuple(r)) if isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r) else None
        if hit is None:
            raise _bad(where, "refers to no earlier kernel's stage")
        return hit
    if not (isinstance(v, dict) and isinstance(v.get("z"), str)):
        raise _bad(where, "must be a text or {\"z\": deflated text}")
    try:
        d = zlib.decompressobj()
        raw = d.decompress(base64.b64decode(v["z"], validate=True), MAX_TEXT_BYTES)
        if d.unconsumed_tail:
            raise _bad(where, f"inflates past {MAX_TEXT_BYTES:,} bytes")
        return raw if binary else raw.decode("utf-8")
    except (binascii.Error, zlib.error, UnicodeDecodeError, ValueError):
        raise _bad(where, "is not deflated text (damaged)") from None


def _bad(where: str, what: str) -> ExplorerError:
    return ExplorerError("load", f"malformed bundle: code{where} {what}")


def check_code(code) -> dict | None:
    """``code`` read from a bundle's JSON (untrusted): its shape checked, texts inflated and
    bounded again, the facts read again from the texts where there are texts (one definition,
    whatever the file said), ops keyed by line numbers. Raises a one-line ``load`` error."""
    if code is None:
        return None
    if not isinstance(code, dict):
        raise _bad("", "must be an object or null")
    kernels, library, note_ = code.get("kernels", {}), code.get("library", {}), code.get("note")
    if not isinstance(kernels, dict) or not isinstance(library, dict):
        raise _bad("", "needs objects 'kernels' and 'library'")
    if len(kernels) > MAX_KERNELS or len(library) > MAX_KERNELS:
        raise _bad("", f"has more than {MAX_KERNELS:,} kernels")
    if not isinstance(note_, (str, type(None))):
        raise _bad(".note", "must be text or null")
    stages_seen = code.get("stages", [])
    if not isinstance(stages_seen, list) or not all(isinstance(s, str) for s in stages_seen):
        raise _bad(".stages", "must be a list of stage names")
    out_k, budget, expanded = {}, MAX_BUNDLE_CODE_CHARS, MAX_EXPANDED_CODE_CHARS
    earlier: dict = {}  # (kernel, stage) -> its text, for the references of the kernels after it
    for name, k in kernels.items():
        where = f".kernels[{name[:60]!r}]"
        if not isinstance(k, dict) or not isinstance(k.get("stages", {}), dict):
            raise _bad(where, "must be an object with 'stages'")
        stages, cut = {}, {}
        for stage, v in k.get("stages", {}).items():
            shared = isinstance(v, dict) and "ref" in v
            text = _inflate(v, f"{where}.stages[{stage[:40]!r}]", earlier)
            if not shared:
                text, total = bound_text(text, MAX_CODE_LINES + 1)  # a cut text: its lines and the cut line
                budget -= len(text)
                if budget < 0:
                    raise _bad("", f"holds more than {MAX_BUNDLE_CODE_CHARS:,} characters of code")
            else:
                total = None if not text.endswith(" lines\n") else _cut_total(text)
            expanded -= len(text)
            if expanded < 0:
                raise _bad("", f"refers to its texts for more than {MAX_EXPANDED_CODE_CHARS:,} characters of code "
                               "in all, every reference counted")
            earlier[(name, stage)] = text
            stages[stage] = text
            c = (k.get("cut") or {}).get(stage) if isinstance(k.get("cut"), dict) else None
            if total is not None or (type(c) is int and c > 0):
                cut[stage] = total if total is not None else c
        ops = k.get("ops", {})
        if not isinstance(ops, dict):
            raise _bad(f"{where}.ops", "must be an object")
        good_ops = {}
        for stage, lines in ops.items():
            if stage not in stages:
                continue
            if not isinstance(lines, dict):
                raise _bad(f"{where}.ops[{stage[:40]!r}]", "must map line numbers to op names")
            row = {}
            for n, names in lines.items():
                if not (isinstance(n, (str, int)) and str(n).isdigit() and isinstance(names, list)
                        and all(isinstance(x, str) for x in names)):
                    raise _bad(f"{where}.ops[{stage[:40]!r}]", "must map line numbers to lists of op names")
                row[int(n)] = [x[:200] for x in names[:64]]
            good_ops[stage] = row
        # read again from the texts (one definition, whatever the file said), unless a text was
        # cut: its facts were read from the whole text, and are only checked
        # the facts were read from the texts where the texts were made (analysis.codegen.cpu_read,
        # kernel_facts): checked here, not read again (that was a third of a big program's load)
        facts = _check_facts(k.get("facts"), where)
        out_k[name] = {"stages": stages, "cut": cut, "facts": facts, "ops": good_ops}
        if k.get("asm_problem") is not None:  # its object file did not disassemble (analysis.codegen.finish)
            if not isinstance(k["asm_problem"], str):
                raise _bad(f"{where}.asm_problem", "must be text")
            out_k[name]["asm_problem"] = " ".join(k["asm_problem"].split())[:300]
        if k.get("pending") is True:  # an object file still to disassemble, links still to make
            elf = k.get("elf")
            elf = _inflate(elf, f"{where}.elf", earlier, binary=True) if elf is not None else None
            if elf is not None and not isinstance(elf, bytes):
                raise _bad(f"{where}.elf", "must be a deflated object file")
            if elf is not None and not (isinstance(k.get("elf"), dict) and "ref" in k["elf"]):
                budget -= len(elf)
                if budget < 0:
                    raise _bad("", f"holds more than {MAX_BUNDLE_CODE_CHARS:,} characters of code")
            earlier[(name, "elf")] = elf
            if not all(isinstance(k.get(f), (str, type(None))) for f in ("elf_file", "function")):
                raise _bad(where, "has an elf_file or function that is not text")
            out_k[name].update(pending=True, elf=elf, elf_file=(k.get("elf_file") or "")[:300] or None,
                               function=(k.get("function") or "")[:300] or None)
    lib = {}
    for name, v in library.items():
        if not isinstance(v, dict) or not all(isinstance(v.get(f, ""), str) for f in ("target", "library", "config")):
            raise _bad(f".library[{name[:60]!r}]", "needs text target, library and config")
        lib[name] = {"target": v.get("target", "")[:300], "library": v.get("library", "")[:100],
                     "config": _bounded(v.get("config", ""), MAX_CONFIG_CHARS)}
    seen = {s for k in out_k.values() for s in k["stages"]} | {"asm" for k in out_k.values() if k.get("elf")}
    return {"stages": sorted(seen, key=stage_order), "kernels": out_k, "library": lib,
            "note": " ".join(note_.split())[:300] if note_ else None}


_GPU_STAGES = ("ptx", "sass", "ptxas")
_CUT = linear_re.compile(r"… cut at [\d,]+ of ([\d,]+) lines")


def _cut_total(text: str) -> int | None:
    m = _CUT.search(text[-200:])
    return int(m.group(1).replace(",", "")) if m else None


def _facts_of(stages: dict, given, where: str) -> dict:
    """A kernel's facts: read here from its CPU texts (``kernel_facts``); a GPU kernel's (PTX,
    SASS, ptxas) are read by ``analysis.codegen.ptx`` on the compile side and only checked here."""
    if any(s in stages for s in _GPU_STAGES) or not any(s in stages for s in ("llvm-ir", "llvm-ir-opt", "asm")):
        return _check_facts(given, where)
    return kernel_facts(stages)


def _check_facts(f, where: str) -> dict:
    """Facts a file gives for a kernel whose texts are not read here (PTX/SASS, read by the GPU
    side's own readers), checked for type."""
    if f is None:
        return empty_facts()
    if not isinstance(f, dict):
        raise _bad(f"{where}.facts", "must be an object")
    out = empty_facts()
    for k in _INT_FACTS + _OPT_INT_FACTS:
        v = f.get(k, out[k])
        if v is not None and (type(v) is not int or v < 0) or (v is None and k in _INT_FACTS):
            raise _bad(f"{where}.facts.{k}", "must be a whole number, not negative")
        out[k] = v
    if not isinstance(f.get("stage"), (str, type(None))):
        raise _bad(f"{where}.facts.stage", "must be text")
    out["stage"] = f.get("stage")
    return out
