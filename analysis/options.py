"""Compiler-option presets the UI and CLI offer, per backend.

The fusion passes are the ones that exist in the XLA that jax 0.10/0.11 ship, read off
``xla_dump_hlo_pass_re=.*`` dumps: on CPU the pass is ``fusion`` (XLA:CPU's instruction
fusion; ``fusion-wrapper`` then wraps each remaining op in a one-op fusion, which is the
"unfused" program). On GPU fusion is spread over several passes.
"""

from __future__ import annotations

FUSION_PASSES = {
    "cpu": ("fusion",),
    "gpu": ("priority-fusion", "multi_output_fusion", "horizontal-loop-fusion",
            "horizontal-input-fusion", "fusion-merger", "variadic-op-splitter"),
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
