"""Load test (not CI): N concurrent sessions submit mixed jobs through the queue.

    .venv/bin/python benchmarks/load_test.py [--sessions 20] [--jobs 3] [--store PATH] [--hostile 4]
    .venv/bin/python benchmarks/load_test.py --engine ray [--sessions 50 --jobs 4]

Each session submits a mix of gallery jobs (often cached after the first), fresh pasted code
(always a miss), broken code (a clear error) and one measurement job in five. Reports p50/p95
latency per kind and checks that every job ended with a bundle or an ExplorerError.

With ``--hostile N`` it runs the same normal mix twice, alone and then beside N hostile sessions
(a memory bomb of forked children, a stdout flood, a /tmp filler, a measuring job that never
ends, a decisions bomb sent early, flooding tabs: one client's fresh cookie jars each holding a
measuring job, and a dump ReDoS: an uploaded zip of open fusion steps parsed by the server), and prints the normal jobs' p95 both ways: the class keeps being served while some
students attack the machine.

With ``--engine ray`` it runs the same mix on the local queue and on a local two-node Ray
cluster (``ray.cluster_utils.Cluster``, one CPU per node: this machine's two cores), one after
the other in one run, and prints the p50/p95 of each and Ray's per-job overhead as a ratio.
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
from analysis.service.job_queue import JobQueue, compile_job  # noqa: E402
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


HOSTILE = {
    "memory bomb": """
import os
for _ in range(3):
    if os.fork() == 0:
        x = bytearray(1500 * 2**20)
        for i in range(0, len(x), 4096):
            x[i] = 1
        os._exit(0)
b = bytearray(1500 * 2**20)
for i in range(0, len(b), 4096):
    b[i] = 1
""",
    "flood": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
    "tmp filler": "open('/tmp/fill', 'wb').write(b'0' * (4 * 2**30))\n",
    "endless measure": "import jax.numpy as jnp\ndef model(x):\n    while True:\n        pass\n"
                       "def example_inputs():\n    return (jnp.ones(4),)\n",
}


# pasted code that sends the parent fusion decisions claiming 10^9 records (an early message)
HOSTILE["decisions bomb"] = """
import gc, io, json
for _o in gc.get_objects():
    if isinstance(_o, io.TextIOWrapper) and not _o.closed and _o.writable() and _o.fileno() > 2:
        _o.write(json.dumps({"decisions": {"records": {"count": 10**9, "columns": {}}, "edges": []}}) + "\\n")
        _o.flush()
