"""Load test (not CI): N concurrent sessions submit mixed jobs through the queue.

    .venv/bin/python benchmarks/load_test.py [--sessions 20] [--jobs 3] [--store PATH]

Each session submits a mix of gallery jobs (often cached after the first), fresh pasted code
(always a miss), broken code (a clear error) and one measurement job in five. Reports p50/p95
latency per kind and checks that every job ended with a bundle or an ExplorerError.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from analysis.errors import ExplorerError  # noqa: E402
from analysis.service.queue import JobQueue, compile_job  # noqa: E402
from analysis.service.sandbox import sandbox_status  # noqa: E402
from analysis.service.settings import Limits  # noqa: E402
from analysis.service.store import Store  # noqa: E402
from analysis.service.job import Job  # noqa: E402

PASTED = """
import jax.numpy as jnp

def model(x):
    return jnp.tanh(x * {k}) + {k}

def example_inputs():
    return (jnp.ones((32, 32)),)
"""


def make_job(rng: random.Random, session: int, i: int) -> tuple[str, Job]:
    r = rng.random()
    if r < 0.35:
        return "gallery", Job(kind="gallery", name=rng.choice(["mlp", "softmax_layernorm"]), backend="cpu")
    if r < 0.70:
        return "pasted", Job(source=PASTED.format(k=session * 100 + i), name=f"s{session}_{i}")
    if r < 0.85:
        return "broken", Job(source="import jax\ndef model(x):\n    return x +\n", name="broken")
    return "measure", Job(kind="gallery", name="mlp", backend="cpu", measure=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=3, help="jobs per session")
    ap.add_argument("--store", default=None, help="store file (default: a fresh temporary one)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    print("sandbox:", sandbox_status())
    limits = Limits.from_env()
    store = Store(args.store or os.path.join(tempfile.mkdtemp(prefix="xla-load-"), "store.sqlite"))
    queue = JobQueue(limits, store)
    results: list[tuple[str, float, str]] = []  # (kind, seconds, outcome)
    lock = threading.Lock()

    def session(n: int):
        rng = random.Random(args.seed * 1000 + n)
        for i in range(args.jobs):
            kind, job = make_job(rng, n, i)
            t0 = time.monotonic()
            try:
                got = compile_job(job, session=f"session-{n}", queue=queue)
                outcome = "bundle-" + ("hit" if got.cached else "miss")
            except ExplorerError as e:
                outcome = f"error:{e.phase}"
            except Exception as e:  # noqa: BLE001 - the point is to find these
                outcome = f"CRASH:{type(e).__name__}:{e}"
            with lock:
                results.append((kind, time.monotonic() - t0, outcome))
            time.sleep(rng.random())

    t0 = time.monotonic()
    threads = [threading.Thread(target=session, args=(n,)) for n in range(args.sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    queue.shutdown()

    def pct(xs, p):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")

    print(f"{len(results)} jobs from {args.sessions} sessions in {wall:.1f} s (workers={limits.workers})")
    print(f"{'kind':10s} {'n':>4s} {'p50 s':>8s} {'p95 s':>8s}  outcomes")
    for kind in ("gallery", "pasted", "broken", "measure", "all"):
        rows = [r for r in results if kind == "all" or r[0] == kind]
        if not rows:
            continue
        lat = [r[1] for r in rows]
        outs: dict[str, int] = {}
        for r in rows:
            outs[r[2]] = outs.get(r[2], 0) + 1
        print(f"{kind:10s} {len(rows):4d} {pct(lat, 50):8.2f} {pct(lat, 95):8.2f}  {outs}")
    bad = [r for r in results if not (r[2].startswith("bundle") or r[2].startswith("error:"))]
    if len(results) != args.sessions * args.jobs or bad:
        print("FAIL: jobs without a bundle or a clear error:", bad)
        return 1
    print("ok: every job ended with a bundle or a clear error")
    return 0


if __name__ == "__main__":
    sys.exit(main())
