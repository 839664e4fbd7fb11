"""Time to first graph for a gallery model on the CPU, against a bare
``jax.jit(model).lower(*args).compile()``, measured side by side in one run.

Two comparisons, each as a ratio:
1. in-process: our pipeline (trace, lower, compile, analyze, build both graphs, lay them out
   with Graphviz) versus the bare compile, alternating, median of N;
2. through the worker (what the app does: a fresh worker process that imports JAX, compiles,
   analyzes; then the app lays out the graphs) versus a fresh Python process that imports JAX
   and does the bare compile.

    .venv/bin/python benchmarks/first_graph.py [MODEL] [N]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def bare_compile(loaded):
    import jax

    jax.jit(loaded.model).lower(*loaded.inputs).compile()


def ours(loaded):
    from analysis.render.graphviz_runner import render_svgs
    from analysis.render.module_graphs import post_graph, pre_graph
    from analysis.compile.stages import compile_model

    b = compile_model(loaded, "cpu").bundle
    # as the app does: both sides laid out by Graphviz at once
    render_svgs([pre_graph(b.module("hlo_before")).to_dot(), post_graph(b.module("hlo_after"), b.kernels).to_dot()])


def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else "transformer_block"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    from analysis.compile.load import load_gallery

    loaded = load_gallery(model)
    bare_compile(loaded)  # warm JAX itself (imports, backend) for both
    ours(loaded)
    t_bare, t_ours = [], []
    for _ in range(n):
        # a fresh copy of the model so JAX's own caches cannot serve either side
        fresh = load_gallery(model)
        t0 = time.perf_counter()
        bare_compile(fresh)
        t_bare.append(time.perf_counter() - t0)
        fresh = load_gallery(model)
        t0 = time.perf_counter()
        ours(fresh)
        t_ours.append(time.perf_counter() - t0)
    mb, mo = statistics.median(t_bare), statistics.median(t_ours)
    print(f"in-process  {model}: bare compile {mb * 1e3:.0f} ms, ours to first graph {mo * 1e3:.0f} ms, "
          f"ratio {mo / mb:.2f}x (median of {n})")

    # through a process, as the app does
    bare_cmd = [sys.executable, "-c",
                "import sys; sys.path.insert(0, %r)\n"
                "from analysis.compile.load import load_gallery\nimport jax\n"
                "m = load_gallery(%r)\njax.jit(m.model).lower(*m.inputs).compile()" % (ROOT, model)]
    w_bare, w_ours = [], []
    from analysis.render.graphviz_runner import render_svgs
    from analysis.render.module_graphs import post_graph, pre_graph
    from analysis.service.job import Job
    from analysis.service.worker import run_job

    for _ in range(max(2, n // 2)):
        t0 = time.perf_counter()
        subprocess.run(bare_cmd, check=True, cwd=ROOT)
        w_bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        b = run_job(Job(kind="gallery", name=model, backend="cpu")).bundle
        render_svgs([pre_graph(b.module("hlo_before")).to_dot(), post_graph(b.module("hlo_after"), b.kernels).to_dot()])
        w_ours.append(time.perf_counter() - t0)
    mb, mo = statistics.median(w_bare), statistics.median(w_ours)
    print(f"new process {model}: python+jax+bare compile {mb:.2f} s, worker+graphs {mo:.2f} s, "
          f"ratio {mo / mb:.2f}x (median of {len(w_bare)})")


if __name__ == "__main__":
    main()
