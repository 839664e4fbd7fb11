"""Hostile code in the sandboxed worker: every job ends with a clear error, leaves no process
behind, and the next request is still served.

These start real workers in real bubblewrap sandboxes (marked ``sandbox``; skipped with the
reason when bwrap cannot create a sandbox here). Each worker start imports JAX, a few seconds.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import resource
import time
import uuid

import pytest

from analysis.service import sandbox, slots, worker_process
from analysis.errors import ExplorerError
from analysis.service.settings import Limits
from analysis.service.worker import Job, run_job

ISOLATED, WHY = sandbox.sandbox_status()
needs_bwrap = pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")
pytestmark = [pytest.mark.sandbox, needs_bwrap]

# Only the infinite-loop test waits for it (it uses 12 s); generous so a worker that imports JAX
# on a loaded 2-core CI machine is not mistaken for a hang.
TIMEOUT = float(os.environ.get("XLA_EXPLORER_TEST_TIMEOUT_S", "45"))
LIMITS = Limits(timeout_s=TIMEOUT, cpu_s=60, memory_mb=3072, nproc=64, file_mb=8, output_mb=2)

GOOD = """
import jax.numpy as jnp

def model(x):
    return jnp.tanh(x) * 2

def example_inputs():
    return (jnp.ones((8, 8)),)
"""

TAIL = """
def model(x):
    return x

def example_inputs():
    import jax.numpy as jnp
    return (jnp.ones(3),)
