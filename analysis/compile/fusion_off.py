"""What fusion saved: the same program compiled with the backend's fusion passes disabled,
measured the same way, side by side (``bundle.fusion_comparison``, docs/bundle.md)."""

from __future__ import annotations

from analysis.compare import FusionComparison, fusion_side
from analysis.memory import compare_memory
from analysis.compile.measure import measure
from analysis.compile.stages import Compiled, recompile
from analysis.options import FUSION_PASSES

FUSION_NOTES = {
    "cpu": "With fusion off, dots also lose their YNNPACK library fusion and run through Eigen.",
    "gpu": "With fusion off, dots that Triton would have fused go to cuBLAS and normalizations "
           "lose their one-kernel Triton form; a bias/activation epilogue folded into a cuBLAS "
           "call comes from gemm-rewriter and stays, as does a split-K dot's reduction.",
}


def compare_fusion(c: Compiled, measure_it: bool = True, iterations: int | None = None,
                   calibrations=None) -> Compiled:
    """Compile the same program with the backend's fusion passes disabled, measure it the same
    way (when ``measure_it``), and store both sides in ``c.bundle.fusion_comparison``."""
    bundle = c.bundle
    platform = bundle.platform
    passes = FUSION_PASSES.get(platform, FUSION_PASSES["cpu"])
    extra = {"xla_disable_hlo_passes": ",".join(passes)}
    existing = (bundle.options.get("compiler_options") or {}).get("xla_disable_hlo_passes")
    if existing:
        extra["xla_disable_hlo_passes"] = existing + "," + extra["xla_disable_hlo_passes"]
    unfused = recompile(c, extra)
    if measure_it:
        if bundle.timings is None:
            measure(c, iterations, calibrations)
        measure(unfused, iterations or bundle.timings.get("iterations"), calibrations)
        unfused.bundle.timings.pop("trace_json_gz_b64", None)  # one trace per bundle is plenty
        unfused.bundle.timings.pop("timeline", None)
    ub = unfused.bundle
    d = fusion_side(bundle.kernels, bundle.timings if measure_it else None)
    u = fusion_side(ub.kernels, ub.timings if measure_it else None)
    bundle.fusion_comparison = FusionComparison(**{
        "platform": platform,
        "disabled_passes": list(passes),
        "compiler_options": dict(ub.options.get("compiler_options") or {}),
        "note": FUSION_NOTES.get(platform, ""),
        "measured": bool(measure_it),
        "default": d,
        "unfused": u,
        "kernels_saved": u["kernels"] - d["kernels"],
        "bytes_saved": u["bytes"] - d["bytes"],
        "time_saved_s": (u["step_median_s"] - d["step_median_s"])
        if measure_it and u["step_median_s"] is not None and d["step_median_s"] is not None else None,
        "speedup": (u["step_median_s"] / d["step_median_s"])
        if measure_it and u["step_median_s"] and d["step_median_s"] else None,
        "busy_speedup": (u["device_busy_s"] / d["device_busy_s"])
        if measure_it and u["device_busy_s"] and d["device_busy_s"] else None,
        "unfused_hlo_after": ub.stages.get("hlo_after"),
        "memory": compare_memory(bundle.memory, ub.memory),  # peaks, temporaries only the unfused compile writes
    })
    return c
