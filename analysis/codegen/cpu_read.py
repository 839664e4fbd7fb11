"""A compile's generated code read from the files XLA:CPU dumps (``xla_dump_to``), into the
``code`` field (``analysis.codegen.kernel_code``): the same reader for our compile's private dump folder
(``analysis.compile.code_dump``) and for a user's zipped dump (``analysis.inputs.dump``), which give it
their file names and a way to read one.

Per emitted kernel XLA:CPU writes, beside its HLO dumps::

    module_NNNN.NAME.<kernel>_kernel_module.ir-no-opt.ll     LLVM IR before LLVM's optimization
    module_NNNN.NAME.<kernel>_kernel_module.ir-with-opt.ll   after it
    module_NNNN.NAME.obj-file.<kernel>_kernel_module.o       the machine code (an ELF object)

(its MLIR-based emitters name them ``__compute_module_<kernel>`` instead of
``<kernel>_kernel_module``). Identical kernels share one compiled function: XLA writes its files
once, under the first one's name; each of the others is given that code (its fused computation
is the same, instruction by instruction), linked to its own instructions. A library fusion
(YNNPACK, XNNPACK) or call (oneDNN, Eigen) has none: its code is the library's, and ``library``
says what it calls. docs/code.md says what each part means.
"""

from __future__ import annotations

from typing import Callable

from analysis.codegen import kernel_code
from analysis import linear_re
from analysis.codegen.disassemble import MAX_OBJECT_BYTES
from analysis.errors import ExplorerError
from analysis.codegen.llvm_ir import accesses

MAX_IR_BYTES = 16 * 1024 * 1024  # one IR file (a kernel's IR is kilobytes; a bound for a hostile dump)
_DIGITS = frozenset("0123456789")
_STAGE_OF = {"ir-no-opt.ll": "llvm-ir", "ir-with-opt.ll": "llvm-ir-opt", "o": "asm"}
CODE_FILE = linear_re.compile(r"^module_(?P<id>\d+)\.(?P<rest>.+)\.(?P<kind>ir-no-opt\.ll|ir-with-opt\.ll|o)$")
# XLA 0.10 dumped every kernel's LLVM IR; from 0.11 on only the emitters xla_dump_emitter_re names
NOTE_NO_IR = ("the dump has each kernel's machine code but no LLVM IR (so no loads and stores): XLA dumps "
              "it when told --xla_dump_emitter_re=llvm as well as --xla_dump_to")
KERNEL_PART = linear_re.compile(r"^(?:__compute_module_(?P<a>.+)|(?P<b>.+)_kernel_module)$")
_KINDS = ("ir-no-opt.ll", "ir-with-opt.ll", "o")


def code_file(name: str) -> tuple[str, str, str] | None:
    """(id, rest, kind) of a code file's name (``CODE_FILE``'s groups), else None. Every file of a
    dump comes here: read with str methods as the pattern reads it (only its last part can be the
    kind, and only the first dot closes the id)."""
    if not name.startswith("module_") or "\n" in name:
        return None
    ident, dot, tail = name[7:].partition(".")
    if not dot or not ident or not _DIGITS.issuperset(ident):
        return None
    kind = next((k for k in _KINDS if tail.endswith("." + k) and len(tail) > len(k) + 1), None)
    return (ident, tail[:-len(kind) - 1], kind) if kind else None


def kernel_part(rest: str) -> str | None:
    """The kernel's part of a code file's name (``KERNEL_PART``'s group), else None."""
    if "\n" in rest:
        return None
    if rest.startswith("__compute_module_") and len(rest) > 17:
        return rest[17:]
    return rest[:-14] if rest.endswith("_kernel_module") and len(rest) > 14 else None


def code_files(names, module_name: str) -> dict[str, dict[str, str]]:
    """{kernel part of the name: {stage: file}} of the code files of module ``module_name`` among
    ``names`` (base names); with several compiles of that module, the last one's."""
    found: dict[int, dict] = {}
    head = f"{module_name}."
    for n in names:
        m = code_file(n)
        if not m or not m[1].startswith(head):
            continue
        ident, rest, kind = m
        rest = rest[len(head):]
        if kind == "o":
            if not rest.startswith("obj-file."):
                continue
            rest = rest[len("obj-file."):]
        k = kernel_part(rest)
        if k:
            found.setdefault(int(ident), {}).setdefault(k, {})[_STAGE_OF[kind]] = n
    return found[max(found)] if found else {}


