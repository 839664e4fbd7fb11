"""What fusion saved: the same program compiled with the backend's fusion passes disabled (only
those: its library or Triton rewrites stay, ``analysis.options``), measured the same way, side by
side (``bundle.fusion_comparison``, docs/bundle.md; the numbers' meaning: docs/numbers.md)."""

from __future__ import annotations

import jax

from analysis.codegen.kernel_code import totals as code_totals
from analysis.bundle.core import FusionComparison
from analysis.studies.compare import fusion_side
from analysis.program.memory import compare_memory
from analysis.compile.measure import alternate_calls, measure
from analysis.compile.stages import Compiled, recompile
from analysis.measures import fusion_savings, spread
from analysis.options import FUSION_PASSES

FUSION_NOTES = {
    "cpu": "Only XLA's fusion pass is off: dots keep their library fusions (YNNPACK/oneDNN with the "
           "ops around them); the preset \"Library rewrite off\" turns those off on their own.",
    "gpu": "Only XLA's fusion passes are off: Triton GEMM and softmax fusions, a bias/activation "
           "epilogue folded into a cuBLAS call and a split-K dot's reduction stay; the preset "
           "\"Triton rewrites off\" turns the Triton ones off on their own.",
}


def compare_fusion(c: Compiled, measure_it: bool = True, iterations: int | None = None,
                   calibrations=None) -> Compiled:
    """Compile the same program with the backend's fusion passes disabled, measure it the same
    way (when ``measure_it``), and store both sides in ``c.bundle.fusion_comparison``."""
    bundle = c.bundle
    platform = bundle.platform
    passes = FUSION_PASSES.get(platform, FUSION_PASSES["cpu"])  # fusion only, never the library rewrites
    extra = {"xla_disable_hlo_passes": ",".join(passes)}
    existing = (bundle.options.get("compiler_options") or {}).get("xla_disable_hlo_passes")
    if existing:
        extra["xla_disable_hlo_passes"] = existing + "," + extra["xla_disable_hlo_passes"]
    unfused = recompile(c, extra)
    alternated = None
    if measure_it:
        if bundle.timings is None:
            measure(c, iterations, calibrations)
        measure(unfused, iterations or bundle.timings.get("iterations"), calibrations)
        unfused.bundle.timings.pop("trace_json_gz_b64", None)  # one trace per bundle is plenty
        unfused.bundle.timings.pop("timeline", None)
        # the verdict's calls: the two sides in turn, until their spreads part or the time is up
        alternated = alternate_calls(lambda: jax.block_until_ready(unfused.executable(*unfused.args)),
                                     lambda: jax.block_until_ready(c.executable(*c.args)))
    ub = unfused.bundle
    # each side's generated code summed (its loads and stores: the lesson's evidence, docs/code.md)
    d = fusion_side(bundle.kernels, bundle.timings if measure_it else None, code_totals(bundle) if bundle.code else None)
    u = fusion_side(ub.kernels, ub.timings if measure_it else None, code_totals(ub) if ub.code else None)
    if alternated:
        for side, xs in ((u, alternated["a"]), (d, alternated["b"])):
            sp = spread(xs)
            side.update({"call_median_s": sp.median, "call_q1_s": sp.q1, "call_q3_s": sp.q3,
                         "call_min_s": sp.lo, "call_max_s": sp.hi, "alternated_calls": sp.n})
    bundle.fusion_comparison = FusionComparison(**{
        "platform": platform,
        "disabled_passes": list(passes),
        "compiler_options": dict(ub.options.get("compiler_options") or {}),
        "note": FUSION_NOTES.get(platform, ""),
        "measured": bool(measure_it),
        # how the calls were made: alternated, and why they stopped (parted, the most calls, time)
        "alternation": ({"calls": len(alternated["a"]), "stopped": alternated["stopped"],
                         "budget_s": alternated["budget_s"]} if alternated else None),
        "default": d,
        "unfused": u,
        # the headline compares untraced calls: the profiler's cost per event would favour the side
        # with fewer kernels (docs/numbers.md)
        **fusion_savings({"default": d, "unfused": u, "measured": bool(measure_it)}),
        "unfused_hlo_after": ub.stages.get("hlo_after"),
        "memory": compare_memory(bundle.memory, ub.memory),  # peaks, temporaries only the unfused compile writes
    })
    return c
