"""The job queue and ``compile_job``.

The scheduling tests use a stand-in runner (a function that records when it runs) because they
test the queue's rules, not the sandbox; the end-to-end tests at the bottom run real sandboxed
workers and a real SQLite store.
"""

from __future__ import annotations

import threading

import pytest

from analysis.service import cache_keys as keys
from analysis.service import job_queue as jobs
from analysis.service import peaks as peaks_store
from analysis.service import sandbox
from analysis.bundle.core import bundle_from_hlo
from analysis.errors import ExplorerError
from analysis.service.job_queue import JobQueue, compile_job
from analysis.service.settings import Limits
from analysis.service.store import Store
from analysis.service.job import Job
from analysis.service.worker import Ran

HLO = """HloModule tiny, is_scheduled=true

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %e = f32[4]{0} exponential(%p)
}
"""


class Recorder:
    """A runner that takes ``delay`` seconds and records which jobs overlapped."""

    def __init__(self, delay=0.3, fail_on=()):
        self.delay, self.fail_on = delay, set(fail_on)
        self.lock = threading.Lock()
        self.running: set[str] = set()
        self.log: list[tuple[str, frozenset]] = []  # (job name, running at its start)
        self.max_parallel = 0
        self.started: dict[str, threading.Event] = {}

    def wait_started(self, name: str) -> None:
        """Block until the job ``name`` has started running (an event, not a sleep)."""
        with self.lock:
            ev = self.started.setdefault(name, threading.Event())
        assert ev.wait(10), f"{name} never started"

    def __call__(self, job, progress=None, limits=None, cancel=None):
        with self.lock:
            self.started.setdefault(job.name, threading.Event()).set()
            self.running.add(job.name)
            self.log.append((job.name, frozenset(self.running)))
            self.max_parallel = max(self.max_parallel, len(self.running))
        try:
            if progress:
                progress("compile")
            # a fake job that takes ``delay``, or less if it is cancelled (an event, not a sleep)
            if (cancel or threading.Event()).wait(self.delay):
                raise ExplorerError("run", "the job was cancelled")
            if job.name in self.fail_on:
                raise ExplorerError("compile", "boom", job.filename)
            b = bundle_from_hlo(HLO, job.name)
            if job.measure:
                b.timings = {"kernels": {}}
            return Ran(b, isolated=False)
        finally:
            with self.lock:
                self.running.discard(job.name)


def queue(workers=2, session_jobs=10, measure_mode="beside", **kw):
    r = Recorder(**kw)
    return JobQueue(Limits(workers=workers, session_jobs=session_jobs, measure_mode=measure_mode), store=None,
                    runner=r), r


def test_compile_jobs_run_in_parallel_up_to_workers():
    q, r = queue(workers=2)
    hs = [q.submit(Job(name=f"c{i}"), session=f"s{i}") for i in range(6)]
    assert [h.result(10).bundle.title for h in hs] == [f"c{i}" for i in range(6)]
    assert r.max_parallel == 2
    assert all(h.status == jobs.DONE for h in hs)
    q.shutdown()


def test_measured_alone_measurement_jobs_run_alone_and_block_new_compiles():
    q, r = queue(workers=3, delay=0.25, measure_mode="alone")
    c1 = q.submit(Job(name="c1"), session="a")
    r.wait_started("c1")
    m1 = q.submit(Job(name="m1", measure=True), session="b")
    m2 = q.submit(Job(name="m2", compare_fusion=True), session="c")
    c2 = q.submit(Job(name="c2"), session="d")
    assert m2.position() >= 1
    for h in (c1, m1, m2, c2):
        h.result(10)
    for name, overlap in r.log:
        if name.startswith("m"):
            assert overlap == {name}, f"{name} ran together with {set(overlap) - {name}}"
    order = [n for n, _ in r.log]
    assert order.index("m1") < order.index("c2") and order.index("m2") < order.index("c2")
    q.shutdown()


