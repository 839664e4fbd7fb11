"""What reading the generated code costs the first graph: a gallery model (and an N-layer
transformer stack) compiled with and without reading each kernel's LLVM IR and machine code
(``XLA_EXPLORER_CODE``), side by side, alternating, in one run; a ratio, no absolute number is
asserted anywhere. XLA writes the files into the compile's dump folder either way (the folder the
HLO texts are read from): what is measured is reading them (IR, disassembly, links), the bundle's
JSON carrying them both ways (the worker's answer and the parent's check), and the graphs.

    .venv/bin/python benchmarks/code_cost.py [--models softmax_layernorm,transformer_block] [--stack 12] [--trials 7]

The issue's goal: at most 10% slower (docs/performance.md, "The generated code").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def first_graph(loaded) -> tuple[float, int]:
    """Seconds from compile to both graphs laid out, as the app's path does it, and the bundle's
    JSON size: the worker's compile, its bundle as JSON, read back (checked) by the parent, the graphs."""
    from analysis.bundle.core import Bundle
    from analysis.compile.stages import compile_model
    from analysis.render.graphviz_runner import render_svgs
    from analysis.render.module_graphs import post_graph, pre_graph

    t0 = time.perf_counter()
    b = compile_model(loaded, "cpu").bundle
    text = b.to_json()
    b = Bundle.from_json(text)
    render_svgs([pre_graph(b.module("hlo_before")).to_dot(), post_graph(b.module("hlo_after"), b.kernels).to_dot()])
    return time.perf_counter() - t0, len(text)


def added_work(loaded) -> tuple[float, float]:
    """(seconds of reading the code, seconds the code adds to the bundle's JSON both ways),
    measured on one compile: the work the code adds, apart from the machine's noise."""
    from analysis.bundle.core import Bundle
    from analysis.compile import code_dump, stages

    spent = []
    read = code_dump.read_code

    def timed(d, b):
        t0 = time.perf_counter()
        out = read(d, b)
        spent.append(time.perf_counter() - t0)
        return out

    stages.read_code = timed
    try:
        b = stages.compile_model(loaded, "cpu").bundle
    finally:
        stages.read_code = read
    def json_s() -> float:  # the bundle's JSON both ways, the least of five (the machine's noise is one-sided)
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            Bundle.from_json(b.to_json())
            best = min(best, time.perf_counter() - t0)
        return best

    with_code = json_s()
    b.code = None
    return spent[0], with_code - json_s()


def loaded_model(name: str):
    from analysis.compile.load import load_gallery, load_source

    if name.startswith("stack"):
        from sample_models._stack import stack_source

        n = int(name[len("stack"):])
        return lambda: load_source(stack_source(n), f"<stack{n}>", f"stack{n}")
    return lambda: load_gallery(name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="softmax_layernorm,transformer_block")
    ap.add_argument("--stack", type=int, default=12, help="also an N-layer transformer stack (0: none)")
    ap.add_argument("--trials", type=int, default=7)
    a = ap.parse_args()
    names = [m for m in a.models.split(",") if m] + ([f"stack{a.stack}"] if a.stack else [])
    for name in names:
        make = loaded_model(name)
        for mode in ("1", "0"):  # warm both paths (imports, JAX's backend, Graphviz)
            os.environ["XLA_EXPLORER_CODE"] = mode
            first_graph(make())
        times: dict[str, list[float]] = {"1": [], "0": []}
        sizes: dict[str, int] = {}
        for t in range(a.trials):
            for mode in (("0", "1") if t % 2 else ("1", "0")):  # the order flips per trial
                os.environ["XLA_EXPLORER_CODE"] = mode
                s, size = first_graph(make())
                times[mode].append(s)
                sizes[mode] = size
        off, on = statistics.median(times["0"]), statistics.median(times["1"])
        os.environ["XLA_EXPLORER_CODE"] = "1"
        work = [added_work(make()) for _ in range(3)]
        read, js = min(w[0] for w in work), min(w[1] for w in work)
        print(f"{name}: first graph median {off * 1e3:.0f} ms without the code, {on * 1e3:.0f} ms with it: "
              f"x{on / off:.3f} ({(on / off - 1) * 100:+.1f} %); the work it adds, measured apart (least of 3): reading "
              f"{read * 1e3:.0f} ms + JSON {js * 1e3:.0f} ms = {(read + js) / off:.1%} of the first graph; bundle "
              f"JSON {sizes['0'] / 1e6:.2f} MB -> {sizes['1'] / 1e6:.2f} MB; {a.trials} trials each, alternating",
              flush=True)


if __name__ == "__main__":
    main()
