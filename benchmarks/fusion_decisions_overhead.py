"""What capturing XLA's fusion log costs a compile: ``transformer_block`` compiled with and without
the capture, alternating, side by side (a ratio; no absolute numbers are asserted anywhere).

    .venv/bin/python benchmarks/fusion_decisions_overhead.py [MODEL] [REPEATS]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    from analysis.compile.load import load_gallery
    from analysis.compile.stages import compile_model

    model = sys.argv[1] if len(sys.argv) > 1 else "transformer_block"
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    loaded = load_gallery(model)
    compile_model(loaded)  # warm up
    times: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(repeats):
        for mode in ("off", "on"):
            os.environ["XLA_EXPLORER_FUSION_DECISIONS"] = "1" if mode == "on" else "0"
            t0 = time.perf_counter()
            compile_model(loaded)
            times[mode].append(time.perf_counter() - t0)
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    print(f"{model}: compile_model median {off * 1e3:.0f} ms without the capture, {on * 1e3:.0f} ms with it: "
          f"x{on / off:.3f} ({(on / off - 1) * 100:+.1f} %), {repeats} runs each, alternating")


if __name__ == "__main__":
    main()
