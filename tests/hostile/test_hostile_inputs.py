"""Hostile inputs outside the worker: the CLI and model files, uploads and bundles, the text
search, the store, the queue, the worker slots. Each ends with the stated outcome."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from analysis.bundle.core import Bundle
from analysis.errors import ExplorerError
from analysis.service import sandbox, slots
from analysis.service.job import Job
from analysis.service.job_queue import STORE_WAIT, JobQueue, compile_job
from analysis.service.settings import REPO_ROOT, Limits
from analysis.service.store import Store
from analysis.text_search import matching_lines
from tests.hostile.conftest import needs_bwrap
from tests.polling import wait_until

CLI = [sys.executable, "-m", "analysis.cli"]


def cli(*args, env=None, timeout=300):
    e = dict(os.environ, **(env or {}))
    return subprocess.run(CLI + list(args), capture_output=True, text=True, cwd=REPO_ROOT, env=e, timeout=timeout)


MARKER_MODEL = """
import os
import jax.numpy as jnp

def model(x):
    return jnp.tanh(x)

def example_inputs():
    open({path!r}, "w").write("ran here")
    return (jnp.ones((4, 4)),)
"""


# ----------------------------------------------------------------------------- 1: the CLI


@pytest.mark.sandbox
@needs_bwrap
def test_report_of_a_model_file_runs_it_sandboxed_and_trusted_runs_it_here(tmp_path):
    marker = tmp_path / "marker"  # a host folder the sandbox cannot reach
    model = tmp_path / "student.py"
    model.write_text(MARKER_MODEL.format(path=str(marker)))
    p = cli("report", str(model), "--html", str(tmp_path / "r.html"))
    # In the sandbox the write fails (the folder is not there): an error, and no marker.
    assert not marker.exists()
    assert p.returncode == 2 and "No such file or directory" in p.stderr, p.stderr[-500:]
    p = cli("report", str(model), "--html", str(tmp_path / "r.html"), "--trusted")
    assert p.returncode == 0, p.stderr[-500:]
    assert marker.read_text() == "ran here"
    assert "--trusted" in p.stderr and "NOT sandboxed" in p.stderr  # the visible note


# ----------------------------------------------------------------------------- 8: one-line errors

SELF_FUSION = """HloModule m, is_scheduled=true

%fused (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %f = f32[4]{0} fusion(f32[4]{0} %p), kind=kLoop, calls=%fused
}

ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  ROOT %r = f32[4]{0} fusion(f32[4]{0} %a), kind=kLoop, calls=%fused
}
"""


def one_line_error(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr[-800:])
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("xla-explorer:")]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-800:]
    return lines[0]


def test_a_self_calling_fusion_is_one_line(tmp_path):
    f = tmp_path / "self.hlo"
    f.write_text(SELF_FUSION)
    line = one_line_error(cli("analyze", str(f)))
    assert "fused calls itself" in line and "self.hlo" in line


def test_json_nested_50k_deep_is_one_line(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text('{"schema_version": 3, "metrics": ' + "[" * 60000 + "]" * 60000 + "}")
    assert "nested deeper" in one_line_error(cli("analyze", str(f)))
    with pytest.raises(ExplorerError, match="nested deeper"):
        Bundle.from_json("[" * 200000 + "]" * 200000)


def test_a_bundle_with_missing_references_is_one_line(tmp_path):
    f = tmp_path / "refs.json"
    f.write_text(json.dumps({"schema_version": 3, "kernels": [{"opcode": "fusion", "route": "emitter"}],
                             "timings": {"kernels": {"k": {"route": "emitter"}}}}))
    line = one_line_error(cli("analyze", str(f)))
    assert "malformed bundle" in line
    f.write_text(json.dumps({"schema_version": 3, "timings": {"kernels": {"k": {"route": "emitter"}}}}))
    assert "median_s" in one_line_error(cli("analyze", str(f)))


# ----------------------------------------------------------------------------- 4: text search


def test_a_catastrophic_pattern_does_not_freeze_the_search():
    text = "a" * 200_000 + "b\nfusion.1 = f32[4] add\n"
    done: list = []
    t = threading.Thread(target=lambda: done.append(matching_lines(text, "(a+)+$")), daemon=True)
    t.start()
    t.join(60)  # a backtracking engine takes years on this; RE2 a moment
    assert done, "the search did not finish"
    assert done[0] == []  # the long line ends in "b": no match
    assert matching_lines(text, r"FUSION\.\d") == [(2, "fusion.1 = f32[4] add")]  # still a regex, no case
    assert matching_lines(text, "(a)\\1") == []  # not RE2 syntax: literal text


def test_the_text_views_never_compile_user_input_with_re():
    src = open(os.path.join(REPO_ROOT, "app", "views.py")).read()
    assert "re.compile(q" not in src and "matcher(q)" in src


# ----------------------------------------------------------------------------- 9: a locked store


def _hold_lock(path: str):
    """A process that holds the store's write lock until it is killed (it waits on its stdin)."""
    code = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", code, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def test_a_locked_store_is_busy_not_damaged_and_the_caller_is_told(tmp_path):
    path = str(tmp_path / "store.sqlite")
    Store(path).put_code("x = 1")
    holder = _hold_lock(path)
    try:
        said: list[str] = []
        s = Store(path, busy_s=1.0)
        with s.waiting(lambda: said.append("waiting")):
            with pytest.raises(ExplorerError) as info:
                s.put_code("y = 2")
        assert "store busy" in info.value.message and "damaged" not in info.value.message
        assert said == ["waiting"]
        # compile_job says it waits, then runs the job uncached (a warning, not a failure).
        runner_ran = []

        def runner(job, progress=None, limits=None, cancel=None):
            from analysis.bundle.core import bundle_from_hlo
            from analysis.service.worker import Ran
            runner_ran.append(job.name)
            return Ran(bundle_from_hlo("HloModule t\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n"),
                       False)

        fresh = Store(path, busy_s=1.0)
        q = JobQueue(Limits(workers=1), store=fresh, runner=runner)
        phases: list[str] = []
        with pytest.warns(UserWarning, match="store busy"):
            compile_job(Job(kind="code", source="x", name="t"), queue=q, progress=phases.append)
        assert STORE_WAIT in phases and runner_ran == ["t"]
        q.shutdown()
    finally:
        holder.kill()
        holder.wait()


