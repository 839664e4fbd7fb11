"""XLA's reasons for fusing or not, explained: each reason a fusion pass printed in the
compiles we checked, in XLA's words (the string literal in XLA's source, found in the installed
jaxlib / CUDA plugin binary), with a gloss for a student; ``gloss(reason)`` finds the one for a
reason as a decision record carries it (``analysis.fusion.log``)."""

from __future__ import annotations

import re

GLOSSES: dict[str, str] = {
    # XLA:CPU loop fusion (cpu_instruction_fusion.cc, instruction_fusion.cc)
    "Fusing: consumer is elementwise or fusible.":
        "the consumer is a simple per-element op, so the producer's value can be computed inside "
        "the same loop",
    "Fusing: consumer is a fusion node.":
        "the consumer is already a loop fusion; the producer joins it",
    "Fusion OK: Can create output fusion.":
        "a matrix-vector dot feeding an add: the add is done as the dot writes its output",
    "Fusing small matrix-vector product.":
        "a small matrix-vector product is computed inline rather than called out to a GEMM library",
    "Fusion is not profitable.":
        "the producer is expensive (exp, tanh, rsqrt, a reduce, ...) and the consumer reads each of "
        "its elements several times (a broadcast, a reduce): fusing would recompute it each time",
    "operand can not be duplicated":
        "before fusing, XLA marks the producers it must not copy into a consumer (work that "
        "would be repeated for several users, or a library fusion such as YNNPACK's); this is one",
    "Don't fuse instructions from custom fusions/calls":
        "the consumer sits inside a library (YNNPACK) fusion or custom call, which loop fusion "
        "leaves alone",
    "Don't fuse non-scalar constants.":
        "a constant array stays in memory instead of being baked into the loop",
    "Bailing because producer can be output-fused into some operand.":
        "the producer is an add that a matrix-vector dot will absorb as its output; it is kept "
        "for that",
    "Producer is not loop-fusible.":
        "the producer (a dot, convolution, custom call, sort, ...) is not something a loop fusion "
        "can compute element by element",
    "Concatenate fusion is inefficient.":
        "a concatenate with many inputs or on the minor dimension runs faster as a plain copy",
    "Too many reductions inside single fusion.":
        "the fusion already holds several reductions; more would make the generated code too big",
    "Not fusing: insufficient non-constant nodes.":
        "a constant next to one op is not worth a fusion of its own",
    "Not fusing: producer is itself a fusion node.":
        "the producer is already a fusion; XLA:CPU does not fuse a fusion into its consumer",
    "Code duplication too high":
        "fusing would repeat the producer's computation too many times inside the fusion",
    "Not fusing: not found a fusible case":
        "the consumer is neither elementwise nor a loop fusion, so nothing can be fused into it",
    "not fusing into the output of the root instruction":
        "the producer is the program's result, which must be written to memory anyway",
    "expensive producer would be duplicated":
        "the producer has several users and is expensive; fusing would compute it once per user",
    "fusion pass cannot duplicate":
        "the producer has several users and this pass may not duplicate work",
    "multi-output fusion creates a cycle":
        "fusing would make the fusion both feed and wait for another op",
    "Operand is not fusible":
        "the operand (a parameter, a library call, ...) cannot be computed inside another kernel",
    # XLA:CPU library (YNNPACK) fusion (library_rewriter.cc)
    "Starting a fusion with":
        "a dot (or reduction) that the YNNPACK library can run starts a library fusion",
    "Fusing with":
        "a neighbour YNNPACK supports joins the library fusion",
    "Skipping unsupported instruction":
        "YNNPACK cannot run this op, so it stays out of the library call",
    # XLA:GPU priority fusion (priority_fusion.cc, gpu_fusible.cc)
    "chosen by the cost model":
        "priority fusion fused this pair because its cost model estimated the fused kernel faster",
    "the producer is not fusible":
        "the producer (a library call, a Triton GEMM, ...) cannot be fused into its consumer",
    "the consumer is not fusible":
        "the consumer cannot take a producer inside it",
    "not fusing because there are only bitcast users":
        "its only users are bitcasts (free reinterpretations); there is nothing to fuse into",
    "No users to fuse":
        "nothing uses this value, so there is nothing to fuse it into",
    "fusion into output of a reduce fusion would create a loop fusion":
        "the reduction's output is smaller than its input; fusing a consumer after it would "
        "turn the reduction kernel into a different (loop) kind",
    # XLA:GPU Triton GEMM rewriter (gemm_fusion.cc)
    "Not obviously profitable to fuse as input.":
        "the op feeding the matmul is not cheap enough to recompute inside the GEMM's tiles",
    "Slicing of fragmented dimension.":
        "slicing a dimension the GEMM has split into pieces cannot be expressed in its tiling",
    "Reductions are not fused yet.":
        "the Triton GEMM does not take a reduction (e.g. split-K's partial-sum reduce) after it",
    "Unimplemented instruction.":
        "the Triton GEMM emitter has no code for this op, so it stays outside the GEMM",
    "Unsupported opcode.":
        "the Triton GEMM emitter does not support this kind of op inside a GEMM fusion",
    "Triton GEMM created":
        "the matmul becomes a Triton GEMM fusion; cheap ops around it may join",
}

# Reasons whose verbatim text carries instance detail: gloss them by this prefix.
_GLOSS_PREFIXES = ("Reductions are not fused", "Starting a fusion with", "Fusing with",
                   "Skipping unsupported instruction")


def gloss(reason: str) -> str:
    """The plain-language gloss of a reason XLA printed ("" when none is known)."""
    r = re.sub(r"^(?:Up|Down): ", "", (reason or "").strip())
    if r in GLOSSES:
        return GLOSSES[r]
    for p in _GLOSS_PREFIXES:
        if r.startswith(p):
            return GLOSSES.get(p, GLOSSES.get(r, ""))
    return ""
