"""Fair queue (not CI): a measuring job beside compile jobs of other sessions, both policies.

    .venv/bin/python benchmarks/fair_queue.py [--compiles 4] [--model transformer_block]

For each ``measure_mode`` (``alone``: a measuring job has the machine to itself, compile jobs
wait for it; ``beside``: compile jobs keep running next to it) one session submits a measuring
job and, once it runs, other sessions submit compile jobs. Reported side by side, in one run:
how long the compile jobs took (submit to bundle), and the measured step time against the same
measurement with nothing beside it (how much the compile jobs disturbed the timings).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from analysis.service.job import Job  # noqa: E402
from analysis.service.job_queue import JobQueue  # noqa: E402
from analysis.service.sandbox import sandbox_status  # noqa: E402
from analysis.service.settings import Limits  # noqa: E402

PASTED = """
import jax.numpy as jnp

def model(x):
    return jnp.tanh(x @ x.T * {k}) + {k}

def example_inputs():
    return (jnp.ones((256, 256)),)
"""


def run(mode: str, model: str, compiles: int, beside: bool = True) -> dict:
    q = JobQueue(Limits.from_env().__class__(**{**Limits.from_env().__dict__, "measure_mode": mode}), store=None)
    m = q.submit(Job(kind="gallery", name=model, backend="cpu", measure=True), session="measurer")
    while m.status != "running":
        time.sleep(0.05)
    lat = []
    if beside:
        time.sleep(1.0)  # the measuring worker is past its start
        hs = [(time.monotonic(), q.submit(Job(source=PASTED.format(k=i + 1), name=f"c{i}"), session=f"s{i}"))
              for i in range(compiles)]
        for t0, h in hs:
            h.wait()
            lat.append(h.finished - t0)
            h.result(0)
    ran = m.result(600)
    t = ran.bundle.timings or {}
    q.shutdown()
    return {"compile_s": lat, "measure_s": m.finished - m.started, "step_s": t.get("call_median_s"),
            "beside": t.get("jobs_beside")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compiles", type=int, default=4)
    ap.add_argument("--model", default="transformer_block")
    args = ap.parse_args()
    print("sandbox:", sandbox_status()[1])
    print(f"cores: {os.cpu_count()}, workers: {Limits.from_env().workers}")
    base = run("alone", args.model, 0, beside=False)
    print(f"measure with nothing beside it: step {base['step_s'] * 1e3:.2f} ms, job {base['measure_s']:.1f} s")
    for mode in ("alone", "beside"):
        r = run(mode, args.model, args.compiles)
        lat = r["compile_s"]
        print(f"{mode:7s}: compile jobs p50 {statistics.median(lat):.1f} s, max {max(lat):.1f} s; "
              f"measured step {r['step_s'] * 1e3:.2f} ms ({r['step_s'] / base['step_s']:.2f}x of alone), "
              f"{r['beside']} other jobs beside it; measuring job {r['measure_s']:.1f} s")
    return 0


if __name__ == "__main__":
    threading.stack_size(0)
    sys.exit(main())
