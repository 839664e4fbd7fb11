"""A CPU kernel's code finished when it is first asked for (``code_of`` below): its
object file disassembled, the facts read from the machine code, its lines linked to its HLO ops.

A compile reads each kernel's files and counts its loads and stores (``analysis.codegen.cpu_read``):
what the summary and the fusion comparison need. The rest costs a small program's first graph
more than the 10% the issue allows (``benchmarks/code_cost.py``, docs/performance.md), so it is
made here, per kernel, the first time a view, the CLI or the report asks, and remembered on the
bundle (never serialized: it is made again from the same files, the same way, anywhere).

What depends on a text or an object file alone (the disassembly, the machine code's facts, the
IR's buffer accesses, what each line computes) is made once per bundle for all the kernels that
share it: the layers of a stack are compiled to one function each kernel calls (their twins share
the object and the IR texts), so a 96-layer stack's 1,441 kernels need about twenty disassemblies,
not 1,441. Only naming each line's ops, which are each kernel's own, is done per kernel.
"""

from __future__ import annotations

from analysis.codegen import kernel_code
from analysis.errors import ExplorerError
from analysis.codegen.links import (RenamedLinks, asm_lines, canonical_ops, kernel_ops, link_asm, link_llvm, llvm_lines)
from analysis.codegen.llvm_ir import accesses


def _shared(bundle, what: str, key, make):
    """``make()`` once per bundle for each ``key`` (bytes or a text: what the kernels share)."""
    memo = bundle.derived("code_shared", (bundle.code,), dict)
    k = (what, key)
    if k not in memo:
        memo[k] = make()
    return memo[k]


def _disassembled(elf: bytes, file: str) -> tuple[str, int | None] | ExplorerError:
    from analysis.codegen.disassemble import disassemble

    try:
        return kernel_code.bound_text(disassemble(elf, file))
    except ExplorerError as e:  # remembered too: the same damaged object says the same
        return e


def disassemble_objects(bundle) -> None:
    """Every CPU kernel's object file disassembled now into its ``asm`` stage (once per object
    its twins share), and the object files dropped from the bundle: called in the worker, so
    that no ELF parser runs on the app's server (docs/worker.md, "The gate"; an object file a
    worker or an upload sends is as untrusted as any of their bytes). A damaged object is the
    kernel's ``asm_problem`` (one line) and the rest of its code stands; past the bundle's code
    budget (``kernel_code.MAX_BUNDLE_CODE_CHARS``, the texts it holds counted once each) a kernel keeps no
    machine code and says so. Its lines are linked to its ops when it is first asked for, as ever."""
    c = bundle.code
    kernels = c.get("kernels") if isinstance(c, dict) else None
    if not kernels:
        return
    texts: dict[int, str] = {}
    for k in kernels.values():
        for t in (k.get("stages") or {}).values():
            texts[id(t)] = t
    left = kernel_code.MAX_BUNDLE_CODE_CHARS - sum(len(t) for t in texts.values() if isinstance(t, str))
    made: dict[bytes, tuple | ExplorerError] = {}
    for name, k in kernels.items():
        elf = k.get("elf")
        if not isinstance(elf, (bytes, bytearray)):
            continue
        elf, file = bytes(elf), k.get("elf_file") or f"{name}.o"
        got = made.get(elf)
        if got is None:
            got = made[elf] = _disassembled(elf, file)
            if not isinstance(got, ExplorerError):
                left -= len(got[0])
                if left < 0:
                    got = made[elf] = ExplorerError("code", "not disassembled: the bundle's code is full", file)
        k["elf"] = None
        if isinstance(got, ExplorerError):
            k["asm_problem"] = got.one_line()[:300]
            continue
        k["stages"] = {**(k.get("stages") or {}), "asm": got[0]}
        if got[1] is not None:
            k["cut"] = {**(k.get("cut") or {}), "asm": got[1]}
    if any("asm" in (k.get("stages") or {}) for k in kernels.values()) and "asm" not in (c.get("stages") or []):
        c["stages"] = sorted([*(c.get("stages") or []), "asm"], key=kernel_code.stage_order)


def finish(bundle, name: str, entry: dict) -> kernel_code.KernelCode:
    """The whole ``KernelCode`` of a kernel entry whose object and links are still to be made."""
    stages, cut = dict(entry.get("stages") or {}), dict(entry.get("cut") or {})
    problems = [entry["asm_problem"]] if isinstance(entry.get("asm_problem"), str) else []
    elf = entry.get("elf")
    if isinstance(elf, (bytes, bytearray)):
        elf, file = bytes(elf), entry.get("elf_file") or f"{name}.o"
        got = _shared(bundle, "asm", (elf, file), lambda: _disassembled(elf, file))
        if isinstance(got, ExplorerError):
            problems.append(got.one_line())
        else:
            stages["asm"], total = got
            if total is not None:
                cut["asm"] = total
    facts = dict(entry.get("facts") or kernel_code.empty_facts())
    runs = next((s for s in ("asm", "llvm-ir-opt", "llvm-ir") if stages.get(s)), None)
    if runs and "asm" not in cut:
        text = stages[runs]
        f = _shared(bundle, "facts", text, lambda: kernel_code.asm_facts(text) if runs == "asm" else kernel_code.llvm_facts(text))
        facts.update(vector_width=f["vector_width"], instructions=f["instructions"])
    ops = {s: dict(v) for s, v in (entry.get("ops") or {}).items()}
    module = bundle.module("hlo_after")
    if module is not None:
        index = bundle.derived("code_instructions", (bundle.stages.get("hlo_after"),),
                               lambda: {i.name: i for i in module.instructions()})
        kops = kernel_ops(module, name, index)
        if kops is not None:
            kops.function = entry.get("function") or None
            # twins (a stack's layers) link the same text the same way up to names: made once
            # per text and form, renamed per kernel (docs/performance.md)
            key, canon, names = canonical_ops(kops)
            for s, text in stages.items():
                if s in ops:
                    continue
                if s == "asm":
                    made = _shared(bundle, "asm_links", (text, key), lambda: link_asm(
                        text, canon, _shared(bundle, "asm_lines", text, lambda: asm_lines(text))))
                else:
                    made = _shared(bundle, "llvm_links", (text, key), lambda: link_llvm(
                        text, canon, _shared(bundle, "accesses", text, lambda: accesses(text)[0]),
                        _shared(bundle, "llvm_lines", text, lambda: llvm_lines(text))))
                ops[s] = RenamedLinks(made, names)
    order = sorted(stages, key=kernel_code.stage_order)
    return kernel_code.KernelCode(name=name, stages={s: stages[s] for s in order}, facts=facts, ops=ops, cut=cut,
                        problems=problems)


def code_of(bundle, name: str) -> kernel_code.KernelCode | None:
    """The code of kernel ``name``, finished (``None`` when it has none: a library call, no code
    dumped): the one way a view, the CLI and the report get a kernel's code."""
    c = kernel_code.code_field(bundle)
    k = (c.get("kernels") or {}).get(name) if c else None
    if not isinstance(k, dict):
        return None
    if k.get("pending"):  # a CPU kernel: disassembled and linked when first asked for (analysis.codegen.finish)
        return bundle.derived(f"code:{name}", (c, k), lambda: finish(bundle, name, k))
    return kernel_code.KernelCode(name=name, stages=dict(k.get("stages") or {}), facts=dict(k.get("facts") or {}),
                                  ops={s: {int(n): list(v) for n, v in lines.items()} for s, lines in (k.get("ops") or {}).items()},
                                  cut=dict(k.get("cut") or {}))