def test_measured_beside_compile_jobs_of_other_sessions_keep_running_and_the_timings_say_so():
    q, r = queue(workers=2, delay=0.4)
    m1 = q.submit(Job(name="m1", measure=True), session="a")
    r.wait_started("m1")
    m2 = q.submit(Job(name="m2", measure=True), session="b")
    cs = [q.submit(Job(name=f"c{i}"), session=f"s{i}") for i in range(2)]
    for h in cs:
        r.wait_started(h.job.name)  # both start while m1 still measures: no compile waits for it
    assert not m1.done()
    for h in (m1, m2, *cs):
        h.result(10)
    for name, overlap in r.log:
        assert not ({"m1", "m2"} <= overlap), "two measuring jobs ran at once"
        if name.startswith("c"):
            assert len(overlap - {"m1", "m2"}) <= 2  # at most `workers` compile jobs
    # m1 shared the machine with both compile jobs, and its timings say so
    assert m1.result(0).bundle.timings["jobs_beside"] == 2
    q.shutdown()


def test_a_measuring_job_has_its_own_shorter_budget():
    seen = {}

    def runner(job, progress=None, limits=None, cancel=None):
        seen[job.name] = limits.timeout_s
        return Ran(bundle_from_hlo(HLO, job.name), isolated=False)

    q = JobQueue(Limits(timeout_s=120, measure_timeout_s=30), store=None, runner=runner)
    q.submit(Job(name="m", measure=True)).result(10)
    q.submit(Job(name="c")).result(10)
    assert seen == {"m": 30.0, "c": 120.0}
    q.shutdown()


def test_positions_count_down():
    q, r = queue(workers=1, delay=0.3)
    hs = [q.submit(Job(name=f"c{i}"), session=f"s{i}") for i in range(3)]
    r.wait_started("c0")
    assert hs[0].position() == 0 and hs[0].status == jobs.RUNNING
    assert hs[1].position() == 0 and hs[2].position() == 1  # jobs ahead in the lane
    hs[2].result(10)
    assert hs[2].position() is None
    q.shutdown()


def test_progress_reaches_the_caller_thread_with_the_queue_position_as_it_moves():
    # A UI can only draw from its own thread: every progress message must arrive there, and a
    # waiting job's position must be reported again when the job ahead of it finishes.
    q, r = queue(workers=1, delay=0.3)
    ahead = [q.submit(Job(name=f"a{i}"), session=f"s{i}") for i in range(3)]  # one runs, two wait
    r.wait_started("a0")
    seen: list[tuple[str, str]] = []
    b = compile_job(Job(name="mine"), session="me", queue=q, use_cache=False,
                    progress=lambda p: seen.append((p, threading.get_ident())))
    assert b.bundle.title == "mine" and b.cached is False
    assert {t for _, t in seen} == {threading.get_ident()}  # this very thread, whatever threads are named
    msgs = [p for p, _ in seen]
    waits = [int(p.split(":")[1]) for p in msgs if p.startswith("queued:")]
    # two jobs waited ahead of it at first, and the count only went down
    assert waits[0] == 2 and waits == sorted(set(waits), reverse=True) and msgs[-1] == "compile"
    for h in ahead:
        h.result(10)
    q.shutdown()


def test_compile_job_timeout():
    q, r = queue(workers=1, delay=0.5)
    with pytest.raises(TimeoutError):
        compile_job(Job(name="slow"), queue=q, use_cache=False, timeout=0.1)
    q.shutdown()


def test_session_limit():
    q, r = queue(workers=1, session_jobs=2, delay=0.3)
    q.submit(Job(name="a"), session="alice")
    q.submit(Job(name="b"), session="alice")
    with pytest.raises(ExplorerError) as info:
        q.submit(Job(name="c"), session="alice")
    assert info.value.phase == "limit"
    q.submit(Job(name="d"), session="bob").result(10)  # other sessions are served
    q.shutdown()


def test_cancel_and_errors():
    q, r = queue(workers=1, delay=0.5, fail_on={"bad"})
    first = q.submit(Job(name="first"), session="a")
    waiting = q.submit(Job(name="waiting"), session="b")
    bad = q.submit(Job(name="bad"), session="c")
    assert waiting.cancel() is True
    with pytest.raises(ExplorerError):
        waiting.result(1)
    assert waiting.status == jobs.CANCELLED
    first.result(10)
    with pytest.raises(ExplorerError) as info:
        bad.result(10)
    assert info.value.phase == "compile" and bad.status == jobs.FAILED
    assert "waiting" not in [n for n, _ in r.log]
    q.shutdown()


def test_identical_jobs_in_flight_share_one_run():
    q, r = queue(workers=2, delay=0.3)
    a = q.submit(Job(name="same"), session="a", key="K")
    b = q.submit(Job(name="same"), session="b", key="K")
    assert a is b
    a.result(10)
    assert [n for n, _ in r.log] == ["same"]
    q.shutdown()


