"""The Ray engine against a real local multi-node Ray cluster (``ray.cluster_utils.Cluster``):
three nodes on this machine — a head that runs nothing, a CPU node, and a node that *declares*
one GPU (this machine has none: Ray only counts the resource, so placement can be tested; no
job here compiles for a GPU). Jobs run through the same queue the app uses, in the sandboxed
worker on the node Ray picks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from analysis.errors import ExplorerError
from analysis.service.job import Job
from analysis.service.job_queue import JobQueue, compile_job
from analysis.service.settings import REPO_ROOT, EngineSettings, Limits
from tests.polling import wait_until

ray = pytest.importorskip("ray", reason="the README's test command installs the ray extra")
pytestmark = [pytest.mark.ray, pytest.mark.sandbox]

MB = 1 << 20
SLOW_MODEL = """
import time
import jax.numpy as jnp

def model(x):
    return jnp.tanh(x)

def example_inputs():
    time.sleep({sleep})  # a long job: time to cancel it, or to lose its node
    return (jnp.ones((4, 4)),)
"""


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": 80 * MB,
                                                      "include_dashboard": False})
    c.add_node(num_cpus=1, object_store_memory=80 * MB, resources={"cpu_node": 1})
    c.add_node(num_cpus=1, num_gpus=1, object_store_memory=80 * MB)  # declares a GPU; there is none
    c.wait_for_nodes()
    ray.init(address=c.address, namespace="xla-explorer-tests", log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def engine(cluster):
    from analysis.service.ray_engine import RayRunner

    return RayRunner(EngineSettings(kind="ray", address=cluster.address))


def _queue(engine, tmp_path, **kw):
    from analysis.service.store import Store

    limits = Limits(timeout_s=180, measure_timeout_s=120, **kw)
    return JobQueue(limits, Store(str(tmp_path / "store.sqlite")), runner=engine, workers=2, measure_slots=2,
                    engine="ray")


def _worker_processes() -> int:
    """Sandboxed workers started for this test session: descendants of this process (the test
    cluster's nodes are its children), so an app's workers on the same machine are not counted."""
    parent, cmd = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                parent[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd[int(pid)] = f.read()
        except (OSError, ValueError, IndexError):
            continue

    def mine(pid: int) -> bool:
        seen = set()
        while pid > 1 and pid not in seen:
            seen.add(pid)
            pid = parent.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    return sum(1 for pid, c in cmd.items() if b"analysis.service.worker_main" in c and mine(pid))


def test_a_gallery_job_runs_sandboxed_on_a_node_and_its_phases_reach_the_caller(engine, tmp_path):
    q = _queue(engine, tmp_path)
    phases = []
    try:
        out = compile_job(Job(kind="gallery", name="mlp", backend="cpu"), session="s1", progress=phases.append,
                          queue=q, timeout=300)
        assert out.isolated is True and not out.cached
        assert out.bundle.kernels and out.bundle.stages["hlo_after"]
        env = out.bundle.environment["engine"]
        assert env["kind"] == "ray" and env["node"]
        # the status box moves: the node, then the worker's own phases (the compile's stages)
        assert any(p.startswith("node:") for p in phases) and len(phases) >= 3
        # the cache is consulted before anything is submitted: the same job again is instant
        again = compile_job(Job(kind="gallery", name="mlp", backend="cpu"), session="s1", queue=q)
        assert again.cached
    finally:
        q.shutdown()


def test_a_measuring_job_on_a_node_sends_its_compile_before_its_timings(engine, tmp_path):
    q = _queue(engine, tmp_path)
    try:
        job = Job(kind="gallery", name="softmax", backend="cpu", measure=True, preview_kernels=1)
        out = compile_job(job, session="s1", queue=q, early=True, timeout=300)
        assert out.pending is not None and out.bundle.timings is None and out.bundle.kernels
        final = out.pending.result(300)
        assert final.bundle.timings and final.bundle.environment["engine"]["kind"] == "ray"
        assert final.bundle.stages["hlo_after"] == out.bundle.stages["hlo_after"]
        assert final.bundle.module("hlo_after") is out.bundle.module("hlo_after")  # parsed once
        # the buffer assignment and the code, read after the preview, come with the timings
        assert out.bundle.memory is None and final.bundle.memory["peak"] and final.bundle.code is not None
    finally:
        q.shutdown()


def test_measuring_jobs_ask_for_a_gpu_or_a_whole_node_and_land_there(cluster, engine):
    from analysis.service.ray_engine import resources_for

    gpu_job = Job(kind="gallery", name="mlp", backend="gpu", measure=True)
    cpu_job = Job(kind="gallery", name="mlp", backend="cpu", measure=True)
    assert resources_for(gpu_job, 1.0) == {"num_cpus": 1, "num_gpus": 1}
    assert engine.options_for(cpu_job) == {"num_cpus": 1.0, "num_gpus": 0}  # the largest node has 1 CPU
    assert resources_for(Job(kind="gallery", name="mlp", backend="cpu"), 8.0) == {"num_cpus": 1, "num_gpus": 0}

    @ray.remote
    def where():
        return ray.get_runtime_context().get_node_id()

    gpu_nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU")}
    assert len(gpu_nodes) == 1
    # a task with the GPU job's options runs on the node that declares the GPU, every time
    placed = ray.get([where.options(**resources_for(gpu_job, 1.0)).remote() for _ in range(3)])
    assert set(placed) == gpu_nodes


def test_cancel_kills_the_sandboxed_worker_on_its_node(engine, tmp_path):
    q = _queue(engine, tmp_path)
    before = _worker_processes()
    try:
        h = q.submit(Job(kind="code", name="slow", source=SLOW_MODEL.format(sleep=120), filename="slow.py",
                         backend="cpu"), session="s2")
        wait_until(lambda: h.phase is not None and not h.phase.startswith("node:"), 120,
                   "the job to start on its node", interval_s=0.2)
        # its sandboxed worker is running (asleep in the model)
        wait_until(lambda: _worker_processes() > before, 60, "its sandboxed worker to run", interval_s=0.2)
        assert h.cancel()
        assert h.wait(60), "cancel did not end the job"
        with pytest.raises(ExplorerError) as e:
            h.result(0)
        assert "cancelled" in e.value.message
        # nothing lingers on the node: the worker's process tree is gone
        wait_until(lambda: _worker_processes() <= before, 30, "the worker's process tree to be gone",
                   interval_s=0.5)
    finally:
        q.shutdown()


def test_a_node_lost_mid_job_is_retried_elsewhere(cluster, engine, tmp_path):
    cluster.add_node(num_cpus=1, object_store_memory=80 * MB)  # where the job can go next
    cluster.wait_for_nodes()
    q = _queue(engine, tmp_path)
    victim = None
    try:
        h = q.submit(Job(kind="code", name="slowish", source=SLOW_MODEL.format(sleep=6), filename="slowish.py",
                         backend="cpu"), session="s3")
        first = wait_until(lambda: engine.last_node.get("node_id"), 120, "the job to start on a node",
                           interval_s=0.2)
        victim = next((n for n in cluster.worker_nodes if n.node_id == first), None)
        assert victim is not None, "the job ran on no worker node"
        cluster.remove_node(victim, allow_graceful=False)  # the node is lost mid-job
        assert h.wait(240), "the job hung after its node was lost"
        ran = h.result(0)
        assert ran.bundle.kernels  # run again, once, on another node
        assert engine.last_node.get("node_id") != first
    finally:
        q.shutdown()


def test_a_cluster_that_cannot_be_reached_is_one_line_naming_it():
    code = ("from analysis.service.ray_engine import connect\n"
            "from analysis.service.settings import EngineSettings\n"
            "from analysis.errors import ExplorerError\n"
            "try:\n    connect(EngineSettings(kind='ray', address='ray://127.0.0.1:9'))\n"
            "except ExplorerError as e:\n    print(e.one_line())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                         timeout=120, env=dict(os.environ, RAY_ADDRESS=""))
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, out.stdout + out.stderr
    assert "cannot reach the Ray cluster at ray://127.0.0.1:9" in lines[0]


def test_the_engine_setting(tmp_path):
    assert EngineSettings.from_env({}, str(tmp_path / "none.toml")).kind == "local"
    f = tmp_path / "s.toml"
    f.write_text('[engine]\nkind = "ray"\naddress = "ray://head:10001"\n')
    e = EngineSettings.from_env({}, str(f))
    assert (e.kind, e.address) == ("ray", "ray://head:10001")
    assert EngineSettings.from_env({"XLA_EXPLORER_ENGINE": "local"}, str(f)).kind == "local"
    for bad in ('[engine]\nkind = "spark"\n', '[engine]\nnodes = 3\n'):
        f.write_text(bad)
        with pytest.raises(ExplorerError) as err:
            EngineSettings.from_env({}, str(f))
        assert err.value.phase == "options"


def test_the_local_queue_says_where_a_bundle_was_made(tmp_path):
    from analysis.service.worker import Ran
    from analysis.bundle.core import bundle_from_hlo

    hlo = "HloModule m\n\nENTRY %e (p: f32[2]) -> f32[2] {\n  ROOT %p = f32[2]{0} parameter(0)\n}\n"

    def runner(job, progress, limits=None, cancel=None):
        return Ran(bundle_from_hlo(hlo, name="m"), True)

    q = JobQueue(Limits(), None, runner=runner)
    try:
        ran = q.submit(Job(kind="gallery", name="mlp"), session="x").result(30)
        assert ran.bundle.environment["engine"]["kind"] == "local"
    finally:
        q.shutdown()