def code_from_files(names, read: Callable[[str, int], bytes], bundle) -> dict | None:
    """The ``code`` field of ``bundle`` (a CPU compile) from a dump's file ``names`` (base names)
    and ``read(name, limit)`` (a file's bytes, at most ``limit``; raising ``ExplorerError`` or
    ``OSError`` when it cannot). A file that cannot be read or decoded leaves its stage out and
    says why in the note; ``None`` without the optimized HLO."""
    module = bundle.module("hlo_after")
    if module is None:
        return None
    files = code_files(names, module.name)
    index = {i.name: i for i in module.instructions()}
    kernels, library, problems = {}, {}, []
    twins = _twins(module, index, [k.name for k in bundle.kernels if k.route != "library"], files)
    texts: dict[str, str | bytes | None] = {}  # file -> its text or bytes (twins share files: each is read once)
    done: dict[str, dict] = {}  # a kernel with files -> its entry
    for k in bundle.kernels:
        if k.route == "library":
            inst = index.get(k.name)
            library[k.name] = {"target": k.custom_call_target or k.fusion_kind or k.opcode,
                               "library": k.library or "", "config": (inst.attributes.get("backend_config", "")
                                                                      if inst is not None else "")}
            continue
        owner = k.name if k.name in files else twins.get(k.name)
        if owner is None:
            continue
        if owner not in done:
            done[owner] = _read_kernel(files[owner], read, texts, problems)
        got = done[owner]
        if got["stages"] or got["elf"] is not None:
            # the function it runs is its own, or (a twin) the one named after its owner
            kernels[k.name] = {**got, "function": owner if owner != k.name else None}
    note = None
    if problems:
        note = f"{len(problems)} code file(s) not read: {problems[0]}"
    elif not kernels and any(k.route != "library" and k.route != "control" for k in bundle.kernels):
        note = "XLA wrote no code files for this compile"
    elif kernels and not any(e["stages"] for e in kernels.values()):
        note = NOTE_NO_IR
    return kernel_code.make_code(kernels, library, note)


def _read_kernel(mine: dict, read, texts: dict, problems: list) -> dict:
    """One kernel's entry from its files (each read once: ``texts``): its IR texts, its object
    file (disassembled when first asked for: ``analysis.codegen.finish``) and its loads and stores
    (from the IR before optimization: ``analysis.codegen.kernel_code.kernel_facts``)."""
    stages, elf, analyses = {}, None, {}
    for stage in ("llvm-ir", "llvm-ir-opt", "asm"):
        file = mine.get(stage)
        if file is None:
            continue
        if file not in texts:
            texts[file] = None
            try:
                data = read(file, MAX_OBJECT_BYTES if stage == "asm" else MAX_IR_BYTES)
                if stage == "asm" and not data.startswith(b"\x7fELF"):
                    raise ExplorerError("code", "not an ELF object file (damaged?)", file)
                texts[file] = data if stage == "asm" else data.decode("utf-8", errors="replace")
            except ExplorerError as e:
                problems.append(e.one_line())
            except OSError as e:
                problems.append(f"{file}: {e.strerror or e}")
        if texts[file] is None:
            continue
        if stage == "asm":
            elf = texts[file]
            continue
        stages[stage] = texts[file]
        if stage == "llvm-ir" or "llvm-ir" not in mine:
            analyses[stage] = accesses(texts[file])
    facts = kernel_code.kernel_facts({s: t for s, t in stages.items() if s in analyses}, analyses)
    return {"stages": stages, "elf": elf, "elf_file": mine.get("asm"), "facts": facts, "pending": True}


def _twins(module, index: dict, names: list[str], files: dict) -> dict[str, str]:
    """{kernel without files of its own: the kernel with files whose compiled function it runs}:
    fusions whose fused computations are the same instruction by instruction (opcodes, shapes,
    attributes, operands by position; names aside)."""
    by_sig: dict = {}
    for n in names:
        if n in files and (sig := _signature(module, index.get(n))) is not None:
            by_sig.setdefault(sig, n)
    out = {}
    for n in names:
        if n not in files and (sig := _signature(module, index.get(n))) is not None and sig in by_sig:
            out[n] = by_sig[sig]
    return out


_NAMELESS = ("metadata", "backend_config", "calls", "frontend_attributes", "statistics_viz", "origin")


def _signature(module, inst):
    if inst is None or inst.opcode != "fusion" or not inst.called_computations:
        return None
    comp = module.by_name.get(inst.called_computations[0])
    if comp is None or any(i.opcode == "fusion" for i in comp.instructions):
        return None  # nested fusions: not compared (their bodies would need it too)
    pos = {i.name: n for n, i in enumerate(comp.instructions)}
    return (inst.shape_text, inst.fusion_kind, tuple(
        (i.opcode, i.shape_text, i.operand_text if i.opcode in ("parameter", "constant") else
         tuple(pos.get(o, o) for o in i.operands),
         tuple(sorted((k, v) for k, v in i.attributes.items() if k not in _NAMELESS)), i.is_root)
        for i in comp.instructions))
