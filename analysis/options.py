"""Compiler-option presets the UI and CLI offer, per backend.

"Fusion disabled" turns off the backend's fusion passes (``FUSION_PASSES``), the same list
the fusion comparison in ``analysis.timings`` uses.
"""

from __future__ import annotations

# The passes whose output is "fusion", by backend: disabling them (``xla_disable_hlo_passes``,
# comma-separated; unknown names are silently ignored by XLA) gives the unfused program.
FUSION_PASSES = {
    # Found in jax 0.10.2's XLA:CPU by compiling the gallery with xla_dump_to +
    # xla_dump_hlo_pass_re=.* (the dump file names carry the pass names) and checked by
    # disabling each: "fusion" (CpuInstructionFusion: elementwise/loop fusion) and
    # "dot-library-rewriter" (wraps dots and the ops around them into __ynn_fusion/oneDNN
    # library fusions; disabled, dots run unfused through Eigen). Kept on purpose:
    # "fusion-wrapper", which only wraps each single remaining op into a one-op kLoop fusion
    # so XLA's emitter still generates it (it merges nothing).
    "cpu": ("fusion", "dot-library-rewriter"),
    # XLA:GPU, from XLA's gpu_compiler.cc pass names (not verifiable on this machine;
    # benchmarks/gpu_check.py lists which of them appear in a real GPU pass dump):
    # priority-fusion (the main producer-consumer fusion), multi_output_fusion (sibling and
    # producer-consumer multi-output), horizontal-loop-fusion / horizontal-input-fusion
    # (independent small kernels into one), fusion-merger (older XLA), gemm-fusion (dot plus
    # neighbours into a __triton_gemm fusion; disabled, the dot goes to cuBLAS).
    # Kept: gemm-rewriter (needed to lower dots at all) and fusion-wrapper.
    "gpu": ("priority-fusion", "multi_output_fusion", "horizontal-loop-fusion",
            "horizontal-input-fusion", "fusion-merger", "gemm-fusion"),
}


def fusion_disabled_options(platform: str) -> dict:
    passes = FUSION_PASSES.get("gpu" if platform in ("gpu", "cuda", "rocm") else "cpu")
    return {"xla_disable_hlo_passes": ",".join(passes)}


def presets(platform: str) -> dict[str, dict]:
    """Preset name -> compiler options, for the platform a compile will run on."""
    out = {"Default": {}, "Fusion disabled": fusion_disabled_options(platform)}
    if platform == "gpu":
        out["Triton GEMM off"] = {"xla_gpu_enable_triton_gemm": False}
        out["Autotuning off"] = {"xla_gpu_autotune_level": 0}
    return out


def format_options(options: dict) -> str:
    return "\n".join(f"{k}={'true' if v is True else 'false' if v is False else v}" for k, v in options.items())
