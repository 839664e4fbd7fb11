"""Numbers per compile: ops before, kernels after, fusion coverage, bytes unfused vs fused.

The memory-traffic estimate: before optimization every compute op reads its operands from and
writes its result to device memory; after, only kernels do. The difference is the traffic of
intermediates that fusion keeps in registers/cache instead of round-tripping through memory.
"""

from __future__ import annotations

from collections import Counter

from analysis.hlo import Module
from analysis.program.kernels import ROUTES, Kernel, kernel_bytes, launching
from analysis.program.provenance import Provenance, compute_op_instances, op_count


def unfused_bytes(pre: Module) -> int:
    """Traffic if every compute op were its own kernel; an op of a nested ``jit`` called from
    several places counts once per call site (after inlining, each site has its own kernels)."""
    total = 0
    for inst in compute_op_instances(pre):
        if inst.opcode in ("while", "conditional", "call"):
            continue
        comp = inst.computation
        total += kernel_bytes(inst, comp)
    return total


def compute_metrics(pre: Module | None, post: Module, kernels: list[Kernel],
                    provenance: Provenance | None) -> dict:
    launch = launching(kernels)
    by_route = Counter(k.route for k in kernels)
    by_library = Counter(k.library for k in kernels if k.library)
    fused_bytes = sum(k.bytes for k in launch)
    m: dict = {
        "kernels_after": len(launch),
        "control_ops_after": by_route.get("control", 0),
        "kernels_by_route": {r: by_route.get(r, 0) for r in ROUTES},
        "kernels_by_library": dict(sorted(by_library.items())),
        "instructions_after": sum(len(c.instructions) for c in post.computations),
        "multi_op_fusions": sum(1 for k in launch if k.is_multi_op_fusion),
        "fused_bytes": fused_bytes,
        "flops": sum(k.flops for k in launch),
    }
    if pre is not None:
        m["compute_ops_before"] = op_count(pre)
        m["instructions_before"] = sum(len(c.instructions) for c in pre.computations)
        ub = unfused_bytes(pre)
        m["unfused_bytes"] = ub
        m["bytes_saved"] = ub - fused_bytes
        m["bytes_saved_fraction"] = (ub - fused_bytes) / ub if ub else 0.0
    if provenance is not None and pre is not None:
        # ops that ended in a kernel doing several ops of the program: a multi-op fusion, or a
        # library call with an epilogue (the bias add and ReLU cuBLASLt does with the matmul)
        multi = {k.name for k in launch if k.fuses_ops}
        total = len(provenance.pre_to_kernels) + len(provenance.unmapped)
        in_fusion = sum(1 for kns in provenance.pre_to_kernels.values() if any(k in multi for k in kns))
        m["fusion_coverage"] = in_fusion / total if total else 0.0
        m["provenance_mapped_fraction"] = provenance.mapped_fraction
    return m
