"""Facts read from an XLA:GPU kernel's code: its PTX, ptxas's ``-v`` report and its SASS (issue
#36; docs/code.md, "On the GPU"). Pure Python: texts in, the facts dict of ``analysis.code`` out,
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

import re

from analysis.code import empty_facts

# -- PTX ---------------------------------------------------------------------------------------

_FUNC_START = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$.]+)\s*\(?")
_STATEMENT_OP = re.compile(r"^(?:@!?%?\w+\s+)?([a-z][a-z0-9_]*(?:\.[a-z0-9_:]+)*)")
_REG_DECL = re.compile(r"\.reg\s+\.\w+\s+%\w+(?:<(\d+)>)?")
_SHARED_DECL = re.compile(r"^\s*(?!\.extern)(?:\.\w+\s+)*\.shared\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+[\w$]+((?:\[\d*\])*)\s*;")
_TYPE_BITS = re.compile(r"^[bsuf](\d+)$")


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
        m = _FUNC_START.match(lines[i])
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
    return [m.group(2) for m in map(_FUNC_START.match, text.splitlines())
            if m and m.group(1) == "entry" and not m.string.rstrip().endswith(";")]


def _statements(text: str):
    """The PTX statements of a text: comments dropped, split at ``;``, braces and labels
    removed; directives (``.reg``...) kept (they start with a dot)."""
    for line in text.splitlines():
        code = line.split("//")[0]
        for part in code.split(";"):
            s = part.strip().lstrip("{}").strip()
            while True:  # a label before a statement: ``$L__BB0_2: add.s32 ...``
                m = re.match(r"^[$\w]+:\s*", s)
                if not m or s.startswith(("%", "@")):
                    break
                s = s[m.end():]
            s = s.rstrip("}").strip()
            if s:
                yield s


def _global_access(op: str) -> tuple[int, int, int | None]:
    """(loads, stores, vector bits) of one PTX opcode (``ld.global.nc.v4.f32``)."""
    parts = op.split(".")
    head = parts[0]
    spaces = [p for p in parts[1:] if p in ("global", "shared", "shared::cta", "shared::cluster", "local", "param", "const")]
    bits = None
    vec = next((int(p[1:]) for p in parts[1:] if re.fullmatch(r"v\d+", p)), None)
    if vec:
        t = next((int(m.group(1)) for p in reversed(parts) if (m := _TYPE_BITS.match(p))), None)
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
            for m in _REG_DECL.finditer(s):
                declared += int(m.group(1)) if m.group(1) else 1
            sm = _SHARED_DECL.match(s + ";")
            if sm:
                elem = _TYPE_BITS.match(sm.group(1))
                count = 1
                for d in re.findall(r"\[(\d*)\]", sm.group(2)):
                    count *= int(d) if d else 0
                shared = (shared or 0) + count * (int(elem.group(1)) // 8 if elem else 1)
            continue
        m = _STATEMENT_OP.match(s)
        if not m:
            continue
        insts += 1
        ld, st, bits = _global_access(m.group(1))
        loads += ld
        stores += st
        if bits and (ld or st) and (width is None or bits > width):
            width = bits
    facts.update(global_loads=loads, global_stores=stores, vector_width=width, instructions=insts,
                 shared_bytes=shared, stage="ptx")
    facts["declared_registers"] = declared
    return facts


# -- ptxas -v ----------------------------------------------------------------------------------

_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_FUNC = re.compile(r"Function properties for (\S+)")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores,\s*(\d+) bytes spill loads")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")


def split_ptxas(text: str) -> dict[str, str]:
    """ptxas's ``-v`` report of a module -> {entry name: its lines}, from ``Compiling entry
    function 'X'`` to the next one (the device functions compiled with it are in its lines; the
    module's own lines before the first entry, such as ``N bytes gmem``, are in none)."""
    out: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in text.splitlines():
        m = _PTXAS_ENTRY.search(line)
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
    regs = [int(x) for x in _PTXAS_USED.findall(text)]
    spills = [int(a) for a, _ in _PTXAS_SPILL.findall(text)]
    smem = [int(x) for x in _PTXAS_SMEM.findall(text)]
    facts.update(registers=max(regs) if regs else None, spills=sum(spills) if spills else None,
                 shared_bytes=max(smem) if smem else (0 if regs else None), stage="ptxas")
    return facts


# -- SASS (nvdisasm / cuobjdump -sass) ---------------------------------------------------------

_SASS_SECTION = re.compile(r"^\s*\.section\s+\.text\.([\w$.]+)|^\s*Function\s*:\s*([\w$.]+)")
_SASS_INST = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)")
_SASS_BITS = {"8": 8, "U8": 8, "S8": 8, "16": 16, "U16": 16, "S16": 16, "64": 64, "128": 128}


def split_sass(text: str) -> dict[str, str]:
    """A cubin's SASS (nvdisasm's ``.text.NAME`` sections, or cuobjdump's ``Function : NAME``
    blocks) -> {kernel name: its SASS}."""
    out: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in text.splitlines():
        m = _SASS_SECTION.match(line)
        if m:
            cur = out.setdefault(m.group(1) or m.group(2), [])
        if cur is not None:
            cur.append(line)
    return {k: "\n".join(v) + "\n" for k, v in out.items()}


def sass_facts(text: str) -> dict:
    """Facts of a kernel's SASS: ``global_loads`` (``LDG``, ``LDGSTS``: global into shared,
    ``UTMALDG``: TMA loads, ``ATOMG``), ``global_stores`` (``STG``, ``RED``, ``ATOMG``,
    ``UTMASTG``), ``vector_width`` (the widest LDG/STG of more than 32 bits: ``LDG.E.128``),
    ``instructions`` (every instruction line, ``NOP`` padding too)."""
    facts = empty_facts()
    loads = stores = insts = 0
    width = None
    for line in text.splitlines():
        m = _SASS_INST.match(line)
        if not m:
            continue
        insts += 1
        op, mods = m.group(1), m.group(2).lstrip(".").split(".") if m.group(2) else []
        ld = op in ("LDG", "LDGSTS", "UTMALDG", "ATOMG")
        st = op in ("STG", "RED", "REDG", "ATOMG", "UTMASTG", "UTMAREDG")
        loads += ld
        stores += st
        if op in ("LDG", "STG"):
            bits = max((_SASS_BITS.get(x, 0) for x in mods), default=0)
            if bits > 32 and (width is None or bits > width):
                width = bits
    facts.update(global_loads=loads, global_stores=stores, vector_width=width, instructions=insts,
                 stage="sass")
    return facts