# ----------------------------------------------------------------------------- 5: the queue


@pytest.mark.sandbox
@needs_bwrap
def test_a_measuring_job_does_not_starve_other_sessions():
    # A measuring job that runs until its (shorter) budget ends; meanwhile another session's
    # compile finishes, and the measuring job is stopped by its own budget.
    limits = Limits(timeout_s=240, measure_timeout_s=45, memory_mb=3072, workers=1)
    q = JobQueue(limits, store=None)
    spin = "import time\ndef model(x):\n    return x\ndef example_inputs():\n    while True:\n        time.sleep(0.1)\n"
    m = q.submit(Job(source=spin, name="spinner", measure=True), session="a")
    wait_until(lambda: m.status != "queued", 60, "the measuring job to start")
    c = q.submit(Job(kind="gallery", name="mlp", backend="cpu"), session="b")
    c.wait(200)
    assert c.done() and c.result(0).bundle.kernels
    assert not m.done(), "the compile job waited for the measuring job"
    with pytest.raises(ExplorerError, match="time limit \\(45 s\\)"):
        m.result(120)
    q.shutdown()


def test_a_new_tab_is_the_same_browser_session():
    from app.guard import browser_session_id
    tab1 = browser_session_id({"_streamlit_xsrf": "2|0a0b0c0d|1b2b3b4b|1700000000"})
    tab2 = browser_session_id({"_streamlit_xsrf": "2|ffeeddcc|eeceea8a|1700000099"})  # same token, new mask
    other = browser_session_id({"_streamlit_xsrf": "2|0a0b0c0d|0a0b0c0e|1700000000"})
    assert tab1 == tab2 != other
    release = threading.Event()

    def runner(job, progress=None, limits=None, cancel=None):
        release.wait(60)  # the first job runs until the test is done with it

    q = JobQueue(Limits(workers=1, session_jobs=1), store=None, runner=runner)
    q.submit(Job(name="one"), session=tab1)
    try:
        with pytest.raises(ExplorerError, match="this session already has 1 jobs"):
            q.submit(Job(name="two"), session=tab2)
    finally:
        release.set()
        q.shutdown(wait=False)


# ----------------------------------------------------------------------------- 7: uploads


