"""The sandbox: how a worker process is started, confined, limited and cleaned up.

Every model that is not a built-in gallery entry runs in a worker (``analysis.service.worker``) that
this module starts inside bubblewrap (``bwrap``):

- new network, PID, IPC and UTS namespaces: no network at all, the worker sees only its own
  processes, and when the sandbox's init dies every process in it dies;
- a fresh root with only ``/usr`` (read-only), the Python interpreter's prefix and the virtual
  environment (read-only), the repository's ``analysis/`` and ``sample_models/`` (read-only),
  a private ``/tmp`` (tmpfs) and one scratch directory (read-write, deleted afterwards); the
  home folder, the rest of the repository and the app's store are not there at all;
- NVIDIA device nodes (``/dev/nvidia*``) and ``/sys`` (read-only) are bound only when present;
- when the app runs as root, the worker drops to an unprivileged user id of its own (one per
  worker slot) with no capabilities and ``no_new_privs``, so the process limit is enforced.

Resource limits (``Limits``): wall-clock timeout (the whole sandbox is killed), CPU seconds,
address space (or data segment on GPU machines, where CUDA needs a huge address space),
processes/threads, file size, and the bytes read back from the worker's stdout/stderr.

Where bubblewrap cannot run, workers run with the limits only, and ``sandbox_status()`` says
so: ``(False, reason)``. The UI and the CLI show that warning; it is never silent.

The limits and the sandbox mode come from ``analysis.service.settings``. See ``docs/worker.md``.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable

from analysis.errors import ExplorerError
from analysis.service.settings import REPO_ROOT, Limits

BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
JOB_TOKEN_ENV = "XLA_EXPLORER_JOB_TOKEN"
LIMITS_ENV = "XLA_EXPLORER_RLIMITS"
UID_BASE = 61000  # worker slot N runs as uid/gid UID_BASE + N when the app runs as root


def gpu_device_nodes() -> list[str]:
    return sorted(p for p in glob.glob("/dev/nvidia*") if not os.path.isdir(p) or p.endswith("caps"))


# ----------------------------------------------------------------------------- status

_probe_lock = threading.Lock()
_bwrap_works: tuple[bool, str] | None = None  # bubblewrap probed once per process


def sandbox_status(limits: Limits | None = None, refresh: bool = False) -> tuple[bool, str]:
    """``(isolated, reason)``: whether workers started with ``limits`` (default: the settings)
    run inside bubblewrap. False when the settings turn the sandbox off (any way they can: the
    settings file, ``XLA_EXPLORER_SANDBOX``, a ``Limits`` handed in) or bubblewrap cannot run."""
    try:
        mode = (limits or Limits.from_env()).sandbox
    except ExplorerError as e:  # unreadable settings: say so where the warning is shown
        return False, f"the settings cannot be read ({e.one_line()}): user code would run unsandboxed"
    if mode == "off":
        return False, ("sandbox turned off in the settings (sandbox = \"off\" or XLA_EXPLORER_SANDBOX=off): "
                       "user code runs with resource limits only")
    return bwrap_status(refresh)


def bwrap_status(refresh: bool = False) -> tuple[bool, str]:
    """Whether bubblewrap can make a sandbox on this machine: probed once (a tiny sandbox that
    must come up without network) and remembered; ``refresh`` probes again."""
    global _bwrap_works
    with _probe_lock:
        if _bwrap_works is None or refresh:
            _bwrap_works = _probe_bwrap()
        return _bwrap_works


def _probe_bwrap() -> tuple[bool, str]:
    if not os.path.exists(BWRAP):
        return False, "bubblewrap (bwrap) is not installed: user code runs with resource limits only"
    scratch = tempfile.mkdtemp(prefix="xla-explorer-probe-")
    try:
        argv = _bwrap_argv(scratch, slot=0, gpu=False) + ["/usr/bin/true"]
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=_sandbox_env(None))
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"bubblewrap cannot start ({e}): user code runs with resource limits only"
        if p.returncode != 0:
            why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
            return False, f"bubblewrap cannot create a sandbox here ({why}): user code runs with resource limits only"
        return True, "isolated: bubblewrap sandbox without network, read-only system, private /tmp"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ----------------------------------------------------------------------------- command line


def _ancestors(path: str) -> list[str]:
    out = []
    p = os.path.dirname(path)
    while p and p != "/":
        out.append(p)
        p = os.path.dirname(p)
    return out[::-1]


def _ro_paths() -> list[str]:
    """Host paths the worker needs, read-only: interpreter, venv, our code."""
    paths = [os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), sys.prefix,
             os.path.join(REPO_ROOT, "analysis"), os.path.join(REPO_ROOT, "sample_models")]
    exe_dir = os.path.dirname(os.path.realpath(sys.executable))
    if not any(exe_dir == p or exe_dir.startswith(p + "/") for p in paths):
        paths.append(exe_dir)
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):  # e.g. a CUDA driver outside /usr
        if d and os.path.isdir(d):
            paths.append(os.path.realpath(d))
    out: list[str] = []
    for p in paths:
        if p.startswith("/usr/") or p == "/usr" or not os.path.exists(p):
            continue
        if p not in out:
            out.append(p)
    # Parents before children so a child bind lands on top of its parent's.
    return sorted(out, key=lambda p: (p.count("/"), p))


def _bwrap_argv(scratch: str, slot: int, gpu: bool) -> list[str]:
    a = [BWRAP, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
         "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    root = os.geteuid() == 0
    if not root:
        a += ["--unshare-user"]
    else:
        # Keep just enough capability for setpriv to drop to the slot's uid; then none at all.
        a += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    a += ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = "/" + top
        if os.path.islink(p):
            a += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            a += ["--ro-bind", p, p]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/nsswitch.conf"):
        if os.path.exists(f):
            a += ["--ro-bind", f, f]
    a += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
    made = {"/tmp"}
    for p in _ro_paths():
        for d in _ancestors(p):
            if d not in made:
                a += ["--perms", "0755", "--dir", d]
                made.add(d)
        a += ["--ro-bind", p, p]
        made.add(p)
    a += ["--bind", scratch, "/scratch", "--chdir", "/scratch"]
    if gpu:
        for node in gpu_device_nodes():
            a += ["--dev-bind", node, node]
        if os.path.isdir("/sys"):
            a += ["--ro-bind", "/sys", "/sys"]
    if root:
        uid = UID_BASE + slot
        a += ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
              "--bounding-set=-all", "--no-new-privs", "--"]
    return a


def _sandbox_env(token: str | None, extra: dict | None = None) -> dict:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/scratch", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
           "PYTHONPATH": REPO_ROOT, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "XDG_CACHE_HOME": "/scratch/.cache", "MPLCONFIGDIR": "/scratch/.mpl",
           "TF_CPP_MIN_LOG_LEVEL": "2", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    for k in ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "XLA_FLAGS", "JAX_ENABLE_X64"):
        if os.environ.get(k):
            env[k] = os.environ[k]
    if token:
        env[JOB_TOKEN_ENV] = token
    env.update(extra or {})
    return env


# ----------------------------------------------------------------------------- slots

_slot_lock = threading.Lock()
_slots_used: set[int] = set()


def _take_slot() -> int:
    with _slot_lock:
        n = 0
        while n in _slots_used:
            n += 1
        _slots_used.add(n)
        return n


def _give_slot(n: int) -> None:
    with _slot_lock:
        _slots_used.discard(n)


def _tasks_of_uid(uid: int) -> int:
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                st = f.read()
        except OSError:
            continue
        m = re.search(r"^Uid:\s+(\d+)", st, re.M)
        t = re.search(r"^Threads:\s+(\d+)", st, re.M)
        if m and int(m.group(1)) == uid:
            n += int(t.group(1)) if t else 1
    return n


# ----------------------------------------------------------------------------- processes


def processes_with_token(token: str) -> list[int]:
    """Pids of live processes started for the job whose environment carries ``token``."""
    needle = f"{JOB_TOKEN_ENV}={token}".encode()
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue
        if state != b"Z" and needle in env.split(b"\0"):
            out.append(int(pid))
    return out


def kill_job_processes(token: str, tries: int = 20) -> list[int]:
    """SIGKILL every process of a job (found by its token); returns the ones that would not die."""
    left: list[int] = []
    for _ in range(tries):
        left = processes_with_token(token)
        if not left:
            return []
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
    return processes_with_token(token)


# ----------------------------------------------------------------------------- running


@dataclass
class WorkerResult:
    message: dict | None  # the worker's final protocol message ({"bundle"|"error"|"probe": ...})
    returncode: int | None
    stderr_tail: str
    isolated: bool
    limit_hit: str | None = None  # "timeout" | "output" | "cancelled" when the parent killed the worker
    token: str = ""  # the job's token (see processes_with_token)


# Tokens of this process's recent jobs, newest last (tests check none of them left a process).
recent_tokens: collections.deque = collections.deque(maxlen=256)


_SIGNAL_NAMES = {signal.SIGSEGV: "segmentation fault", signal.SIGKILL: "killed", signal.SIGABRT: "aborted",
                 signal.SIGXCPU: "CPU time limit", signal.SIGXFSZ: "file size limit", signal.SIGBUS: "bus error",
                 signal.SIGILL: "illegal instruction", signal.SIGTERM: "terminated"}


def run_worker(job: dict, limits: Limits | None = None, progress: Callable[[str], None] | None = None,
               cancel: threading.Event | None = None) -> WorkerResult:
    """Start one sandboxed worker for ``job`` (a Job as a dict), feed it, read its answer.

    Whatever the worker does, this returns (after at most ``limits.timeout_s`` plus a moment)
    and no process of the job is left running."""
    limits = limits or Limits.from_env()
    use_bwrap, reason = sandbox_status(limits)
    if not use_bwrap and limits.sandbox == "require":
        raise ExplorerError("limit", f"refusing to run untrusted code without a sandbox: {reason}")
    gpu = bool(gpu_device_nodes())
    token = secrets.token_hex(8)
    recent_tokens.append(token)
    slot = _take_slot()
    scratch = tempfile.mkdtemp(prefix="xla-explorer-job-")
    root = os.geteuid() == 0
    rl = {"cpu_s": limits.cpu_s, "file_mb": limits.file_mb}
    # CUDA reserves far more address space than it uses, so wherever its libraries load (a GPU
    # here, or a compile for a GPU target without one) memory is bounded by the data segment;
    # an address-space limit makes them crash (a segfault in the worker).
    cuda = gpu or bool(job.get("gpu_target"))
    rl["data_mb" if cuda else "as_mb"] = limits.memory_mb
    if use_bwrap and root:
        os.chown(scratch, UID_BASE + slot, UID_BASE + slot)
        rl["nproc"] = limits.nproc + _tasks_of_uid(UID_BASE + slot)
    elif not root:
        rl["nproc"] = limits.nproc + _tasks_of_uid(os.getuid())
    # (root without bwrap: root ignores RLIMIT_NPROC; the wall-clock kill still bounds it.)
    worker = ["-m", "analysis.service.worker_main"]
    if use_bwrap:
        argv = _bwrap_argv(scratch, slot, gpu) + [sys.executable] + worker
        env = _sandbox_env(token, {LIMITS_ENV: json.dumps(rl)})
        cwd = scratch
    else:
        # A shell between us and the worker, so that os.kill(os.getppid()) hits the shell, not us.
        argv = ["/bin/sh", "-c", '"$@"; exit $?', "sh", sys.executable] + worker
        env = dict(os.environ, PYTHONPATH=REPO_ROOT, HOME=scratch, TMPDIR=scratch, PYTHONUNBUFFERED="1",
                   XLA_PYTHON_CLIENT_PREALLOCATE="false", **{JOB_TOKEN_ENV: token, LIMITS_ENV: json.dumps(rl)})
        cwd = scratch
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=cwd, env=env, start_new_session=True)
    except OSError as e:
        _give_slot(slot)
        shutil.rmtree(scratch, ignore_errors=True)
        raise ExplorerError("run", f"cannot start the worker: {e}") from None
    try:
        def kill():
            _kill_group(proc)
            for pid in processes_with_token(token):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

        res = _talk(proc, job, limits, progress, cancel, use_bwrap, kill)
        res.token = token
        return res
    finally:
        _kill_group(proc)
        kill_job_processes(token)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        _give_slot(slot)
        shutil.rmtree(scratch, ignore_errors=True)


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _talk(proc, job: dict, limits: Limits, progress, cancel, isolated: bool, kill) -> WorkerResult:
    cap = limits.output_mb * 1024 * 1024
    total = [0]
    hit: list[str] = []
    stderr_tail = bytearray()
    lock = threading.Lock()

    def over(n: int) -> bool:
        with lock:
            total[0] += n
            if total[0] > cap and not hit:
                hit.append("output")
                kill()
            return bool(hit)

    def drain_err():
        while True:
            chunk = proc.stderr.read1(65536) if hasattr(proc.stderr, "read1") else proc.stderr.read(65536)
            if not chunk:
                return
            stderr_tail.extend(chunk)
            del stderr_tail[:-16384]
            if over(len(chunk)):
                return

    def feed():
        try:
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    t_err = threading.Thread(target=drain_err, daemon=True)
    t_err.start()
    threading.Thread(target=feed, daemon=True).start()

    def on_timeout():
        if proc.poll() is None and not hit:
            hit.append("timeout")
        kill()

    timer = threading.Timer(limits.timeout_s, on_timeout)
    timer.daemon = True
    timer.start()
    watcher = None
    if cancel is not None:
        def watch():
            while proc.poll() is None:
                if cancel.wait(0.2):
                    if not hit:
                        hit.append("cancelled")
                    kill()
                    return
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
    final = None
    try:
        buf = b""
        while True:
            chunk = proc.stdout.read1(65536)
            if not chunk:
                break
            if over(len(chunk)):
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(msg, dict):
                    continue
                if "progress" in msg:
                    if progress:
                        try:
                            progress(str(msg["progress"]))
                        except Exception:  # noqa: BLE001 - a caller's callback must not kill the job
                            pass
                elif final is None and any(k in msg for k in ("bundle", "error", "probe")):
                    final = msg
        try:
            proc.wait(timeout=max(1.0, limits.timeout_s))
        except subprocess.TimeoutExpired:
            kill()
            proc.wait(timeout=5)
    finally:
        timer.cancel()
    t_err.join(timeout=2)
    tail = bytes(stderr_tail).decode("utf-8", "replace")
    return WorkerResult(final if not hit else None, proc.returncode, tail, isolated, hit[0] if hit else None)


def describe_failure(res: WorkerResult, limits: Limits, filename: str | None = None,
                     source: str | None = None) -> ExplorerError:
    """An ExplorerError for a worker that gave no result (killed, crashed, exited)."""
    line, excerpt = _last_user_line(res.stderr_tail, filename, source)
    if res.limit_hit == "timeout":
        return ExplorerError("limit", f"the job took longer than the time limit ({limits.timeout_s:g} s) and was stopped",
                             filename, line, None, excerpt)
    if res.limit_hit == "output":
        return ExplorerError("limit", f"the job wrote more than the output limit ({limits.output_mb} MB) and was stopped",
                             filename, line, None, excerpt)
    if res.limit_hit == "cancelled":
        return ExplorerError("run", "the job was cancelled", filename)
    rc = res.returncode
    sig = -rc if rc is not None and rc < 0 else (rc - 128 if rc is not None and 128 < rc < 160 else None)
    last = next((ln for ln in reversed(res.stderr_tail.strip().splitlines()) if ln.strip()), "")
    if "MemoryError" in res.stderr_tail or "Cannot allocate memory" in res.stderr_tail:
        return ExplorerError("limit", f"out of memory (limit {limits.memory_mb} MB)", filename, line, None, excerpt)
    if sig == signal.SIGXCPU:
        return ExplorerError("limit", f"the job used more than the CPU limit ({limits.cpu_s} s)", filename, line, None, excerpt)
    if sig is not None:
        try:
            name = _SIGNAL_NAMES.get(signal.Signals(sig), signal.Signals(sig).name)
        except ValueError:
            name = f"signal {sig}"
        return ExplorerError("run", f"the worker crashed ({name})", filename, line, None, excerpt)
    return ExplorerError("run", f"the worker ended without a result (exit {rc})" + (f": {last[:160]}" if last else ""),
                         filename, line, None, excerpt)


def _last_user_line(stderr: str, filename: str | None, source: str | None = None) -> tuple[int | None, str | None]:
    """The last line of the user's file named in a traceback or faulthandler dump."""
    if not filename:
        return None, None
    found = None
    pat = r'File "([^"]+)", line (\d+)'
    dump = stderr.rfind("most recent call first")  # faulthandler: innermost frame first
    if dump >= 0:
        for m in re.finditer(pat, stderr[dump:]):
            if m.group(1) == filename:
                found = int(m.group(2))
                break
    else:  # a Python traceback: innermost frame last
        for m in re.finditer(pat, stderr):
            if m.group(1) == filename:
                found = int(m.group(2))
    excerpt = None
    if found and source:
        lines = source.splitlines()
        if 0 < found <= len(lines):
            excerpt = lines[found - 1].strip()[:160]
    return found, excerpt
