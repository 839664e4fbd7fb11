"""What the explorer asks of a Bundle about its ops: the ops a line of the user's file made,
the ops and kernels a search names, the kernel an instruction ended in, an instruction by
side and name, and the source lines of a node. Pure (no Streamlit): the page, the details
panel and the text views ask these."""

from __future__ import annotations

import re

from analysis.bundle.content import ContentCache
from analysis.bundle.core import Bundle
from analysis.hlo import Instruction


def ops_on_line(b: Bundle, line: int) -> list[str]:
    """The pre-optimization ops made by line ``line`` of the user's file."""
    return list(ops_by_line(b).get(line, ()))


_BY_LINE = ContentCache(("before", "source"), size=6)


def ops_by_line(b: Bundle) -> dict[int, list[str]]:
    """Line of the user's file -> the pre-optimization ops it made; one walk of the module per
    content (a walk per line was most of a rerun of a 24,000-op program). Callers must not
    change it."""
    from analysis.program.provenance import walk_compute

    def make() -> dict[int, list[str]]:
        pre = b.module("hlo_before")
        user_file = b.source.get("file")
        out: dict[int, list[str]] = {}
        for inst, key in (walk_compute(pre) if pre is not None else ()):
            if key and key[2] and (not user_file or not key[1] or key[1] == user_file):
                out.setdefault(key[2], []).append(inst.name)
        return out

    return _BY_LINE.get(b, make)


def search(b: Bundle, query: str) -> list[tuple[str, str, str]]:
    """Ops matching by name, op_name or source line: (side, name, description)."""
    q = query.strip()
    if not q:
        return []
    out: list[tuple[str, str, str]] = []
    m = re.fullmatch(r"(?:line\s*)?(\d+)", q, re.I)
    if m:
        for op in ops_on_line(b, int(m.group(1))):
            out.append(("pre", op, f"line {m.group(1)}"))
    ql = q.lower()
    for side, stage in (("pre", "hlo_before"), ("post", "hlo_after")):
        mod = b.module(stage)
        if mod is None:
            continue
        names = {k.name for k in b.kernels} if side == "post" else None
        for inst in mod.instructions():
            if inst.opcode in ("parameter",) and side == "post":
                continue
            if ql in inst.name.lower() or ql in inst.metadata.op_name.lower() or ql == inst.opcode:
                target = inst.name
                if side == "post" and target not in names:
                    k = kernel_containing(b, inst.name)
                    if k is None:
                        continue
                    target = k
                out.append((side, target, inst.metadata.op_name or inst.opcode))
            if len(out) > 200:
                break
    seen, uniq = set(), []
    for r in out:
        if (r[0], r[1]) not in seen:
            seen.add((r[0], r[1]))
            uniq.append(r)
    return uniq


def kernel_containing(b: Bundle, inst_name: str) -> str | None:
    """The kernel of the optimized module that is, or fused, the instruction ``inst_name``."""
    for k in b.kernels:
        if k.name == inst_name or inst_name in k.fused_ops:
            return k.name
    return None


def find_instruction(b: Bundle, side: str, name: str) -> Instruction | None:
    """The instruction ``name`` of the module before ("pre") or after ("post") optimization."""
    mod = b.module("hlo_before" if side == "pre" else "hlo_after")
    if mod is None:
        return None
    for c in mod.computations:
        if name in c.by_name:
            return c.by_name[name]
    return None


def node_source_lines(b: Bundle, side: str, name: str, k) -> set[int]:
    """The lines of the user's file a node came from: a kernel's (``k``) source lines, else the
    instruction's own, else (an op before optimization) the lines its call sites give it (an
    op of a nested jit carries none of its own)."""
    user_file = b.source.get("file")
    lines: set[int] = set()
    if k is not None:
        for f, ln in k.source_lines:
            if not user_file or f == user_file:
                lines.add(ln)
        return lines
    inst = find_instruction(b, side, name)
    if inst is not None and inst.metadata.source is not None:
        src = inst.metadata.source
        if src.line and (not user_file or src.file == user_file):
            lines.add(src.line)
    if not lines and side == "pre":
        for ln in _lines_of(b, name):
            lines.add(ln)
    return lines


def _lines_of(b: Bundle, op: str) -> list[int]:
    from analysis.program.provenance import walk_compute

    pre = b.module("hlo_before")
    return [key[2] for inst, key in walk_compute(pre) if inst.name == op and key and key[2]] if pre else []


def selection_problem(b: Bundle, sel: dict) -> str | None:
    """A one-line note when a link's selection names an instruction this compile does not have
    (a stale or edited ``node=``), else None."""
    name, side = sel.get("name"), sel.get("side")
    if not name or side not in ("pre", "post") or find_instruction(b, side, str(name)) is not None:
        return None
    where = "before" if side == "pre" else "after"
    return f"link: this compile has no instruction named {str(name)[:60]!r} {where} optimization; nothing is selected"

