"""GPU target descriptions for compiling without a GPU ("deviceless" / ahead-of-time).

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
extra installs. Pure data: importing this module imports nothing else.
"""

from __future__ import annotations

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

# name -> (device kind as the device reports it, target config text)
GPU_TARGETS: dict[str, tuple[str, str]] = {
    "h100": ("NVIDIA H100 80GB HBM3",
             _SM90.format(bandwidth=3_352_320_000_000, memory=85_520_809_984, name="NVIDIA H100 80GB HBM3")),
    "h200": ("NVIDIA H200",
             _SM90.format(bandwidth=4_800_000_000_000, memory=150_754_820_096, name="NVIDIA H200")),
}


def target_config(name: str) -> str:
    from analysis.errors import ExplorerError

    key = (name or "").lower()
    if key not in GPU_TARGETS:
        raise ExplorerError("options", f"unknown GPU target {name!r} (have: {', '.join(GPU_TARGETS)})")
    return GPU_TARGETS[key][1]