"""


def _leftovers(tokens) -> list[int]:
    return [pid for t in tokens for pid in slots.processes_with_token(t)]


def run_hostile(source: str, limits: Limits = LIMITS, **job) -> ExplorerError:
    """Run ``source``; it must fail with an ExplorerError, in time, leaving no process."""
    before = len(worker_process.recent_tokens)
    t0 = time.monotonic()
    with pytest.raises(ExplorerError) as info:
        run_job(Job(source=source, **job), limits=limits)
    took = time.monotonic() - t0
    assert took < limits.timeout_s + 10, f"took {took:.1f} s"
    tokens = list(worker_process.recent_tokens)[before:]
    assert tokens, "no worker was started"
    assert _leftovers(tokens) == [], "processes of the job are still alive"
    err = info.value
    assert err.one_line()  # prints as one line
    assert "\n" not in err.one_line()
    return err


@pytest.fixture(scope="module")
def still_served():
    """Call after hostile jobs: a normal job still gives a bundle."""
    def check():
        ran = run_job(Job(source=GOOD, name="good"), limits=LIMITS)
        assert ran.bundle.stages["hlo_after"] and ran.bundle.kernels
        assert ran.isolated is True
    return check


def test_normal_job_runs_isolated():
    ran = run_job(Job(source=GOOD, name="good"), limits=LIMITS)
    assert ran.bundle.source["name"] == "good"
    assert "tanh" in ran.bundle.stages["hlo_before"]
    assert ran.isolated is True


def test_infinite_loop_hits_the_wall_clock_limit(still_served):
    lim = Limits(**{**LIMITS.__dict__, "timeout_s": min(TIMEOUT, 12.0)})
    err = run_hostile("def model(x):\n    while True:\n        pass\n" + "def example_inputs():\n    return (1.0,)\n"
                      "x = 0\nwhile True:\n    x += 1\n", lim)
    assert err.phase == "limit" and "time limit" in err.message
    still_served()


def test_cpu_seconds_limit():
    lim = Limits(**{**LIMITS.__dict__, "timeout_s": 60.0, "cpu_s": 3})
    # Spin before anything heavy is imported; several threads burn CPU seconds faster.
    src = ("import threading\n"
           "def spin():\n    while True:\n        pass\n"
           "for _ in range(2):\n    threading.Thread(target=spin, daemon=True).start()\n"
           "spin()\n")
    err = run_hostile(src, lim)
    assert err.phase == "limit" and "CPU" in err.message


def test_memory_bomb(still_served):
    err = run_hostile("chunks = []\nwhile True:\n    chunks.append(bytearray(200 * 1024 * 1024))\n" + TAIL)
    assert err.phase == "limit", err
    assert err.line == 3
    still_served()


def test_fork_bomb(still_served):
    err = run_hostile("import os\nwhile True:\n    os.fork()\n" + TAIL)
    assert err.phase in ("import", "limit", "run"), err
    still_served()


def test_huge_output_is_capped(still_served):
    err = run_hostile("import sys\nwhile True:\n    print('x' * 65536)\n    sys.stderr.write('y' * 65536)\n" + TAIL)
    assert err.phase == "limit" and "output limit" in err.message
    still_served()


def test_sys_exit():
    err = run_hostile("import sys\nsys.exit(3)\n" + TAIL)
    assert err.phase == "import" and "SystemExit" in err.message and err.line == 2


def test_os_exit():
    err = run_hostile("import os\nos._exit(7)\n" + TAIL)
    assert err.phase == "run" and "exit 7" in err.message


def test_segfault_names_the_users_line(still_served):
    src = TAIL + "\nimport ctypes\n\ndef boom():\n    ctypes.string_at(0)\n\nboom()\n"
    err = run_hostile(src)
    assert err.phase == "run" and "segmentation fault" in err.message
    lines = src.splitlines()
    assert err.line is not None and lines[err.line - 1].strip() == "ctypes.string_at(0)"
    assert err.excerpt == "ctypes.string_at(0)"
    still_served()


def test_killing_the_parent_does_not_reach_the_app(still_served):
    me = os.getpid()
    err = run_hostile("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(60)\n" + TAIL)
    # In the sandbox the parent is the sandbox's own init, owned by another user: refused, or
    # (without a uid switch) killed, which ends the sandbox. Either way we are untouched.
    assert (err.phase == "import" and "PermissionError" in err.message) or err.phase in ("run", "limit"), err
    assert os.getpid() == me  # we are alive to check
    still_served()


def test_cannot_read_files_outside_the_sandbox():
    secret_dir = os.path.join(os.path.expanduser("~"), f".xla-explorer-test-{uuid.uuid4().hex[:8]}")
    os.makedirs(secret_dir)
    secret = os.path.join(secret_dir, "secret.txt")
    with open(secret, "w") as f:
        f.write("the secret")
    tmp_secret = tempfile.NamedTemporaryFile("w", delete=False, suffix=".txt")
    tmp_secret.write("tmp secret")
    tmp_secret.close()
    repo_file = os.path.join(sandbox.REPO_ROOT, "pyproject.toml")
    try:
        for path in (secret, tmp_secret.name, repo_file):
            src = f"data = open({path!r}).read()\nraise RuntimeError('READ:' + data[:20])\n" + TAIL
            err = run_hostile(src)
            assert "READ:" not in err.message, f"the sandbox could read {path}"
            assert err.phase == "import" and ("FileNotFoundError" in err.message or "PermissionError" in err.message)
    finally:
        os.unlink(tmp_secret.name)
        os.unlink(secret)
        os.rmdir(secret_dir)


def test_cannot_write_outside_the_scratch_dir():
    target_dir = os.path.join(os.path.expanduser("~"), f".xla-explorer-test-{uuid.uuid4().hex[:8]}")
    os.makedirs(target_dir)
    try:
        targets = [os.path.join(target_dir, "pwned"), os.path.join(sandbox.REPO_ROOT, "analysis", "pwned.py"),
                   "/usr/pwned", os.path.join(sandbox.REPO_ROOT, "pwned")]
        for t in targets:
            src = f"open({t!r}, 'w').write('x')\nraise RuntimeError('WROTE')\n" + TAIL
            err = run_hostile(src)
            assert "WROTE" not in err.message and err.phase == "import"
            assert isinstance(err.line, int) and err.line == 1
            assert not os.path.exists(t), f"the sandbox wrote {t}"
        # The scratch dir itself is writable (and gone afterwards).
        b = run_job(Job(source="import os\nopen('/scratch/ok', 'w').write('x')\nopen('/tmp/ok', 'w').write('y')\n"
                        + TAIL), limits=LIMITS).bundle
        assert b.kernels is not None
    finally:
        for name in os.listdir(target_dir):
            os.unlink(os.path.join(target_dir, name))
        os.rmdir(target_dir)


def test_no_network():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(0.5)
    port = srv.getsockname()[1]
    accepted = []

    def accept():
        try:
            conn, _ = srv.accept()
            accepted.append(conn)
        except OSError:
            pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        src = (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
               "raise RuntimeError('CONNECTED')\n" + TAIL)
        err = run_hostile(src)
        assert "CONNECTED" not in err.message
        assert err.phase == "import" and err.line == 2
        t.join(2)
        assert accepted == []
    finally:
        srv.close()


def test_array_of_a_trillion_elements():
    src = ("import jax.numpy as jnp\n\ndef model(x):\n    return x + 1\n\n"
           "def example_inputs():\n    return (jnp.ones((10**12,), jnp.float32),)\n")
    err = run_hostile(src)
    assert err.phase == "limit" and err.line == 7


def test_missing_module():
    err = run_hostile("import numpy\nimport no_such_module_for_xla_explorer\n" + TAIL)
    assert err.phase == "import" and "no_such_module_for_xla_explorer" in err.message
    assert err.line == 2 and err.excerpt == "import no_such_module_for_xla_explorer"


def test_no_model():
    err = run_hostile("import jax.numpy as jnp\n\ndef example_inputs():\n    return (jnp.ones(3),)\n")
    assert err.phase == "import" and "model" in err.message


def test_example_inputs_not_arrays():
    err = run_hostile("def model(x):\n    return x\n\ndef example_inputs():\n    return ('hello', object())\n")
    assert err.phase == "inputs" and "arrays" in err.message


def test_syntax_error_names_line_and_excerpt():
    err = run_hostile("def model(x):\n    return x +\n" + TAIL)
    assert err.phase == "syntax" and err.line == 2 and err.excerpt == "return x +"


def test_no_leftover_worker_processes_at_all():
    # Every job this test module started is gone.
    assert _leftovers(list(worker_process.recent_tokens)) == []


OFF = Limits(**{**LIMITS.__dict__, "sandbox": "off"})


def test_fallback_without_bwrap_is_flagged():
    """With the sandbox off the job still runs under limits, and says it is not isolated."""
    ok, reason = sandbox.sandbox_status(OFF)
    assert ok is False and "off" in reason
    ran = run_job(Job(source=GOOD, name="good"), limits=OFF)
    assert ran.isolated is False
    err = run_hostile("import os\nos._exit(5)\n" + TAIL, limits=OFF)
    assert "exit 5" in err.message


def test_every_way_of_turning_the_sandbox_off_is_reported(tmp_path, monkeypatch):
    """The settings file, the environment and a Limits handed in: each one turns the sandbox off
    for the jobs *and* for the status the app and the CLI show."""
    monkeypatch.delenv("XLA_EXPLORER_SANDBOX", raising=False)
    toml = tmp_path / "xla-explorer.toml"
    toml.write_text('[limits]\nsandbox = "off"\n')
    monkeypatch.setenv("XLA_EXPLORER_SETTINGS", str(toml))
    assert Limits.from_env().sandbox == "off"
    assert sandbox.sandbox_status()[0] is False
    toml.write_text('[limits]\nsandbox = "auto"\n')
    assert sandbox.sandbox_status()[0] is ISOLATED
    monkeypatch.setenv("XLA_EXPLORER_SANDBOX", "OFF")
    assert sandbox.sandbox_status()[0] is False
    monkeypatch.delenv("XLA_EXPLORER_SANDBOX")
    assert sandbox.sandbox_status(OFF)[0] is False
    toml.write_text("[limits]\nsandbox = \n")
    ok, reason = sandbox.sandbox_status()
    assert ok is False and "settings" in reason


def test_require_refuses_without_sandbox(monkeypatch):
    monkeypatch.setattr(sandbox, "BWRAP", "/nonexistent/bwrap")
    try:
        assert sandbox.bwrap_status(refresh=True)[0] is False
        with pytest.raises(ExplorerError) as info:
            run_job(Job(source=GOOD), limits=Limits(**{**LIMITS.__dict__, "sandbox": "require"}))
        assert info.value.phase == "limit" and "sandbox" in info.value.message
    finally:
        monkeypatch.undo()
        sandbox.bwrap_status(refresh=True)


def test_a_gpu_target_job_is_bounded_by_data_not_address_space(still_served):
    # CUDA's libraries reserve far more address space than they use and crash under an
    # address-space limit, so a compile for a GPU target bounds the data segment instead.
    src = ("import resource\n"
           "raise RuntimeError('limits as=%d data=%d' % (resource.getrlimit(resource.RLIMIT_AS)[0],\n"
           "                                             resource.getrlimit(resource.RLIMIT_DATA)[0]))\n" + TAIL)
    err = run_hostile(src, gpu_target="h200")
    assert f"as={resource.RLIM_INFINITY} data={LIMITS.memory_mb * 2 ** 20}" in err.message, err
    err = run_hostile(src)  # an ordinary job: the address space is what is limited
    assert f"as={LIMITS.memory_mb * 2 ** 20} data={resource.RLIM_INFINITY}" in err.message, err
    still_served()


# ----------------------------------------------------------------------------- pieces, no worker


@pytest.mark.parametrize("chunks,lines", [
    ([b'{"a":1}\n{"b"', b':2}\n'], [b'{"a":1}', b'{"b":2}']),
    ([b"x" * 5, b"y" * 5, b"z\nrest"], [b"xxxxxyyyyyz"]),
    ([b"\n\n"], [b"", b""]),
])
def test_line_reader_splits_lines_across_chunks(chunks, lines):
    r = worker_process.LineReader()
    got = [ln for c in chunks for ln in r.feed(c)]
    assert got == lines


def test_the_seccomp_filter_is_whole_instructions_ending_in_allow():
    from analysis.service import seccomp
    if not seccomp.supported():
        pytest.skip("no filter for this architecture")
    prog = seccomp.program()
    assert len(prog) % 8 == 0 and len(prog) // 8 == 24  # struct sock_filter is 8 bytes
    import struct
    code, _, _, k = struct.unpack("=HBBI", prog[-8:])
    assert code == 0x06 and k == 0x7FFF0000  # the last instruction: return ALLOW
