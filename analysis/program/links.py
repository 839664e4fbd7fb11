"""Op <-> kernel links: the one definition every view uses.

An op is a pre-optimization compute instruction (``analysis.program.provenance.compute_ops``); a kernel
is a launching instruction of the optimized module (``analysis.program.kernels``). The link between
them is provenance (``analysis.program.provenance.map_provenance``), by instruction name, never by
op-name string. From it:

- ``kernel_ops(prov, kernel)``: the ops a kernel does (its "N ops" on the graph, "Absorbed N"
  in the details, the "ops" column of Compare, what the pass pipeline says a fusion took in);
- ``op_kernels(prov, op)``: the kernels an op ended in;
- ``related(a, b)``: the kernels of compile B doing the ops of each kernel of compile A (the
  same program compiled two ways): A's kernel -> A's ops -> the same ops in B -> B's kernels;
- ``absorbed(before, after, names)``: what a new fusion took in, between two modules (one pass).

Pure functions; no JAX.
"""

from __future__ import annotations

from analysis.hlo import Module
from analysis.program.kernels import Kernel, kernels as find_kernels, launching
from analysis.program.provenance import Provenance, op_key, compute_ops, map_provenance

# How provenance matched an op: the first three follow the op's own metadata or structure; the
# others are inherited from a neighbour (a constant JAX inserted, an epilogue a library call
# computes), so they link weaker and are left out where an over-reach would mislead.
DIRECT = frozenset({"metadata", "op_name", "shape"})


def kernel_ops(prov: Provenance | None, kernel: str | Kernel) -> list[str]:
    """The pre-optimization ops (instruction names) that ended in ``kernel``, in op order."""
    if prov is None:
        return []
    name = kernel if isinstance(kernel, str) else kernel.name
    return list(dict.fromkeys(prov.kernel_to_pre.get(name, [])))


def op_count(prov: Provenance | None, kernel: str | Kernel) -> int:
    """How many ops a kernel does: ``len(kernel_ops(...))``, the one count every view prints."""
    return len(kernel_ops(prov, kernel))


def op_kernels(prov: Provenance | None, op: str) -> list[str]:
    """The kernels an op ended in (several when XLA duplicated it into several fusions)."""
    if prov is None:
        return []
    return list(dict.fromkeys(prov.pre_to_kernels.get(op, [])))


def link_maps(prov: Provenance | None, kernels: list[Kernel]) -> dict:
    """``{"k2pre": kernel -> ops, "pre2k": op -> kernels, "fused": kernel -> its fused
    instruction names}``: what a browser needs to highlight a selection without asking a server."""
    k2pre = {k.name: kernel_ops(prov, k) for k in kernels}
    pre2k: dict[str, list[str]] = {}
    for kn, ops in k2pre.items():
        for op in ops:
            pre2k.setdefault(op, []).append(kn)
    return {"k2pre": {k: v for k, v in k2pre.items() if v}, "pre2k": pre2k,
            "fused": {k.name: list(k.fused_ops) for k in kernels if k.fused_ops}}


def _op_identity(pre: Module | None) -> dict[str, tuple]:
    """Op name -> (name, opcode, op_name, source line): two compiles of one program share it."""
    if pre is None:
        return {}
    out = {}
    for inst in compute_ops(pre):
        k = op_key(inst)
        out[inst.name] = (inst.name, inst.opcode, k[0] if k else "", k[2] if k else 0)
    return out


def related(a, b) -> dict[str, list[str]]:
    """For each launching kernel of Bundle ``a``, the kernels of Bundle ``b`` that do some of its
    ops, most shared ops first. Ops are matched by instruction (name, opcode, op_name and line
    must agree, so two different programs do not link by accident); only ops linked directly
    (``DIRECT``) count when the kernel has any, so a constant both sides inherit links nothing."""
    pa, pb = a.provenance, b.provenance
    ida, idb = _op_identity(a.module("hlo_before")), _op_identity(b.module("hlo_before"))
    b_by_id = {v: n for n, v in idb.items()}
    b_names = {k.name for k in launching(b.kernels)}
    out: dict[str, list[str]] = {}
    for k in launching(a.kernels):
        ops = kernel_ops(pa, k)
        direct = [o for o in ops if pa is not None and pa.how.get(o) in DIRECT]
        ops = direct or ops
        counts: dict[str, int] = {}
        for op in ops:
            other = b_by_id.get(ida.get(op, ()))
            if other is None:
                continue
            for kn in op_kernels(pb, other):
                if kn in b_names and not (direct and pb is not None and pb.how.get(other) not in DIRECT):
                    counts[kn] = counts.get(kn, 0) + 1
        out[k.name] = [n for n, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return out


def absorbed(before: Module, after: Module, names: list[str]) -> dict[str, list[str]]:
    """For each instruction in ``names`` (new fusions of ``after``), the instructions of
    ``before`` it does, by provenance between the two modules (``kernel_ops``)."""
    try:
        prov = map_provenance(before, after, find_kernels(after))
    except Exception:  # noqa: BLE001 - an odd intermediate module links nothing
        return {}
    return {n: kernel_ops(prov, n) for n in names}