def test_an_upload_over_the_limit_is_refused_before_it_is_read(monkeypatch):
    from app.guard import upload_error

    class Upload:
        name = "huge.hlo"
        size = 111 * 2**20

        def getvalue(self):
            raise AssertionError("read before the size was checked")

    monkeypatch.setenv("XLA_EXPLORER_UPLOAD_MB", "32")
    msg = upload_error(Upload())
    assert "111.0 MB" in msg and "upload limit (32 MB" in msg and "\n" not in msg


# Run in a fresh process: the suite's own (its compiles before this test) has free memory of its
# own that would take the parse without growing, and the test would see nothing.
_BIG_UPLOAD = """
import gc, json
from analysis.bundle.core import bundle_from_hlo
from analysis.tuning import libc_call, return_free_memory as release_memory

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))

if libc_call("malloc_trim") is None:
    print(json.dumps(None))
    raise SystemExit(0)
lines = ["HloModule big", "", "ENTRY %main (p: f32[64]) -> f32[64] {", "  %p = f32[64]{0} parameter(0)"]
n = 120_000
lines += [f'  %n{i} = f32[64]{{0}} negate(%{"p" if i == 0 else f"n{i - 1}"}), '
          f'metadata={{op_name="jit(f)/layer{i // 100}/neg"}}' for i in range(n)]
lines += [f"  ROOT %r = f32[64]{{0}} exponential(%n{n - 1})", "}"]
text = "\\n".join(lines) + "\\n"
gc.collect()
release_memory()
before = rss_mb()
b = bundle_from_hlo(text, name="big")
mod = b.module("hlo_after") or b.module("hlo_before")
count = len(mod.entry.instructions)
del mod
peak = rss_mb()
del b, text, lines
release_memory()
after = rss_mb()
print(json.dumps({"n": n, "count": count, "before": before, "peak": peak, "after": after}))
"""


def test_the_memory_of_a_big_upload_goes_back_to_the_machine_once_dropped():
    """A ~16 MB HLO upload parsed into a Bundle the way the app opens it, then dropped (a closed
    tab's session): nothing of it stays reachable (no module-level cache holds the module), so
    after ``analysis.tuning.return_free_memory`` the process ends near where it started, not at its peak."""
    p = subprocess.run([sys.executable, "-c", _BIG_UPLOAD], capture_output=True, text=True, cwd=REPO_ROOT,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-800:]
    m = json.loads(p.stdout.splitlines()[-1])
    if m is None:
        pytest.skip("no glibc malloc_trim on this machine")
    assert m["count"] == m["n"] + 2
    before, peak, after = m["before"], m["peak"], m["after"]
    assert peak - before > 50  # the parse really held memory (else the test shows nothing)
    # within a fifth of what the upload took (the interpreter keeps a little: caches, arenas' tops)
    assert after - before < 0.2 * (peak - before), (before, peak, after)


# ----------------------------------------------------------------------------- 10: worker uids


def test_worker_slots_are_shared_by_every_process_on_the_machine(tmp_path, monkeypatch):
    # Slots are the machine's: a slot whose worker uid has processes (the app's spare worker, a
    # job of another process) is not free, whatever this test's lock folder says. So the test
    # asks which slots are free now instead of assuming 0, 1, 2.
    monkeypatch.setenv(slots.SLOT_DIR_ENV, str(tmp_path / "slots"))
    mine = slots.take_slot()
    try:
        code = ("import json; from analysis.service import slots; "
                "s = [slots.take_slot() for _ in range(2)]; print(json.dumps([x.n for x in s]))")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                           env=dict(os.environ, PYTHONPATH=REPO_ROOT), timeout=60)
        theirs = json.loads(p.stdout)
        assert mine.n not in theirs and len(set(theirs)) == 2
    finally:
        slots.give_slot(mine)
    # the other process has ended: its slots are free again (the kernel dropped its locks), so
    # the next three slots taken are this process's and the other's (the lowest free ones)
    again = [slots.take_slot() for _ in range(3)]
    try:
        assert sorted(s.n for s in again) == sorted([mine.n, *theirs])
    finally:
        for s in again:
            slots.give_slot(s)


def test_the_isolation_status_names_the_job_wide_mechanism():
    ok, reason = sandbox.sandbox_status()
    from analysis.service import cgroup
    kind = cgroup.mechanism().kind
    assert kind in ("cgroup v2", "cgroup v1", "watchdog")
    if ok:
        assert kind in reason and "bounded size" in reason
