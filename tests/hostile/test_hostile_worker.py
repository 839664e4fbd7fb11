"""Hostile model code in the real sandbox: each attack ends with the stated outcome.

Holes the red team found (issue 12), each now closed: memory held by forked children beyond the
limit, /tmp and /scratch filled without bound, a bundle rewritten by the user's code inside the
worker, a new user namespace made inside the sandbox, the output stream flooded. And the
attacks that were already contained, so they stay so.
"""

from __future__ import annotations

import os

import pytest

from analysis.errors import ExplorerError
from analysis.service import cgroup, slots, worker_process
from analysis.service.job import Job
from analysis.service.settings import Limits
from analysis.service.worker import run_job
from tests.hostile.conftest import needs_bwrap

pytestmark = [pytest.mark.sandbox, needs_bwrap]

TIMEOUT = float(os.environ.get("XLA_EXPLORER_TEST_TIMEOUT_S", "60"))
# The red team's limits: 2,600 MB of memory for the job.
LIMITS = Limits(timeout_s=TIMEOUT, cpu_s=120, memory_mb=2600, nproc=128, file_mb=64, output_mb=4,
                tmp_mb=128, scratch_mb=128)

TAIL = """
def model(x):
    return x * 2

def example_inputs():
    import jax.numpy as jnp
    return (jnp.ones(3),)
"""


def fails(source: str, limits: Limits = LIMITS) -> ExplorerError:
    with pytest.raises(ExplorerError) as info:
        run_job(Job(source=source + TAIL, name="hostile"), limits=limits)
    line = info.value.one_line()
    assert "\n" not in line
    return info.value


def runs(source: str, limits: Limits = LIMITS):
    return run_job(Job(source=source + TAIL, name="hostile"), limits=limits)


def test_three_forked_children_cannot_hold_more_than_the_job_limit():
    # Each child stays under the per-process limit (1.5 GB < 2.6 GB); together they are 4.5 GB.
    err = fails("""
import os, time
for i in range(3):
    if os.fork() == 0:
        b = bytearray(1500 * 2**20)
        for j in range(0, len(b), 4096):
            b[j] = 1
        time.sleep(120)
        os._exit(0)
time.sleep(120)
""")
    assert err.phase == "limit" and "memory limit" in err.message and "2600 MB" in err.message
    assert cgroup.mechanism().kind in err.message  # which mechanism stopped it is named


def test_tmp_is_a_bounded_tmpfs():
    # 3 GB into /tmp, in files under the per-file limit: the tmpfs (128 MB here) is full first.
    err = fails("""
for k in range(50):
    with open(f'/tmp/fill{k}', 'wb') as f:
        for i in range(60):
            f.write(b'x' * 2**20)
""")
    assert "No space left on device" in err.message


def test_scratch_is_bounded_too():
    err = fails("""
for k in range(40):
    with open(f'/scratch/fill{k}', 'wb') as f:
        for i in range(60):
            f.write(b'x' * 2**20)
""")
    assert "No space left on device" in err.message


def test_a_bundle_rewritten_inside_the_worker_is_rederived_by_the_parent():
    # The user's code runs in the worker process, so it can change what the worker answers.
    payload = '<iframe srcdoc="<script>parent.document.title=1</script>"></iframe>'
    ran = runs(f"""
import analysis.bundle.core as _b
_orig = _b.Bundle.to_dict
def _evil(self, *args, **kw):
    d = _orig(self)  # everything, kernels included, whatever the worker asked to leave out
    d["source"]["name"] = {payload!r}
    d["kernels"] = d["kernels"] + [dict(d["kernels"][0], name="ghost-kernel")] if d["kernels"] else d["kernels"]
    d["metrics"]["kernels_after"] = 999999
    return d
_b.Bundle.to_dict = _evil
""")
    b = ran.bundle
    assert b.title == "hostile"  # the parent's name for the job, not the payload
    assert "ghost-kernel" not in [k.name for k in b.kernels]  # kernels derived again from the HLO
    assert b.metrics["kernels_after"] == len([k for k in b.kernels if k.route != "control"])


def test_no_new_user_namespace_inside_the_sandbox():
    err = fails("""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
r = libc.unshare(0x10000000)  # CLONE_NEWUSER
raise SystemExit(f"unshare returned {r}, errno {ctypes.get_errno()}")
""")
    assert "unshare returned -1, errno 1" in err.message  # EPERM


def test_a_flood_of_the_protocol_stream_hits_the_output_limit():
    # The protocol stream is reachable from the user's code (it is an object in the process).
    err = fails("""
import gc, io
for o in gc.get_objects():
    if isinstance(o, io.TextIOWrapper) and not o.closed and o.writable() and o.fileno() > 2:
        for i in range(64):
            o.write('x' * 2**20)
        o.flush()
""")
    assert err.phase == "limit" and "output limit" in err.message


def test_many_processes_hit_the_job_wide_process_limit():
    err = fails("""
import os, time
kids = 0
try:
    for i in range(400):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        kids += 1
except OSError as e:
    raise SystemExit(f"fork refused after {kids}: {e}")
time.sleep(30)
""")
    assert "fork refused" in err.message or err.phase == "limit"


# ----------------------------------------------------------------------------- stays contained


def test_cannot_read_the_shadow_file_or_the_home_folder():
    # /root exists in the sandbox only as the path to the interpreter (e.g. /root/.pyenv/...):
    # every entry the worker can list there is a step of that path, nothing of the home folder.
    err = fails("""
import os
home = sorted(os.listdir('/root')) if os.path.isdir('/root') else []
raise SystemExit(f"shadow={os.path.exists('/etc/shadow')} home={home}")
""")
    assert "shadow=False" in err.message
    import ast
    import sys
    home = ast.literal_eval(err.message.split("home=", 1)[1])
    steps = {part for p in (sys.base_prefix, sys.prefix, os.path.realpath(sys.base_prefix)) for part in p.split("/")}
    assert set(home) <= steps, f"the worker sees {set(home) - steps} in /root"


def test_no_network():
    err = fails("""
import socket
try:
    socket.create_connection(('1.1.1.1', 53), timeout=3)
    raise SystemExit('connected')
except OSError as e:
    raise SystemExit(f'refused: {e.errno}')
""")
    assert "refused" in err.message


def test_ptrace_and_devices_are_refused():
    err = fails("""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, 1, 0, 0)  # PTRACE_ATTACH to the sandbox's init
e1 = ctypes.get_errno()
try:
    os.mknod('/scratch/sda', 0o600 | 0o60000, os.makedev(8, 0))
    made = True
except OSError:
    made = False
raise SystemExit(f"ptrace={r} made={made}")
""")
    assert "ptrace=-1 made=False" in err.message


def test_a_daemon_does_not_outlive_its_job():
    # A double fork + setsid: the job's token (and the sandbox's PID namespace) find it.
    first = len(worker_process.recent_tokens)
    runs("""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
""")
    tokens = list(worker_process.recent_tokens)[first:]
    assert tokens and [p for t in tokens for p in slots.processes_with_token(t)] == []


def test_a_normal_job_still_runs_after_all_that():
    ran = runs("")
    assert ran.isolated is True and ran.bundle.kernels
