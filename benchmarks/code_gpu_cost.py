"""What reading a GPU compile's code costs beside the compile itself (issue #36: the code must not
slow the first graph by more than 10%).

    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 python benchmarks/code_gpu_cost.py [--target h200] [--models a,b] [--runs N]

Needs JAX's CUDA plugin (no GPU: the program is compiled for a described target). For each model,
N times in turn: the compile with its dump (as the worker makes it, Triton IR included), then
``code_gpu.gpu_code`` on that dump without tools, with ptxas only, and with ptxas and nvdisasm.
Prints the medians and each reading's time as a share of the compile's, measured side by side in
one run (docs/code.md quotes them, "On the GPU").
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="h200")
    ap.add_argument("--models", default="softmax_layernorm,transformer_block,train_step")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args(argv)

    import jax
    from jax.sharding import SingleDeviceSharding

    from analysis.bundle.core import Bundle, analyze
    from analysis.compile.backend import gpu_target_device
    from analysis.compile.code_gpu import find_tools, gpu_code
    from analysis.compile.xla_release import DUMP_OPTIONS
    from analysis.compile.load import load_gallery

    tools = find_tools()
    variants = {"no tools": {}, "ptxas": {k: v for k, v in tools.items() if k == "ptxas"}, "ptxas + nvdisasm": tools}
    on = SingleDeviceSharding(gpu_target_device(a.target))
    print(f"tools: {tools or 'none'}; {os.cpu_count()} cores")
    for name in a.models.split(","):
        loaded = load_gallery(name)
        args = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on), loaded.inputs)
        times: dict[str, list[float]] = {"compile": [], **{v: [] for v in variants}}
        kernels = 0
        for _ in range(a.runs):
            d = tempfile.mkdtemp(prefix="code-cost-")
            try:
                jax.clear_caches()
                t0 = time.perf_counter()
                compiled = jax.jit(loaded.model).lower(*args).compile(compiler_options={"xla_dump_to": d, **DUMP_OPTIONS})
                times["compile"].append(time.perf_counter() - t0)
                b = analyze(Bundle(stages={"hlo_after": compiled.as_text()}, environment={"platform": "gpu"}))
                names = sorted(os.listdir(d))

                def read(n, limit, d=d):
                    with open(os.path.join(d, n), "rb") as f:
                        return f.read(limit)

                for v, t in variants.items():
                    t0 = time.perf_counter()
                    code = gpu_code(names, read, b, tools=t)
                    times[v].append(time.perf_counter() - t0)
                    kernels = len(code["kernels"]) if code else 0
            finally:
                shutil.rmtree(d, ignore_errors=True)
        c = statistics.median(times["compile"])
        row = "  ".join(f"{v} {statistics.median(times[v]):.2f} s ({statistics.median(times[v]) / c:.0%})" for v in variants)
        print(f"{name:20s} {kernels:3d} kernels  compile {c:.2f} s  {row}  (medians of {a.runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
