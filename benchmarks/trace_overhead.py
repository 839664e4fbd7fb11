"""What the profiler costs a step: untraced calls against traced ones, side by side in one run.

    .venv/bin/python benchmarks/trace_overhead.py [MODEL ...]

For each model (default: rnn_scan, transformer_block and transformer_block with fusion off),
measured exactly as the product measures (``analysis.compile.measure``): the untraced call, the
traced call and the traced step (first kernel to last), medians, with the kernel events per
step. The extra time per event is (traced call - untraced call) / events: what makes the traced
step of a program with many small kernels longer than its untraced call (docs/numbers.md).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from analysis.compile.measure import measure  # noqa: E402
from analysis.compile.stages import analyze_model  # noqa: E402
from analysis.options import fusion_disabled_options  # noqa: E402


def main(argv: list[str]) -> None:
    runs = [(m, None) for m in argv] or [("rnn_scan", None), ("transformer_block", None),
                                           ("transformer_block", fusion_disabled_options("cpu"))]
    print(f"{'model':32s} {'events/step':>11s} {'call':>10s} {'traced call':>12s} {'step':>10s} "
          f"{'step/call':>9s} {'µs/event':>9s}")
    for model, opts in runs:
        c = measure(analyze_model(model, "cpu", opts))
        t = c.bundle.timings
        events = t["events_seen"] / max(1, t["steps_seen"])
        call, traced, step = t["call_median_s"], t["traced_call_median_s"], t["step_median_s"]
        per_event = (traced - call) / events * 1e6 if events else 0.0
        name = model + (" (fusion off)" if opts else "")
        print(f"{name:32s} {events:11.0f} {call * 1e6:8.0f}µs {traced * 1e6:10.0f}µs {step * 1e6:8.0f}µs "
              f"{step / call:9.2f} {per_event:9.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
