"""Compiler-option presets the UI and CLI offer, per backend.

Each preset changes one thing and is named by what it turns off: the backend's fusion passes
(``FUSION_PASSES``: XLA's own producer/consumer fusion), its library or Triton rewrites
(``REWRITE_PASSES``: which routine or code generator a dot and its neighbours go to), or both.
The fusion comparison (``analysis.compile.fusion_off``) turns off the fusion passes only, so
"fusion on vs off" is not mixed with the choice of matmul library. ``parse_options`` reads
``KEY=VALUE`` text, as the CLI, the sidebar and links write it.
"""

from __future__ import annotations

from typing import Any

from analysis.devices.catalog import platform_of
from analysis.errors import ExplorerError

# The passes whose output is "fusion", by backend: disabling them (``xla_disable_hlo_passes``,
# comma-separated; unknown names are silently ignored by XLA) gives the unfused program.
FUSION_PASSES = {
    # Found in jax 0.10.2's XLA:CPU by compiling the gallery with xla_dump_to +
    # xla_dump_hlo_pass_re=.* (the dump file names carry the pass names) and checked by
    # disabling each: "fusion" (CpuInstructionFusion: elementwise/loop fusion; disabled alone,
    # transformer_block goes from 26 to 67 kernels, its library calls unchanged). Kept on
    # purpose: "fusion-wrapper", which only wraps each single remaining op into a one-op kLoop
    # fusion so XLA's emitter still generates it (it merges nothing).
    "cpu": ("fusion",),
    # XLA:GPU, from a real pass dump of the gallery compiled by jax 0.10.2's XLA for an H200
    # target (deviceless, scripts/record_gpu_target.py; the dump file names carry the pass
    # names): priority-fusion (the producer-consumer fusion), multi_output_fusion (siblings and
    # multi-output producers), copy_fusion (copies into their producer's fusion). Older or newer
    # spellings (horizontal-loop-fusion, fusion-merger) are listed too; XLA ignores names it
    # does not know. Kept on purpose: gemm-rewriter (needed to lower dots at all; it also folds a
    # bias/activation epilogue into the cuBLAS call), splitk-rewriter (it splits a dot; it fuses
    # nothing) and fusion-wrapper (wraps single ops; merges nothing).
    "gpu": ("priority-fusion", "multi_output_fusion", "copy_fusion", "horizontal-loop-fusion",
            "horizontal-input-fusion", "fusion-merger"),
}

# The passes that hand a dot (and the ops around it) to a library or a code generator.
REWRITE_PASSES = {
    # "dot-library-rewriter" wraps dots and the ops around them into __ynn_fusion/oneDNN
    # library fusions; disabled, dots run unfused through Eigen.
    "cpu": ("dot-library-rewriter",),
    # triton-gemm-rewriter (a dot and its neighbours into a Triton GEMM fusion; disabled, the
    # dot goes to cuBLAS; gemm-fusion is its other spelling) and triton-softmax-rewriter
    # (normalizations into one Triton kernel).
    "gpu": ("triton-gemm-rewriter", "triton-softmax-rewriter", "gemm-fusion"),
}

# The GPU compiles recorded with both turned off (sample_models/recorded) used this order.
_BOTH_ORDER = {"gpu": ("priority-fusion", "multi_output_fusion", "copy_fusion", "triton-gemm-rewriter",
                       "triton-softmax-rewriter", "horizontal-loop-fusion", "horizontal-input-fusion",
                       "fusion-merger", "gemm-fusion")}

REWRITE_NAMES = {"cpu": "library rewrite", "gpu": "Triton rewrites"}


def _platform(platform: str) -> str:
    return "gpu" if platform_of(platform) == "gpu" else "cpu"


def disabled(passes) -> dict:
    return {"xla_disable_hlo_passes": ",".join(passes)}


def fusion_disabled_options(platform: str) -> dict:
    """The options of "fusion passes off" (what the fusion comparison compiles)."""
    return disabled(FUSION_PASSES[_platform(platform)])


def presets(platform: str) -> dict[str, dict]:
    """Preset name -> compiler options, for the platform a compile will run on."""
    p = _platform(platform)
    rewrite = REWRITE_NAMES[p]
    both = _BOTH_ORDER.get(p, FUSION_PASSES[p] + REWRITE_PASSES[p])
    out = {"Default": {}, "Fusion passes off": fusion_disabled_options(p),
           f"{rewrite[0].upper()}{rewrite[1:]} off": disabled(REWRITE_PASSES[p]),
           f"Fusion + {rewrite} off": disabled(both)}
    if p == "gpu":
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
