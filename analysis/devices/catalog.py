"""Devices: what the product knows about them without asking JAX. Pure data.

- ``platform_of``: JAX's platform names (``cuda``, ``rocm``, ...) as the product's (``gpu``);
- ``GPU_PEAKS`` / ``table_peaks``: data-sheet peaks of NVIDIA GPUs, the roofs of the roofline;
- ``TPU_PEAKS`` / ``tpu_table_peaks``: the same for the TPU generations whose data sheet gives them
  per device;
- ``GPU_TARGETS`` / ``target_config``: GPU descriptions for compiling without a GPU.

GPU target descriptions for compiling without a GPU ("deviceless" / ahead-of-time).

XLA's GPU compiler can run on a machine with no GPU when it is handed a ``GpuTargetConfig``
(text protobuf) describing the device instead of querying one; JAX exposes this through
``jax.experimental.topologies.get_topology_desc(platform="cuda", target_config=...)``. It needs
the CUDA plugin installed (the ``cuda`` extra) but no driver and no device.

What such a compile gives is the real optimized GPU module (fusions, cuBLAS calls, Triton
fusions, layouts) for that device, chosen *without* autotuning, so library and tile choices can
differ from a compile on the device itself, and nothing can be run or timed. Bundles made this
way say so in ``environment["deviceless"]``.

The figures are the data-sheet values of each part (SM count, clock, memory size and bandwidth,
L2, shared memory per SM and per block); the CUDA and cuDNN versions are those the ``cuda``
extra installs. Pure data: importing this module imports nothing but ``analysis.errors``.
"""

from __future__ import annotations

from analysis.errors import ExplorerError

GPU_PLATFORMS = ("gpu", "cuda", "rocm")


def platform_of(name: str | None) -> str:
    """``cuda``/``rocm``/``gpu`` -> ``gpu``; other platform names as they are."""
    return "gpu" if name in GPU_PLATFORMS else (name or "unknown")


# Dense (no sparsity) peaks from NVIDIA's data sheets; memory in bytes/s, compute in FLOP/s.
# Matched against jax's ``device_kind`` by substring, first match wins (so more specific first).
_T = 1e12
GPU_PEAKS: tuple[tuple[str, dict], ...] = (
    # NVIDIA GH200 data sheet (96 GB HBM3 variant; the 144 GB HBM3e one has 4.9 TB/s).
    ("GH200", {"memory": 4.0e12, "fp32": 67 * _T, "tf32": 494.7 * _T, "bf16": 989.4 * _T}),
    # NVIDIA H200 data sheet (SXM): 4.8 TB/s; tensor numbers there are with sparsity, halved here.
    ("H200", {"memory": 4.8e12, "fp32": 67 * _T, "tf32": 494.7 * _T, "bf16": 989.4 * _T}),
    # NVIDIA H100 data sheet: PCIe 2.0 TB/s, NVL 3.9 TB/s, SXM5 3.35 TB/s.
    ("H100 PCIe", {"memory": 2.0e12, "fp32": 51 * _T, "tf32": 378 * _T, "bf16": 756 * _T}),
    ("H100 NVL", {"memory": 3.9e12, "fp32": 60 * _T, "tf32": 417.5 * _T, "bf16": 835.5 * _T}),
    ("H100", {"memory": 3.35e12, "fp32": 67 * _T, "tf32": 494.7 * _T, "bf16": 989.4 * _T}),
    # NVIDIA B200 (DGX B200 data sheet divided by 8; approximate).
    ("B200", {"memory": 8.0e12, "fp32": 75 * _T, "tf32": 1100 * _T, "bf16": 2250 * _T}),
    # NVIDIA A100 data sheet: 40 GB 1.555 TB/s, 80 GB PCIe 1.935 TB/s, 80 GB SXM 2.039 TB/s.
    ("A100-SXM4-40GB", {"memory": 1.555e12, "fp32": 19.5 * _T, "tf32": 156 * _T, "bf16": 312 * _T}),
    ("A100-PCIE-40GB", {"memory": 1.555e12, "fp32": 19.5 * _T, "tf32": 156 * _T, "bf16": 312 * _T}),
    ("A100 80GB PCIe", {"memory": 1.935e12, "fp32": 19.5 * _T, "tf32": 156 * _T, "bf16": 312 * _T}),
    ("A100", {"memory": 2.039e12, "fp32": 19.5 * _T, "tf32": 156 * _T, "bf16": 312 * _T}),
    # NVIDIA L40S / L40 / L4 data sheets.
    ("L40S", {"memory": 864e9, "fp32": 91.6 * _T, "tf32": 183 * _T, "bf16": 362 * _T}),
    ("L40", {"memory": 864e9, "fp32": 90.5 * _T, "tf32": 90.5 * _T, "bf16": 181 * _T}),
    ("L4", {"memory": 300e9, "fp32": 30.3 * _T, "tf32": 60 * _T, "bf16": 121 * _T}),
    # NVIDIA A10 / A10G data sheets (A10G: AWS's variant, same memory system).
    ("A10", {"memory": 600e9, "fp32": 31.2 * _T, "tf32": 62.5 * _T, "bf16": 125 * _T}),
    # NVIDIA V100 (SXM2) and T4 data sheets: no TF32/BF16; FP16 tensor cores.
    ("V100", {"memory": 900e9, "fp32": 15.7 * _T, "fp16": 125 * _T}),
    ("T4", {"memory": 320e9, "fp32": 8.1 * _T, "fp16": 65 * _T}),
    # NVIDIA GeForce RTX 4090 (Ada whitepaper, FP16 tensor with FP32 accumulate).
    ("RTX 4090", {"memory": 1008e9, "fp32": 82.6 * _T, "tf32": 82.6 * _T, "bf16": 165.2 * _T}),
)


