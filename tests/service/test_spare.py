"""The spare worker (``worker_process.keep_spare``): a job of the kind it was started for is served by
it, a new one follows, a job of another kind starts its own, and nothing of one job reaches the
next (each worker serves one job in a sandbox of its own). Real workers in real bubblewrap
sandboxes."""

from __future__ import annotations

import time
from dataclasses import asdict, replace

import pytest

from analysis.errors import ExplorerError
from analysis.service import sandbox, slots, worker_process
from analysis.service.job import Job
from analysis.service.messages import Answer
from analysis.service.settings import Limits
from analysis.service.spare import SPARE_DELAY_S
from tests.polling import holds, wait_until

ISOLATED, WHY = sandbox.sandbox_status()
pytestmark = [pytest.mark.sandbox, pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")]

LIMITS = Limits(timeout_s=120, cpu_s=120, memory_mb=3072, nproc=64, file_mb=8, output_mb=8)

# The first job leaves what it can where the next could look: a file in /tmp and /scratch, a
# module attribute, an environment variable. The second refuses to load if it finds any.
LEAVES = """
import builtins, os
import jax.numpy as jnp
open("/tmp/left-behind", "w").write("1")
open(os.path.expanduser("~/left-behind"), "w").write("1")
builtins.LEFT_BEHIND = True
os.environ["LEFT_BEHIND"] = "1"

def model(x):
    return jnp.sin(x)

def example_inputs():
    return (jnp.ones((4, 4)),)
"""

LOOKS = """
import builtins, os
import jax.numpy as jnp
found = [w for w, there in (("/tmp file", os.path.exists("/tmp/left-behind")),
                            ("home file", os.path.exists(os.path.expanduser("~/left-behind"))),
                            ("builtin", hasattr(builtins, "LEFT_BEHIND")),
                            ("environment", "LEFT_BEHIND" in os.environ)) if there]
if found:
    raise RuntimeError("the last job left: " + ", ".join(found))

def model(x):
    return jnp.cos(x)

def example_inputs():
    return (jnp.ones((4, 4)),)
"""


def _job(source: str) -> dict:
    return asdict(Job(source=source, filename="m.py", name="m", kind="code", backend="cpu"))


def _spare(other_than: str | None = None, wait_s: float = 90.0) -> str:
    """The token of a waiting spare (not ``other_than``)."""
    def waiting():
        tok = worker_process.spare.token()
        return tok if tok != other_than else None

    return wait_until(waiting, wait_s, "a spare worker to be started")


def _spares_of_these_limits() -> None:
    """Spares on for jobs under LIMITS, from a clean start: an app run in this process before
    (AppTest) may have turned spares on for its own limits and have one of its kind waiting or
    about to be started, which a request for another kind does not replace."""
    worker_process.keep_spare(False)
    worker_process.keep_spare(True, LIMITS)


@pytest.fixture
def spares():
    _spares_of_these_limits()
    yield
    worker_process.keep_spare(False)


def test_a_job_takes_the_spare_and_the_next_one_is_started(spares):
    first = _spare()
    res = worker_process.run_worker(_job(LEAVES), LIMITS)
    assert isinstance(res.message, Answer), res.stderr_tail[-800:]
    assert res.token == first  # served by the worker started before the job was asked for
    assert slots.processes_with_token(first) == []  # and it is gone with its job
    second = _spare(other_than=first)
    # the next job is served by the new spare, which sees nothing of the last one
    res = worker_process.run_worker(_job(LOOKS), LIMITS)
    assert isinstance(res.message, Answer), (res.message, res.stderr_tail[-800:])
    assert res.token == second


def test_a_job_of_another_kind_starts_its_own(spares):
    spare = _spare()
    other = replace(LIMITS, memory_mb=LIMITS.memory_mb + 512)
    res = worker_process.run_worker(_job(LOOKS), other)
    assert isinstance(res.message, Answer), res.stderr_tail[-800:]
    assert res.token != spare
    # the spare of the old kind is ended, and one for the new kind follows
    assert slots.processes_with_token(spare) == []
    assert _spare(other_than=spare) != res.token


def test_the_wall_clock_is_the_jobs_own(spares):
    started_before = time.monotonic()  # the spare was started by the fixture, before this
    spare = _spare()
    # waiting as a spare does not count against the job: the spare waits, untaken, for longer
    # than the job's whole time limit, and the job (well under a second here) still runs
    limit_s = 8
    holds(lambda: worker_process.spare.token() == spare, started_before + limit_s + 1 - time.monotonic(),
          "the spare waiting for its job")
    res = worker_process.run_worker(_job(LOOKS), replace(LIMITS, timeout_s=limit_s))
    assert isinstance(res.message, Answer), (res.message, res.stderr_tail[-800:])
    assert res.token == spare  # it was the spare that had waited


def test_turned_off_the_spare_is_ended():
    _spares_of_these_limits()
    tok = _spare()
    worker_process.keep_spare(False)
    assert worker_process.spare.token() is None
    assert slots.processes_with_token(tok) == []
    res = worker_process.run_worker(_job(LOOKS), LIMITS)
    assert res.token != tok and res.message is not None
    # none started after a job while off: a spare would be started SPARE_DELAY_S after the job
    holds(lambda: worker_process.spare.token() is None, SPARE_DELAY_S + 1, "no spare while spares are off")


def test_the_setting(monkeypatch):
    monkeypatch.setenv("XLA_EXPLORER_SPARE_WORKER", "OFF")
    assert Limits.from_env().spare_worker == "off"
    monkeypatch.setenv("XLA_EXPLORER_SPARE_WORKER", "sometimes")
    with pytest.raises(ExplorerError, match="spare_worker must be on or off"):
        Limits.from_env()


def test_the_latest_jobs_kind_decides_the_spare_about_to_be_started():
    """Two jobs of different kinds end within the spare's delay: the spare started is for the
    second one's kind (the first request is replaced, not kept). A pool with a recording
    starter: no worker is started for real."""
    import threading

    from analysis.service.spare import SparePool

    started, done = [], threading.Event()

    class Kind:
        use_bwrap = True

        def __init__(self, k):
            self.k = k

        def key(self):
            return self.k

    class Worker:
        def __init__(self, kind):
            self.kind, self.token, self.born = kind, kind.k, 0.0

        def alive(self):
            return True

        def close(self):
            pass

    def start(kind):
        started.append(kind.key())
        done.set()
        return Worker(kind)

    pool = SparePool(start)
    pool.keep(True)
    pool.after(Kind("a"), delay=0.3)
    pool.after(Kind("b"), delay=0.3)
    assert done.wait(10)
    pool.after(Kind("b"), delay=0.0)  # one of that kind waits: none more is started
    assert pool.token() == "b"
    pool.keep(False)
    assert started == ["b"]


# ----------------------------------------------------------------------------- the command line's worker

def _command_line_worker(monkeypatch) -> tuple[list, list]:
    """The tokens of the workers the command line starts ahead (``spare.start_now``) and of the
    workers its jobs ran in (``run_worker``): the real calls, recorded."""
    started, ran = [], []
    start_now, run_worker = worker_process.spare.start_now, worker_process.run_worker

    def recording_start(kind):
        w = start_now(kind)
        started.append(w.token if w is not None else None)
        return w

    def recording_run(*a, **kw):
        res = run_worker(*a, **kw)
        ran.append(res.token)
        return res

    monkeypatch.setattr(worker_process.spare, "start_now", recording_start)
    monkeypatch.setattr(worker_process, "run_worker", recording_run)
    worker_process.keep_spare(False)
    return started, ran


def test_the_command_line_starts_its_worker_before_it_reads_the_job(tmp_path, monkeypatch):
    from analysis import cli

    started, ran = _command_line_worker(monkeypatch)
    model = tmp_path / "m.py"
    model.write_text(LOOKS)
    assert cli.main(["analyze", str(model), "--out", str(tmp_path / "m.json")]) == 0
    assert "cos" in (tmp_path / "m.json").read_text()
    assert len(started) == 1 and started[0] is not None
    assert ran == started  # the job ran in the worker started before the command's imports
    assert slots.processes_with_token(started[0]) == []  # gone with its job
    assert worker_process.spare.token() is None  # and none started after it


def test_a_command_that_fails_before_its_job_ends_the_worker_it_started(tmp_path, monkeypatch):
    from analysis import cli

    started, ran = _command_line_worker(monkeypatch)
    model = tmp_path / "m.py"
    model.write_text(LOOKS)
    # the folder to write to is checked before the compile: the job is never run
    assert cli.main(["report", str(model), "--html", str(tmp_path / "no" / "such" / "r.html")]) == 2
    assert len(started) == 1 and started[0] is not None and ran == []
    assert slots.processes_with_token(started[0]) == []
    assert worker_process.spare.token() is None


def test_no_worker_ahead_where_the_file_runs_elsewhere_or_not_at_all(tmp_path, monkeypatch):
    from analysis import cli

    started, _ = _command_line_worker(monkeypatch)
    model = tmp_path / "m.py"
    model.write_text(LOOKS)
    assert cli.main(["analyze", str(model), "--trusted", "--out", str(tmp_path / "t.json")]) == 0  # in this process
    assert cli.main(["analyze", str(tmp_path / "missing.py")]) == 2  # no such file
    assert cli.main(["list"]) == 0
    assert started == []
