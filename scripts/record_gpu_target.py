"""Record GPU-compiled bundles of the gallery on a machine without a GPU.

    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 python scripts/record_gpu_target.py [--target h200] [OUT_DIR]

Needs JAX's CUDA plugin (``pip install -e '.[cuda]'``, in this venv or another one), no GPU.
XLA's GPU compiler is given a description of the target (``analysis.devices.catalog``) instead of a
device, so what comes out is the real optimized GPU module for that device, chosen without
autotuning; nothing is run, so the bundles carry no timings (``environment["deviceless"]``).

OUT_DIR (default ``sample_models/recorded/<target>``) receives, for every gallery model,
``<model>.bundle.json`` with the fusion-off comparison (kernels and bytes) and, for a few
models, the pass-by-pass log; ``<model>.fusion-triton-rewrites-off.bundle.json`` and
``<model>.triton-gemm-off.bundle.json`` with those presets;
``tensor_parallel_2gpu.{before,after}.hlo``, an MLP split over two GPUs (an all-reduce); and ``passes.json``: every pass name in a full pass dump of
``transformer_block`` and the passes that changed it, with kernel counts, which is how
``analysis.options.FUSION_PASSES['gpu']`` was checked. The app shows these bundles when asked
for an H200 compile on a machine without the CUDA plugin; ``tests/scenarios/test_gpu_target.py`` tests them
(and fails when a gallery model changed since it was recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile

os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")  # before jax loads its plugins
# each kernel's ptxas report and SASS too, where ptxas and nvdisasm are installed (the gpu-tools
# extra): a recording is made once, so their cost does not matter here (analysis.compile.code_gpu)
os.environ.setdefault("XLA_EXPLORER_GPU_TOOLS", "1")
# The gallery's sharded models build their mesh of host devices as they load (DEVICES = N): this
# process gets the most a job may have, before JAX starts; each is compiled for N of the target's.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


# Presets recorded besides the default ("Autotuning off" is what a compile without the device is
# anyway): with them the Compare page shows, e.g., Triton GEMMs next to cuBLAS calls.
OTHER_PRESETS = ("Fusion + Triton rewrites off", "Triton GEMM off")

# Gallery models recorded with their pass-by-pass log (for the Pass pipeline page)
PASS_LOGGED = ("mlp", "softmax", "transformer_block", "conv_bn_relu")


def pass_names(target: str, model: str) -> dict:
    """Compile ``model`` with a full pass dump; the pass names from the dump's file names."""
    import jax
    from jax.sharding import SingleDeviceSharding

    from analysis.compile.backend import gpu_target_device
    from analysis.compile.load import load_gallery
    from analysis.studies.passes import pass_log_from_dir

    loaded = load_gallery(model)
    on = SingleDeviceSharding(gpu_target_device(target))
    args = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on), loaded.inputs)
    with tempfile.TemporaryDirectory() as d:
        jax.jit(loaded.model).lower(*args).compile(compiler_options={"xla_dump_to": d, "xla_dump_hlo_pass_re": ".*"})
        names = sorted({m.group(1) for f in os.listdir(d)
                        for m in re.finditer(r"\.(?:after|before)_([A-Za-z0-9_\-]+)", f)})
        log = pass_log_from_dir(d)
    return {"model": model, "all_passes_in_dump": names,
            "changed": [{k: e.get(k) for k in ("pass", "pipeline", "kernels", "instructions")} for e in log]}


def tensor_parallel(target: str, out: str) -> None:
    """A two-layer MLP split over two GPUs of the target (Megatron style: the first weight by
    columns, the second by rows), so the second matmul's partial sums meet in an all-reduce:
    XLA:GPU's collectives, as HLO texts before and after optimization (a test fixture; the
    gallery runs on one device)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import topologies
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from analysis.devices.catalog import target_config

    topo = topologies.get_topology_desc(platform="cuda", target_config=target_config(target), topology="1x1x2")
    mesh = topologies.make_mesh(topo, (2,), ("x",))

    def mlp(x, w1, w2):
        return jax.nn.relu(x @ w1) @ w2

    def arg(shape, spec):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    lowered = jax.jit(mlp, out_shardings=NamedSharding(mesh, P())).lower(
        arg((128, 256), P()), arg((256, 512), P(None, "x")), arg((512, 256), P("x", None)))
    with open(os.path.join(out, "tensor_parallel_2gpu.before.hlo"), "w") as f:
        f.write(lowered.as_text(dialect="hlo", debug_info=True))
    with open(os.path.join(out, "tensor_parallel_2gpu.after.hlo"), "w") as f:
        f.write(lowered.compile().as_text())


def main(argv=None) -> int:
    from analysis.devices.catalog import GPU_TARGETS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", help="default: sample_models/recorded/<target>")
    ap.add_argument("--target", default="h200", choices=sorted(GPU_TARGETS))
    ap.add_argument("--models", help="comma-separated gallery names (default: all, and the fixtures besides them)")
    a = ap.parse_args(argv)
    a.out = a.out or os.path.join(ROOT, "sample_models", "recorded", a.target)

    from analysis.errors import ExplorerError
    from analysis.options import presets
    from analysis.service.job import Job
    from analysis.service.worker_main import execute
    from sample_models import gallery

    os.makedirs(a.out, exist_ok=True)
    names = a.models.split(",") if a.models else list(gallery())
    failed = []
    for name in names:
        try:
            b = execute(Job(kind="gallery", name=name, gpu_target=a.target, compare_fusion=True,
                            dump_passes=(name in PASS_LOGGED)))
        except ExplorerError as e:
            failed.append(name)
            print(f"{name}: {e.one_line()}", file=sys.stderr)
            continue
        path = os.path.join(a.out, f"{name}.bundle.json")
        b.save(path)
        fc = b.fusion_comparison or {}
        print(f"{name:20s} {len(b.kernels):3d} kernels (fusion off: {fc.get('unfused', {}).get('kernels')})  -> {path}")
        for preset in OTHER_PRESETS:  # so the app can compare presets on the target, too
            v = execute(Job(kind="gallery", name=name, gpu_target=a.target, compiler_options=presets("gpu")[preset]))
            from sample_models import preset_slug

            slug = preset_slug(preset)
            v.save(os.path.join(a.out, f"{name}.{slug}.bundle.json"))
            print(f"{'':20s} {len(v.kernels):3d} kernels with {preset}")
    if a.models:  # only those models' bundles
        return 1 if failed else 0
    tensor_parallel(a.target, a.out)
    with open(os.path.join(a.out, "passes.json"), "w") as f:
        json.dump({"target": a.target, **pass_names(a.target, "transformer_block")}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