def test_result_timeout():
    q, r = queue(workers=1, delay=0.5)
    h = q.submit(Job(name="slow"))
    with pytest.raises(TimeoutError):
        h.result(0.05)
    h.result(10)
    q.shutdown()


def test_a_machines_first_job_runs_beside_its_device_probe_and_is_cached_after_it(tmp_path, monkeypatch):
    """The probe (what devices JAX sees: a sandboxed Python of its own) no longer delays the
    first job: the job runs while the probe does (here the probe waits for the job to start),
    and its bundle is stored under the key the probe gives once both are done."""
    monkeypatch.setattr(keys, "probe_memo", {})
    store = Store(str(tmp_path / "store.sqlite"))
    r = Recorder(delay=0.05)
    probed = []

    def probe(limits=None):
        r.wait_started("first")  # blocks until the job runs: it could not, were the probe first
        probed.append(True)
        return {"backends": {"cpu": {"device_kind": "cpu", "count": 1}}, "default": "cpu"}

    monkeypatch.setattr(keys, "run_probe", probe)
    q = JobQueue(Limits(workers=1), store=store, runner=r)
    out = compile_job(Job(source="x", name="first", backend="cpu"), session="t", queue=q)
    assert not out.cached and probed == [True]
    # stored by the queue as the job ended, not by this caller: a closed tab's job is cached too
    h = q.submit(Job(source="y", name="left", backend="cpu"), session="t",
                 late_key=lambda: keys.cache_key(Job(source="y", name="left", backend="cpu"), "cpu:cpux1"))
    h.result(10)
    assert store.get_bundle(keys.cache_key(Job(source="y", name="left", backend="cpu"), "cpu:cpux1")) is not None
    assert store.get_meta(keys.probe_meta_key())["default"] == "cpu"
    again = compile_job(Job(source="x", name="first", backend="cpu"), session="t", queue=q)
    assert again.cached and [n for n, _ in r.log] == ["first", "left"]  # stored under the probed key
    q.shutdown()


def test_cache_key_depends_on_what_matters():
    kind = "cpu:cpux1"
    base = Job(source="def model(x): return x", name="p")
    k = keys.cache_key(base, kind)
    assert k == keys.cache_key(Job(source="def model(x): return x", name="p"), kind)
    assert k != keys.cache_key(Job(source="def model(x): return x + 1", name="p"), kind)
    assert k != keys.cache_key(Job(source="def model(x): return x", name="p", compiler_options={"a": 1}), kind)
    assert k != keys.cache_key(Job(source="def model(x): return x", name="p", backend="cpu"), kind)
    assert k != keys.cache_key(base, "gpu:NVIDIA H200x1")
    g = keys.cache_key(Job(kind="gallery", name="mlp"), kind)  # gallery: keyed by the file's text
    assert g == keys.cache_key(Job(kind="gallery", name="mlp", source="ignored"), kind)
    with pytest.raises(ExplorerError):
        keys.cache_key(Job(kind="gallery", name="no_such_model"), kind)


# ----------------------------------------------------------------------------- end to end

ISOLATED, WHY = sandbox.sandbox_status()

SRC = """
import jax.numpy as jnp

def model(x):
    return jnp.exp(x) + 1

def example_inputs():
    return (jnp.ones((4, 4)),)
"""


@pytest.mark.sandbox
@pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")
def test_compile_job_end_to_end_cache_and_damaged_store(tmp_path):
    store = Store(str(tmp_path / "store.sqlite"))
    q = JobQueue(Limits(timeout_s=60, workers=2), store)
    seen = []
    b1 = compile_job(Job(source=SRC, name="e2e"), session="t", progress=seen.append, queue=q)
    assert not b1.cached and b1.isolated is True and "compile" in seen
    b2 = compile_job(Job(source=SRC, name="e2e"), session="t", queue=q)
    assert b2.cached and b2.isolated is None
    assert b2.bundle.stages == b1.bundle.stages
    # The device probe is remembered in the store.
    assert store.get_meta(keys.probe_meta_key())["backends"]["cpu"]
    # A damaged cached row: reported as a warning, recompiled, repaired.
    import sqlite3
    c = sqlite3.connect(store.path)
    c.execute("UPDATE bundles SET data = x'00'")
    c.commit()
    c.close()
    with pytest.warns(UserWarning, match="store"):
        b3 = compile_job(Job(source=SRC, name="e2e"), session="t", queue=q)
    assert not b3.cached
    assert compile_job(Job(source=SRC, name="e2e"), session="t", queue=q).cached
    # A user error comes back as ExplorerError and is not cached.
    with pytest.raises(ExplorerError) as info:
        compile_job(Job(source="import nope_nope\n", name="bad"), session="t", queue=q)
    assert info.value.phase == "import" and info.value.line == 1
    q.shutdown()


