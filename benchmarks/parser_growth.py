"""How each parser of a dump's text grows with an adversarial input (not CI).

    .venv/bin/python benchmarks/parser_growth.py [--n 20000]

Each parser of a user's upload is fed, side by side in one run, an adversarial input of size n
and of size 8n (fusion steps left open, a buffer-assignment line of spaces, a value name of
"a{", an allocation of many values for the live curve: n log n); the report is the ratio of the two times. Linear parsing gives about 8; the patterns they
replaced gave about 64 (quadratic: 24,000 open fusion steps held the GIL for 58 s).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from analysis.errors import ExplorerError  # noqa: E402
from analysis.fusion.gpu_dump import parse_fusion_dump  # noqa: E402
from analysis.program.memory import live_curve, parse_buffer_assignment  # noqa: E402


def _many_values(n: int) -> dict:
    """One allocation of n values (value i: bytes 4i..4i+4, live from step i to the end)."""
    vals = [{"id": i, "name": f"v{i}", "kind": "temp", "allocation": 0, "offset": 4 * i, "size": 4,
             "start": i, "end": n - 1, "phi": False} for i in range(n)]
    return {"schedule": [f"s{t}" for t in range(n)], "values": vals}


CASES = {
    "fusion dump: open steps": (parse_fusion_dump, lambda n: "fusion_steps {\n" * n),
    "buffer assignment: spaces": (parse_buffer_assignment, lambda n: "allocation 0: size 1" + " " * n + "x:\n"),
    "buffer assignment: value name": (parse_buffer_assignment,
                                      lambda n: "allocation 0: size 1:\n value: <1 " + "a{" * n + "\n"),
    "memory: live curve (n/20 values)": (live_curve, lambda n: _many_values(n // 20)),
}


def seconds(fn, text: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        try:
            fn(text)
        except ExplorerError:
            pass
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    n = ap.parse_args().n
    print(f"{'parser':32} {'n':>10} {'8n':>10} {'ratio':>7}  (linear ~8, quadratic ~64)")
    for name, (fn, make) in CASES.items():
        small, big = seconds(fn, make(n)), seconds(fn, make(8 * n))
        print(f"{name:32} {small * 1e3:8.2f}ms {big * 1e3:8.2f}ms {big / max(small, 1e-9):7.1f}")


if __name__ == "__main__":
    main()
