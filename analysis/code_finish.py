"""A CPU kernel's code finished when it is first asked for (``analysis.code.kernel_code``): its
object file disassembled, the facts read from the machine code, its lines linked to its HLO ops.

A compile reads each kernel's files and counts its loads and stores (``analysis.code_read``):
what the summary and the fusion comparison need. The rest costs a small program's first graph
more than the 10% the issue allows (``benchmarks/code_cost.py``, docs/performance.md), so it is
made here, per kernel, the first time a view, the CLI or the report asks, and remembered on the
bundle (never serialized: it is made again from the same files, the same way, anywhere).
"""

from __future__ import annotations

from analysis import code as C
from analysis.errors import ExplorerError


def finish(bundle, name: str, entry: dict) -> C.KernelCode:
    """The whole ``KernelCode`` of a kernel entry whose object and links are still to be made."""
    from analysis.code_links import kernel_ops, link_asm, link_llvm
    from analysis.disassemble import disassemble

    stages, cut, problems = dict(entry.get("stages") or {}), dict(entry.get("cut") or {}), []
    elf = entry.get("elf")
    if isinstance(elf, (bytes, bytearray)):
        try:
            text, total = C.bound_text(disassemble(bytes(elf), entry.get("elf_file") or f"{name}.o"))
            stages["asm"] = text
            if total is not None:
                cut["asm"] = total
        except ExplorerError as e:
            problems.append(e.one_line())
    facts = dict(entry.get("facts") or C.empty_facts())
    runs = next((s for s in ("asm", "llvm-ir-opt", "llvm-ir") if stages.get(s)), None)
    if runs and "asm" not in cut:
        f = C.asm_facts(stages[runs]) if runs == "asm" else C.llvm_facts(stages[runs])
        facts.update(vector_width=f["vector_width"], instructions=f["instructions"])
    ops = {s: dict(v) for s, v in (entry.get("ops") or {}).items()}
    module = bundle.module("hlo_after")
    if module is not None:
        index = bundle.derived("code_instructions", (bundle.stages.get("hlo_after"),),
                               lambda: {i.name: i for i in module.instructions()})
        kops = kernel_ops(module, name, index)
        if kops is not None:
            kops.function = entry.get("function") or None
            for s, text in stages.items():
                if s not in ops:
                    ops[s] = link_asm(text, kops) if s == "asm" else link_llvm(text, kops)
    order = sorted(stages, key=C.stage_order)
    return C.KernelCode(name=name, stages={s: stages[s] for s in order}, facts=facts, ops=ops, cut=cut,
                        problems=problems)