@pytest.mark.sandbox
@pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")
def test_compile_job_with_a_garbage_store_still_compiles(tmp_path):
    path = tmp_path / "store.sqlite"
    path.write_bytes(b"garbage" * 1000)
    q = JobQueue(Limits(timeout_s=60), Store(str(path)))
    with pytest.warns(UserWarning, match="store"):
        b = compile_job(Job(kind="gallery", name="mlp", backend="cpu"), session="t", queue=q).bundle
    assert b.kernels
    assert path.read_bytes().startswith(b"garbage")
    q.shutdown()


def test_limits_from_env_and_settings_file(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text("[limits]\ntimeout_s = 9\nworkers = 3\n")
    lim = Limits.from_env({"XLA_EXPLORER_WORKERS": "5", "XLA_EXPLORER_MEMORY_MB": "2048"}, str(f))
    assert (lim.timeout_s, lim.workers, lim.memory_mb) == (9.0, 5, 2048)
    with pytest.raises(ExplorerError):
        Limits.from_env({"XLA_EXPLORER_TIMEOUT_S": "soon"}, str(f))
    with pytest.raises(ExplorerError):
        Limits.from_env({"XLA_EXPLORER_WORKERS": "0"}, str(f))
    with pytest.raises(ExplorerError):
        Limits.from_env({"XLA_EXPLORER_SANDBOX": "maybe"}, str(f))


@pytest.mark.sandbox
@pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")
def test_cpu_calibration_is_made_once_per_machine(tmp_path):
    """The sandboxed worker cannot keep the peaks calibration itself; the parent stores the first
    one made without user code (a gallery model's job) and hands it to later measuring jobs,
    which then report the very same peaks. A user's job's calibration is never stored."""
    store = Store(str(tmp_path / "store.sqlite"))
    q = JobQueue(Limits(timeout_s=120, workers=1), store)
    own = compile_job(Job(source=SRC, name="p0", measure=True, iterations=3), session="t", queue=q).bundle
    assert own.timings["peaks"]["source"] == "calibrated"
    assert store.get_meta(peaks_store.KEY_PREFIX + keys.probe_meta_key()) is None
    first = compile_job(Job(kind="gallery", name="mlp", backend="cpu", measure=True, iterations=3),
                        session="t", queue=q).bundle
    peaks = first.timings["peaks"]
    assert peaks["source"] == "calibrated" and peaks["machine"]
    shared = peaks_store.checked(peaks)  # what may be shared of it: the fields a calibration has
    assert shared is not None and shared["memory_levels"]
    assert store.get_meta(peaks_store.KEY_PREFIX + keys.probe_meta_key()) == shared
    job = Job(source=SRC, name="p2", measure=True, iterations=4)
    second = compile_job(job, session="t", queue=q).bundle
    assert job.peaks is None  # the caller's job is not changed; the worker got a copy with the peaks
    assert second.timings["peaks"] == shared
    # the hand-over does not change what the cache key sees
    assert keys.cache_key(job, "cpu") == keys.cache_key(Job(source=SRC, name="p2", measure=True, iterations=4), "cpu")
    q.shutdown()


def test_the_gallery_can_be_read_by_many_sessions_at_once():
    """Every job looks the gallery up; 8 threads reading it at once (the load test's sessions)
    must all get the same 16 models, never an exception (ast.parse is not thread-safe in 3.11)."""
    import threading

    from sample_models import gallery

    want = set(gallery())
    errors, seen = [], []

    def read():
        try:
            for _ in range(25):
                seen.append(set(gallery()))
        except Exception as e:  # noqa: BLE001 - the point is to see any
            errors.append(repr(e))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(seen) == 200 and all(s == want for s in seen)
    assert len(want) >= 16
