"""Compiler-option presets the UI and CLI offer, per backend.

"Fusion disabled" turns off the backend's fusion passes (``FUSION_PASSES``), the same list
the fusion comparison (``analysis.compile.fusion_off``) uses. ``parse_options`` reads
``KEY=VALUE`` text, as the CLI, the sidebar and links write it.
"""

from __future__ import annotations

from typing import Any

from analysis.devices import platform_of
from analysis.errors import ExplorerError

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
    # XLA:GPU, from a real pass dump of the gallery compiled by jax 0.10.2's XLA for an H200
    # target (deviceless, scripts/record_gpu_target.py; the dump file names carry the pass
    # names) and checked by disabling them: priority-fusion (the producer-consumer fusion),
    # multi_output_fusion (siblings and multi-output producers), copy_fusion (copies into their
    # producer's fusion), triton-gemm-rewriter (a dot and its neighbours into a Triton GEMM
    # fusion; disabled, the dot goes to cuBLAS) and triton-softmax-rewriter (normalizations into
    # one Triton kernel). Disabled together: transformer_block 14 -> 71 kernels, mlp 4 -> 10.
    # Older or newer spellings (horizontal-loop-fusion, fusion-merger, gemm-fusion) are listed
    # too; XLA ignores names it does not know. Kept on purpose: gemm-rewriter (needed to lower
    # dots at all; it also folds a bias/activation epilogue into the cuBLAS call), splitk-rewriter
    # (it splits a dot; it fuses nothing) and fusion-wrapper (wraps single ops; merges nothing).
    "gpu": ("priority-fusion", "multi_output_fusion", "copy_fusion", "triton-gemm-rewriter",
            "triton-softmax-rewriter", "horizontal-loop-fusion", "horizontal-input-fusion",
            "fusion-merger", "gemm-fusion"),
}


def fusion_disabled_options(platform: str) -> dict:
    passes = FUSION_PASSES["gpu" if platform_of(platform) == "gpu" else "cpu"]
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


def parse_options(pairs: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` strings -> compiler options (true/false/ints converted)."""
    out: dict[str, Any] = {}
    for p in pairs or []:
        if "=" not in p:
            raise ExplorerError("options", f"option {p!r} is not KEY=VALUE")
        k, v = p.split("=", 1)
        k, v = k.strip(), v.strip()
        if not k:
            raise ExplorerError("options", f"option {p!r} has no key")
        low = v.lower()
        if low in ("true", "false"):
            out[k] = low == "true"
        elif v.lstrip("-").isdigit():
            out[k] = int(v)
        else:
            out[k] = v
    return out