def table_peaks(device_kind: str) -> dict | None:
    """Peaks of a known GPU, as the ``peaks`` schema (see docs/bundle.md), or None."""
    for pattern, p in GPU_PEAKS:
        if pattern.lower() in (device_kind or "").lower():
            return {"source": "table", "device_kind": device_kind, "matched": pattern,
                    "memory_bytes_per_s": p["memory"],
                    "flops_per_s": {k: v for k, v in p.items() if k != "memory"},
                    "note": "NVIDIA data-sheet peaks (dense, no sparsity)"}
    return None



# Cloud TPU data sheets (Google Cloud's "TPU v5e" and "TPU v6e" system-architecture pages), per
# chip; memory in bytes/s, compute in FLOP/s. Only generations with one TensorCore per chip are
# here, so that a trace's device plane (``/device:TPU:N``) is one chip whether the plane is a chip
# or a core: v2, v3, v4 and v5p chips hold two TensorCores, and which of the two a plane is was
# never seen in a trace. The data sheets give bf16 (and int8) matrix peaks only.
# Matched against the trace's device name (``device_type_string``), lowercased, by any of the
# spellings (JAX's device kinds are "TPU v5 lite" and "TPU v6 lite").
TPU_PEAKS: tuple[tuple[str, tuple[str, ...], dict], ...] = (
    # TPU v6e (Trillium): "Peak compute per chip (bf16) 918 TFLOPs", "HBM bandwidth per chip 1638 GBps".
    ("TPU v6e", ("v6 lite", "v6e", "trillium"), {"memory": 1638e9, "bf16": 918 * _T}),
    # TPU v5e: "Peak compute per chip (bf16) 197 TFLOPs", "HBM2 capacity and bandwidth 16 GB, 819 GBps"
    # (a later revision of the page writes "800 GiBps", 859 GB/s; the lower figure is kept).
    ("TPU v5e", ("v5 lite", "v5e", "v5litepod"), {"memory": 819e9, "bf16": 197 * _T}),
)


def tpu_table_peaks(device_kind: str) -> dict | None:
    """Peaks of a known TPU generation, as the ``peaks`` schema (see docs/bundle.md), or None."""
    kind = (device_kind or "").lower()
    for matched, spellings, p in TPU_PEAKS:
        if any(s in kind for s in spellings):
            return {"source": "table", "device_kind": device_kind, "matched": matched,
                    "memory_bytes_per_s": p["memory"],
                    "flops_per_s": {k: v for k, v in p.items() if k != "memory"},
                    "note": "Cloud TPU data-sheet peaks per chip (bf16 matrix units)"}
    return None


_SM90 = """gpu_device_info {{
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: {bandwidth}
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: {memory}
  shared_memory_per_block_optin: 232448
  cuda_compute_capability {{
    major: 9
  }}
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}}
platform_name: "CUDA"
dnn_version_info {{
  major: 9
  minor: 8
}}
runtime_version {{
  major: 12
  minor: 8
}}
device_description_str: "{name}"
"""



def _sm90(kind: str, memory: int) -> tuple[str, str]:
    """(device kind, target config) of a Hopper part; its memory bandwidth is the peak table's."""
    bandwidth = int(table_peaks(kind)["memory_bytes_per_s"])
    return kind, _SM90.format(bandwidth=bandwidth, memory=memory, name=kind)


# name -> (device kind as the device reports it, target config text)
GPU_TARGETS: dict[str, tuple[str, str]] = {
    "h100": _sm90("NVIDIA H100 80GB HBM3", 85_520_809_984),
    "h200": _sm90("NVIDIA H200", 150_754_820_096),
}


def target_config(name: str) -> str:
    key = (name or "").lower()
    if key not in GPU_TARGETS:
        raise ExplorerError("options", f"unknown GPU target {name!r} (have: {', '.join(GPU_TARGETS)})")
    return GPU_TARGETS[key][1]


# ----------------------------------------------------------------------------- many devices

# How many devices a job may ask for: on the CPU they are XLA's host devices
# (``--xla_force_host_platform_device_count``), all in the one worker process; for a GPU target,
# the target's devices in one node (an H200 node has eight).
MAX_DEVICES = 8


def check_devices(n, where: str = "devices") -> int:
    """``n`` as a device count in 1..MAX_DEVICES, else an ExplorerError naming the limit."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise ExplorerError("options", f"{where} must be a whole number from 1 to {MAX_DEVICES}, not {n!r}")
    if not 1 <= n <= MAX_DEVICES:
        raise ExplorerError("options", f"{where} = {n}: a job has 1 to {MAX_DEVICES} devices "
                                       f"(this machine allows at most {MAX_DEVICES})")
    return n


def devices_in_source(source: str, filename: str = "<model>") -> int | None:
    """The ``DEVICES = N`` a model file sets at module level (its default device count), read
    from its text without running it; None where it sets none (or the text does not parse:
    running it says where). A value that is not a whole number in range is an ExplorerError at
    its line."""
    import ast

    try:
        tree = ast.parse(source or "")
    except (SyntaxError, ValueError):
        return None
    found = None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == "DEVICES" for t in targets):
            value = node.value
            n = value.value if isinstance(value, ast.Constant) else None
            try:
                found = check_devices(n, "DEVICES")
            except ExplorerError as e:
                raise ExplorerError("load", e.message + " (written as a number, e.g. DEVICES = 8)",
                                    filename, node.lineno) from None
    return found