""" + PASTED.format(k=7)
# a tab of a fresh cookie jar (one client, a new session each job) holding a measuring job
HOSTILE["flooding tab"] = "import time\ndef model(x):\n    return x\ndef example_inputs():\n    time.sleep(25)\n" \
                          "    import jax.numpy as jnp\n    return (jnp.ones(4),)\n"
# an uploaded dump zip of fusion steps left open: parsed in the server's own process
DUMP_REDOS = "dump ReDoS"


def _redos_zip() -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("module_0001.m.before_optimizations.txt",
                    "HloModule m\n\nENTRY %e (p: f32[4]) -> f32[4] {\n  ROOT %p = f32[4]{0} parameter(0)\n}\n")
        zf.writestr("module_0001.m.priority_fusion_dump.txt", "fusion_steps {\n" * 24_000)
    return buf.getvalue()


def hostile_job(rng: random.Random, session: int, i: int) -> tuple[str, Job | None]:
    kind = rng.choice(sorted(HOSTILE) + [DUMP_REDOS])
    if kind == DUMP_REDOS:
        return "hostile", None
    return "hostile", Job(source=HOSTILE[kind], name=f"h{session}_{i}",
                          measure=kind in ("endless measure", "flooding tab"))


def make_job(rng: random.Random, session: int, i: int) -> tuple[str, Job]:
    r = rng.random()
    if r < 0.35:
        return "gallery", Job(kind="gallery", name=rng.choice(["mlp", "softmax_layernorm"]), backend="cpu")
    if r < 0.70:
        return "pasted", Job(source=PASTED.format(k=session * 100 + i), name=f"s{session}_{i}")
    if r < 0.85:
        return "broken", Job(source="import jax\ndef model(x):\n    return x +\n", name="broken")
    return "measure", Job(kind="gallery", name="mlp", backend="cpu", measure=True)


def run_mix(args, limits, hostile: int, runner=None) -> tuple[list, float]:
    store = Store(args.store or os.path.join(tempfile.mkdtemp(prefix="xla-load-"), "store.sqlite"))
    queue = JobQueue(limits, store) if runner is None else \
        JobQueue(limits, store, runner=runner, workers=limits.workers, measure_slots=limits.workers, engine="ray")
    results: list[tuple[str, float, str]] = []  # (kind, seconds, outcome)
    lock = threading.Lock()

    def session(n: int, bad: bool):
        rng = random.Random(args.seed * 1000 + n)
        for i in range(args.jobs):
            kind, job = (hostile_job if bad else make_job)(rng, n, i)
            # a student's session is its own client; every hostile job comes from one client
            # (one address and browser) in a fresh cookie jar: a new session each time
            sid = f"c-hostile/b-{n}-{i}" if bad else f"c-s{n}/b-s{n}"
            t0 = time.monotonic()
            try:
                if job is None:  # the dump ReDoS: an upload the server parses itself
                    from analysis.inputs.dump import bundles_from_dump_zip

                    bundles_from_dump_zip(_redos_zip(), "redos.zip")
                    outcome = "bundle-upload"
                else:
                    got = compile_job(job, session=sid, queue=queue)
                    outcome = "bundle-" + ("hit" if got.cached else "miss")
            except ExplorerError as e:
                outcome = f"error:{e.phase}"
            except Exception as e:  # noqa: BLE001 - the point is to find these
                outcome = f"CRASH:{type(e).__name__}:{e}"
            with lock:
                results.append((kind, time.monotonic() - t0, outcome))
            time.sleep(rng.random())

    t0 = time.monotonic()
    threads = [threading.Thread(target=session, args=(n, False)) for n in range(args.sessions)]
    threads += [threading.Thread(target=session, args=(1000 + n, True)) for n in range(hostile)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    queue.shutdown()
    return results, wall


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def report(results, wall, args, limits, label: str) -> list:
    print(f"{label}: {len(results)} jobs in {wall:.1f} s (workers={limits.workers})")
    print(f"{'kind':10s} {'n':>4s} {'p50 s':>8s} {'p95 s':>8s}  outcomes")
    for kind in ("gallery", "pasted", "broken", "measure", "hostile", "all"):
        rows = [r for r in results if kind == "all" or r[0] == kind]
        if not rows:
            continue
        lat = [r[1] for r in rows]
        outs: dict[str, int] = {}
        for r in rows:
            outs[r[2]] = outs.get(r[2], 0) + 1
        print(f"{kind:10s} {len(rows):4d} {pct(lat, 50):8.2f} {pct(lat, 95):8.2f}  {outs}")
    return [r for r in results if not (r[2].startswith("bundle") or r[2].startswith("error:"))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=3, help="jobs per session")
    ap.add_argument("--store", default=None, help="store file (default: a fresh temporary one)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hostile", type=int, default=0, help="also run the mix beside this many hostile sessions")
    ap.add_argument("--engine", choices=["local", "ray"], default="local",
                    help="ray: the mix on the local queue and on a local 2-node Ray cluster, side by side")
    args = ap.parse_args()
    if args.engine == "ray":
        return ray_vs_local(args)

    print("sandbox:", sandbox_status())
    limits = Limits.from_env()
    results, wall = run_mix(args, limits, 0)
    bad = report(results, wall, args, limits, "normal mix")
    normal = [r[1] for r in results if r[0] != "hostile"]
    if args.hostile:
        h_results, h_wall = run_mix(args, limits, args.hostile)
        bad += report(h_results, h_wall, args, limits, f"normal mix beside {args.hostile} hostile sessions")
        beside = [r[1] for r in h_results if r[0] != "hostile"]
        print(f"normal jobs' p95: {pct(normal, 95):.2f} s alone, {pct(beside, 95):.2f} s beside the hostile "
              f"sessions ({pct(beside, 95) / pct(normal, 95):.2f}x)")
    if bad:
        print("FAIL: jobs without a bundle or a clear error:", bad)
        return 1
    print("ok: every job ended with a bundle or a clear error")
    return 0


def ray_vs_local(args) -> int:
    import ray
    from ray.cluster_utils import Cluster

    from analysis.service.ray_engine import RayRunner
    from analysis.service.settings import EngineSettings

    print("sandbox:", sandbox_status())
    limits = Limits.from_env()
    local, local_wall = run_mix(args, limits, 0)
    bad = report(local, local_wall, args, limits, "local queue")
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 100 << 20,
                                                      "include_dashboard": False})
    c.add_node(num_cpus=1, object_store_memory=100 << 20)
    c.wait_for_nodes()
    try:
        ray.init(address=c.address, log_to_driver=False)
        runner = RayRunner(EngineSettings(kind="ray", address=c.address))
        on_ray, ray_wall = run_mix(args, limits, 0, runner=runner)
        bad += report(on_ray, ray_wall, args, limits, "Ray, 2 local nodes")
    finally:
        ray.shutdown()
        c.shutdown()
    for kind in ("all", "pasted", "gallery"):
        a = [r[1] for r in local if kind == "all" or r[0] == kind]
        b = [r[1] for r in on_ray if kind == "all" or r[0] == kind]
        misses_a = [r[1] for r in local if (kind == "all" or r[0] == kind) and r[2] != "bundle-hit"]
        misses_b = [r[1] for r in on_ray if (kind == "all" or r[0] == kind) and r[2] != "bundle-hit"]
        if a and b:
            print(f"{kind:8s} p50 {pct(a, 50):.2f} s local, {pct(b, 50):.2f} s Ray ({pct(b, 50) / pct(a, 50):.2f}x); "
                  f"p95 {pct(a, 95):.2f} / {pct(b, 95):.2f} s ({pct(b, 95) / pct(a, 95):.2f}x); "
                  f"uncached p50 {pct(misses_a, 50):.2f} / {pct(misses_b, 50):.2f} s")
    hits = [r[1] for r in on_ray if r[2] == "bundle-hit"]
    if hits:
        print(f"cache hits on Ray: p95 {pct(hits, 95) * 1e3:.0f} ms (the store answers before anything is submitted)")
    if bad:
        print("FAIL: jobs without a bundle or a clear error:", bad)
        return 1
    print("ok: every job ended with a bundle or a clear error, on both engines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
