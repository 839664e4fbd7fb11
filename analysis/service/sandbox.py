"""The sandbox: how a worker process is started, confined, limited and cleaned up.

Every model that is not a built-in gallery entry runs in a worker (``analysis.service.worker``) that
this module starts inside bubblewrap (``bwrap``):

- new network, PID, IPC and UTS namespaces: no network at all, the worker sees only its own
  processes, and when the sandbox's init dies every process in it dies;
- a fresh root with only ``/usr`` (read-only), the Python interpreter's prefix and the virtual
  environment (read-only), the repository's ``analysis/`` and ``sample_models/`` (read-only),
  a private ``/tmp`` and ``/scratch`` (tmpfs of a bounded size, gone with the sandbox); the
  home folder, the rest of the repository and the app's store are not there at all;
- NVIDIA device nodes (``/dev/nvidia*``) and ``/sys`` (read-only) are bound only when present;
- when the app runs as root, the worker drops to an unprivileged user id of its own (one per
  worker slot, slots shared by every process on the machine through a lock folder) with no
  capabilities and ``no_new_privs``, so the process limit is enforced.

Resource limits (``Limits``): wall-clock timeout (the whole sandbox is killed), CPU seconds,
address space (or data segment on GPU machines, where CUDA needs a huge address space) per
process, memory and processes for the whole job together (``analysis.service.cgroup``: a cgroup
per job where the machine allows one, else a watchdog), the sizes of ``/tmp`` and ``/scratch``
(tmpfs, ``bwrap --size``), file size, and the bytes read back from the worker's stdout/stderr.
New user namespaces are refused inside the sandbox (``bwrap --disable-userns`` or the seccomp
filter of ``analysis.service.seccomp``).

Where bubblewrap cannot run, workers run with the limits only, and ``sandbox_status()`` says
so: ``(False, reason)``. The UI and the CLI show that warning; it is never silent.

The limits and the sandbox mode come from ``analysis.service.settings``. See ``docs/worker.md``.
"""

from __future__ import annotations

import atexit
import collections
import errno
import fcntl
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
from analysis import tuning
from analysis.service import cgroup, seccomp
from analysis.service.job import PHASES
from analysis.service.settings import REPO_ROOT, Limits

BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
JOB_TOKEN_ENV = "XLA_EXPLORER_JOB_TOKEN"
LIMITS_ENV = "XLA_EXPLORER_RLIMITS"
UID_BASE = 61000  # worker slot N runs as uid/gid UID_BASE + N when the app runs as root
MAX_SLOTS = 512
SLOT_DIR_ENV = "XLA_EXPLORER_SLOT_DIR"


def gpu_device_nodes() -> list[str]:
    return sorted(p for p in glob.glob("/dev/nvidia*") if not os.path.isdir(p) or p.endswith("caps"))


def cuda_plugin_installed() -> bool:
    """JAX's CUDA plugin is installed (found without importing it): JAX then loads the CUDA
    libraries at start, even on a machine without a GPU, and they need a huge address space."""
    import importlib.util
    return any(importlib.util.find_spec(m) is not None for m in ("jax_cuda12_plugin", "jax_cuda13_plugin"))


def gpu_present() -> bool:
    """A GPU JAX can use is here: an NVIDIA device node and JAX's CUDA plugin (checked without
    importing JAX). The one test of it: the workers' sandbox and the app's choices both use it."""
    return bool(gpu_device_nodes()) and cuda_plugin_installed()


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
    fd = seccomp.program_fd() if _use_seccomp() else None
    try:
        argv = _bwrap_argv(slot=0, gpu=False, limits=Limits(), seccomp_fd=fd) + ["/usr/bin/true"]
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=_sandbox_env(None),
                               pass_fds=(fd,) if fd is not None else ())
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"bubblewrap cannot start ({e}): user code runs with resource limits only"
        if p.returncode != 0:
            why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
            return False, f"bubblewrap cannot create a sandbox here ({why}): user code runs with resource limits only"
        return True, "isolated: bubblewrap sandbox without network, read-only system, " + _walls()
    finally:
        if fd is not None:
            os.close(fd)


def _walls() -> str:
    """What bounds a job besides the namespaces, in words (the status line's tail)."""
    f = bwrap_features()
    tmp = "/tmp and /scratch private tmpfs of a bounded size" if "size" in f else \
        "/tmp and /scratch private tmpfs (this bwrap cannot bound their size)"
    if os.geteuid() != 0 and "disable-userns" in f:
        userns = "new user namespaces refused (bwrap --disable-userns)"
    elif _use_seccomp():
        userns = "new user namespaces refused (seccomp)"
    else:
        userns = "new user namespaces NOT refused (no filter for this machine)"
    return f"{tmp}; {userns}; {cgroup.mechanism().describe()}"


_features: frozenset | None = None


def bwrap_features() -> frozenset:
    """The options of the installed bwrap this module uses when present: ``size`` (tmpfs size),
    ``disable-userns``, ``seccomp``."""
    global _features
    if _features is None:
        try:
            text = subprocess.run([BWRAP, "--help"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            text = ""
        _features = frozenset(n for n in ("size", "disable-userns", "seccomp") if f"--{n} " in text)
    return _features


def _use_seccomp() -> bool:
    return seccomp.supported() and "seccomp" in bwrap_features()


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


def _bwrap_argv(slot: int, gpu: bool, limits: Limits, seccomp_fd: int | None = None) -> list[str]:
    feats = bwrap_features()
    a = [BWRAP, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
         "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    root = os.geteuid() == 0
    if not root:
        a += ["--unshare-user"]
        if "disable-userns" in feats:
            a += ["--disable-userns"]
    else:
        # Keep just enough capability for setpriv to drop to the slot's uid; then none at all.
        a += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    if seccomp_fd is not None:
        a += ["--seccomp", str(seccomp_fd)]
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
    a += ["--proc", "/proc", "--dev", "/dev"]
    # /tmp and /scratch (home and working folder) live in host memory: each has a size.
    for mount, mb in (("/tmp", limits.tmp_mb), ("/scratch", limits.scratch_mb)):
        a += ["--perms", "1777"]
        if "size" in feats:
            a += ["--size", str(int(mb) << 20)]
        a += ["--tmpfs", mount]
    made = {"/tmp", "/scratch"}
    for p in _ro_paths():
        for d in _ancestors(p):
            if d not in made:
                a += ["--perms", "0755", "--dir", d]
                made.add(d)
        a += ["--ro-bind", p, p]
        made.add(p)
    a += ["--chdir", "/scratch"]
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


# A worker without a GPU compiles the model's own eager ops (the inputs it makes: a gallery
# model's jax.random weights are two dozen small compiles, 1.4 s of XLA) at LLVM's O0: a
# transformer block loads in 1.0 s instead of 1.8. Every compile the user is shown, measured or
# timed sets XLA's default back (``analysis.compile.stages.FULL_OPTIMIZATION``). The operator's
# own XLA_FLAGS come after, so a level set there wins. (A GPU worker is left as it is: that
# the default comes back byte for byte is checked on XLA:CPU only.)
EAGER_XLA_FLAGS = "--xla_backend_optimization_level=0"


def worker_xla_flags(gpu: bool) -> str | None:
    """The XLA_FLAGS a worker runs with (None: none)."""
    own = os.environ.get("XLA_FLAGS", "").strip()
    if gpu:
        return own or None
    return f"{EAGER_XLA_FLAGS} {own}".strip()


_PASSED_ENV = ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "XLA_FLAGS", "JAX_ENABLE_X64")


def _sandbox_env(token: str | None, extra: dict | None = None) -> dict:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/scratch", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
           "PYTHONPATH": REPO_ROOT, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "XDG_CACHE_HOME": "/scratch/.cache", "MPLCONFIGDIR": "/scratch/.mpl",
           "TF_CPP_MIN_LOG_LEVEL": "2", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    for k in _PASSED_ENV:
        if os.environ.get(k):
            env[k] = os.environ[k]
    if token:
        env[JOB_TOKEN_ENV] = token
    env.update(extra or {})
    return env


# ----------------------------------------------------------------------------- slots
#
# A slot is a worker uid (UID_BASE + N). Slots are shared by every process on the machine (the
# app, a CLI, a second app): slot N is held by holding an flock on <slot dir>/slot-N.lock, which
# the kernel releases when the holder dies, so a crashed process never leaks a slot. A slot whose
# uid still has processes (left by a process that was killed) is skipped.


@dataclass
class Slot:
    n: int
    fd: int | None  # the held lock file; None for the in-process fallback


_slot_lock = threading.Lock()
_slots_used: set[int] = set()  # fallback when the slot folder cannot be used


def slot_dir() -> str:
    d = os.environ.get(SLOT_DIR_ENV)
    if d:
        return d
    base = "/run" if os.geteuid() == 0 and os.path.isdir("/run") and os.access("/run", os.W_OK) else tempfile.gettempdir()
    return os.path.join(base, f"xla-explorer-slots-{os.geteuid()}")


def _safe_slot_dir() -> str | None:
    """The slot folder, made if needed; None if it exists but is not safely ours (another user's,
    a link, writable by others)."""
    d = slot_dir()
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        st = os.lstat(d)
    except OSError:
        return None
    import stat as _stat
    if not _stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return None
    return d


def take_slot() -> Slot:
    """A free worker slot, held until ``give_slot``; free across every process on this machine."""
    root = os.geteuid() == 0
    d = _safe_slot_dir()
    if d is None:
        with _slot_lock:
            n = 0
            while n in _slots_used:
                n += 1
            _slots_used.add(n)
            return Slot(n, None)
    for n in range(MAX_SLOTS):
        try:
            fd = os.open(os.path.join(d, f"slot-{n}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                continue
            continue
        if root and _tasks_of_uid(UID_BASE + n) > 0:  # leftovers of a killed parent still run as it
            os.close(fd)
            continue
        return Slot(n, fd)
    raise ExplorerError("limit", f"all {MAX_SLOTS} worker slots are taken on this machine; try again later")


def give_slot(slot: Slot) -> None:
    if slot.fd is None:
        with _slot_lock:
            _slots_used.discard(slot.n)
    else:
        os.close(slot.fd)


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
    # "timeout" | "output" | "cancelled" when the parent killed the worker; "memory" | "processes"
    # when a job-wide limit (cgroup or watchdog) stopped it
    limit_hit: str | None = None
    token: str = ""  # the job's token (see processes_with_token)
    containment: str = ""  # the mechanism of the job-wide limits ("cgroup v1", "watchdog", ...)


# Tokens of this process's recent jobs, newest last (tests check none of them left a process).
recent_tokens: collections.deque = collections.deque(maxlen=256)


_SIGNAL_NAMES = {signal.SIGSEGV: "segmentation fault", signal.SIGKILL: "killed", signal.SIGABRT: "aborted",
                 signal.SIGXCPU: "CPU time limit", signal.SIGXFSZ: "file size limit", signal.SIGBUS: "bus error",
                 signal.SIGILL: "illegal instruction", signal.SIGTERM: "terminated"}

# The worker's progress phases the parent passes on (anything else is dropped), and how many.
MAX_PROGRESS = 200


# The early messages a worker's reader passes on, at most: its preview once; its HLO texts as
# XLA dumps them (before optimization, optimized) and once compiled, where they differ; the
# fusion decisions it made beside the compile, once.
EARLY_MESSAGES = {"preview": 1, "texts": 3, "decisions": 1}


def run_worker(job: dict, limits: Limits | None = None, progress: Callable[[str], None] | None = None,
               cancel: threading.Event | None = None, preview: Callable[[dict], None] | None = None,
               texts: Callable[[dict], None] | None = None,
               decisions: Callable[[dict], None] | None = None) -> WorkerResult:
    """Start one sandboxed worker for ``job`` (a Job as a dict), feed it, read its answer.
    ``texts``, ``decisions`` and ``preview`` receive the value of the worker's ``{"texts": ...}``
    messages (its HLO as XLA dumps it and once compiled: at most ``EARLY_MESSAGES``), of its
    ``{"decisions": ...}`` and of its first ``{"preview": ...}``, as it sent them (untrusted: the
    caller checks them), while the worker goes on. With spare workers on (``keep_spare``), the
    worker is the one started for a job like this one beforehand, if there is one.

    Whatever the worker does, this returns (after at most ``limits.timeout_s`` plus a moment)
    and no process of the job is left running."""
    limits = limits or Limits.from_env()
    use_bwrap, reason = sandbox_status(limits)
    if not use_bwrap and limits.sandbox == "require":
        raise ExplorerError("limit", f"refusing to run untrusted code without a sandbox: {reason}")
    gpu = bool(gpu_device_nodes())
    # CUDA reserves far more address space than it uses, so wherever its libraries load (a GPU
    # here, or a compile for a GPU target without one) memory is bounded by the data segment;
    # an address-space limit makes them crash (a segfault in the worker).
    cuda = gpu or bool(job.get("gpu_target")) or cuda_plugin_installed()
    kind = _WorkerKind(limits, use_bwrap, gpu, cuda)
    w = _take_spare(kind) or _Worker(kind)
    res = None
    try:
        res = _talk(w.proc, job, limits, progress, cancel, use_bwrap, w.kill,
                    {"preview": preview, "texts": texts, "decisions": decisions})
        res.token = w.token
        return res
    finally:
        w.close(res)
        _spare_after(kind)


@dataclass(frozen=True)
class _WorkerKind:
    """What a worker is started with before it reads its job: a spare serves only a job of the
    same kind (its limits, sandbox and devices are set as it starts)."""

    limits: Limits
    use_bwrap: bool
    gpu: bool
    cuda: bool

    def key(self) -> tuple:
        lim = self.limits
        # (the wall clock and the output cap are the parent's, from the job's own limits)
        return (lim.cpu_s, lim.memory_mb, lim.nproc, lim.file_mb, lim.tmp_mb, lim.scratch_mb, lim.sandbox,
                self.use_bwrap, self.gpu, self.cuda, sys.executable,
                tuple(os.environ.get(k, "") for k in _PASSED_ENV))


class _Worker:
    """One worker process, started: its slot (uid), job token, job-wide limits and watchdog.
    ``close`` ends it and everything it started, and gives the slot back."""

    def __init__(self, kind: _WorkerKind, spare: bool = False):
        limits, use_bwrap, gpu, cuda = kind.limits, kind.use_bwrap, kind.gpu, kind.cuda
        self.kind, self.born = kind, time.monotonic()
        self.token = token = secrets.token_hex(8)
        recent_tokens.append(token)
        self.slot = slot = take_slot()
        root = os.geteuid() == 0
        rl = {"cpu_s": limits.cpu_s, "file_mb": limits.file_mb}
        rl["data_mb" if cuda else "as_mb"] = limits.memory_mb
        if (use_bwrap and root) or not root:
            rl["nproc"] = limits.nproc + (0 if use_bwrap and root else _tasks_of_uid(os.getuid()))
        # (root without bwrap: root ignores RLIMIT_NPROC; the job-wide limit and the wall clock bound it.)
        self.scratch = scratch = None
        self.job_limits = job_limits = cgroup.JobLimits(token, limits.memory_mb, limits.nproc)
        fd = None
        worker = ["-m", "analysis.service.worker_main"]
        extra = {LIMITS_ENV: json.dumps(rl), **({SPARE_ENV: "1"} if spare else {})}
        if use_bwrap:
            fd = seccomp.program_fd() if _use_seccomp() else None
            argv = _bwrap_argv(slot.n, gpu, limits, fd) + [sys.executable] + worker
            env = _sandbox_env(token, extra)
            cwd = "/"
        else:
            # A shell between us and the worker, so that os.kill(os.getppid()) hits the shell, not us.
            self.scratch = scratch = tempfile.mkdtemp(prefix="xla-explorer-job-")
            argv = ["/bin/sh", "-c", '"$@"; exit $?', "sh", sys.executable] + worker
            env = dict(os.environ, PYTHONPATH=REPO_ROOT, HOME=scratch, TMPDIR=scratch, PYTHONUNBUFFERED="1",
                       XLA_PYTHON_CLIENT_PREALLOCATE="false", **{JOB_TOKEN_ENV: token}, **extra)
            cwd = scratch
        env.pop("XLA_FLAGS", None)
        flags = worker_xla_flags(gpu)
        if flags:
            env["XLA_FLAGS"] = flags
        argv = job_limits.join_argv() + argv
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         cwd=cwd, env=env, start_new_session=True,
                                         pass_fds=(fd,) if fd is not None else ())
        except OSError as e:
            job_limits.close()
            give_slot(slot)
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
            raise ExplorerError("run", f"cannot start the worker: {e}") from None
        finally:
            if fd is not None:
                os.close(fd)
        self.killed = threading.Event()
        self._closed = False
        job_limits.watch(self.proc.pid, self.kill, lambda: processes_with_token(token),
                         disk=(scratch, limits.scratch_mb) if scratch else None)

    def kill(self) -> None:
        self.killed.set()
        _kill_group(self.proc)
        for pid in self.job_limits.pids(self.proc.pid, processes_with_token(self.token)):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def alive(self) -> bool:
        return self.proc.poll() is None and not self.killed.is_set()

    def close(self, res: WorkerResult | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        _kill_group(self.proc)
        self.job_limits.close()
        kill_job_processes(self.token)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        give_slot(self.slot)
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
        hit = self.job_limits.read_hit()
        if res is not None:
            if hit and res.limit_hit is None:
                res.limit_hit, res.message = hit, None
            res.containment = self.job_limits.mech.kind


# ----------------------------------------------------------------------------- the spare worker
#
# A worker spends its first 1.3-1.8 s (on the 2-core machine) starting Python and importing JAX
# before it can read its job. With ``keep_spare`` (the app turns it on) one worker is started
# ahead, for a job of the kind the last one was (or the app's default), and waits, having run
# nothing but this project's code, for the next job: that job skips the wait. Each worker still
# serves exactly one job in a sandbox of its own and exits after it (nothing of one job reaches
# the next); the spare holds a slot (a uid) and, idle, about 250 MB of memory. It is started a
# moment after a job ends (``SPARE_DELAY_S``) so that its imports do not compete with the page
# that shows that job's result, and it is replaced after ``SPARE_MAX_AGE_S``.
_spare_lock = threading.Lock()
_spare: _Worker | None = None
_spare_on = False
_spare_timer: threading.Timer | None = None
SPARE_DELAY_S = 0.5
SPARE_MAX_AGE_S = 900.0
SPARE_ENV = "XLA_EXPLORER_SPARE"


def keep_spare(on: bool = True, limits: Limits | None = None) -> None:
    """Spare workers on (with one started now for a CPU job under ``limits``) or off (the spare
    ended). Only with the bubblewrap sandbox: without it a worker's limits depend on the moment
    it starts."""
    global _spare_on
    _spare_on = on
    if not on:
        drop_spare()
        return
    limits = limits or Limits.from_env()
    use_bwrap, _ = sandbox_status(limits)
    gpu = bool(gpu_device_nodes())
    _spare_after(_WorkerKind(limits, use_bwrap, gpu, gpu or cuda_plugin_installed()), delay=0.0)


def spares_kept() -> bool:
    return _spare_on


def drop_spare() -> None:
    """End the spare worker, if there is one."""
    global _spare, _spare_timer
    with _spare_lock:
        w, _spare = _spare, None
        if _spare_timer is not None:
            _spare_timer.cancel()
            _spare_timer = None
    if w is not None:
        w.close()


def spare_token() -> str | None:
    """The job token of the spare worker waiting now (None: none)."""
    with _spare_lock:
        return _spare.token if _spare is not None and _spare.alive() else None


def _take_spare(kind: _WorkerKind) -> _Worker | None:
    global _spare
    with _spare_lock:
        w, _spare = _spare, None
    if w is None:
        return None
    if w.kind.key() == kind.key() and w.alive() and time.monotonic() - w.born < SPARE_MAX_AGE_S:
        return w
    w.close()
    return None


def _waiting_for(kind: _WorkerKind) -> bool:
    """A live spare for jobs of ``kind`` is waiting (called with ``_spare_lock`` held)."""
    return _spare is not None and _spare.alive() and _spare.kind.key() == kind.key()


def _spare_after(kind: _WorkerKind, delay: float | None = None) -> None:
    """A spare for jobs of ``kind``, started after ``delay`` (``SPARE_DELAY_S``) unless one is
    waiting or about to be started."""
    global _spare_timer
    if not _spare_on or not kind.use_bwrap:
        return

    def start() -> None:
        global _spare, _spare_timer
        with _spare_lock:
            _spare_timer = None
            if not _spare_on or _waiting_for(kind):
                return
            old, _spare = _spare, None
        if old is not None:
            old.close()
        try:
            w = _Worker(kind, spare=True)
        except ExplorerError:  # no slot free now: the next job starts its own
            return
        with _spare_lock:
            if _spare is None and _spare_on:
                _spare = w
                return
        w.close()

    with _spare_lock:
        if _spare_timer is not None or _waiting_for(kind):
            return
        _spare_timer = threading.Timer(SPARE_DELAY_S if delay is None else delay, start)
        _spare_timer.daemon = True
        _spare_timer.start()


atexit.register(drop_spare)


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class LineReader:
    """Splits a byte stream into lines in linear time: each byte is copied a bounded number of
    times however the stream is chunked (a flood of bytes without a newline costs one join)."""

    def __init__(self):
        self._parts: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = []
        start = 0
        while True:
            i = chunk.find(b"\n", start)
            if i < 0:
                break
            piece = chunk[start:i]
            if self._parts:
                self._parts.append(piece)
                piece = b"".join(self._parts)
                self._parts = []
            lines.append(piece)
            start = i + 1
        if start < len(chunk):
            self._parts.append(chunk[start:])
        return lines


def _talk(proc, job: dict, limits: Limits, progress, cancel, isolated: bool, kill, early=None) -> WorkerResult:
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
    said = [0, None]  # progress messages passed on, the last one
    early = {k: fn for k, fn in (early or {}).items() if fn is not None}
    left = dict(EARLY_MESSAGES)  # how many of each are passed on
    reader = LineReader()
    try:
        while True:
            chunk = proc.stdout.read1(65536)
            if not chunk:
                break
            if over(len(chunk)):
                break
            for line in reader.feed(chunk):
                if final is not None or not line.startswith(b"{"):
                    continue
                try:
                    with tuning.building():  # a big bundle's JSON is hundreds of thousands of objects
                        msg = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if not isinstance(msg, dict):
                    continue
                if "progress" in msg:
                    phase = msg["progress"]
                    if progress and isinstance(phase, str) and len(phase) <= 40 \
                            and phase.split(":", 1)[0] in PHASES and phase != said[1] and said[0] < MAX_PROGRESS:
                        said[0] += 1
                        said[1] = phase
                        try:
                            progress(phase)
                        except Exception:  # noqa: BLE001 - a caller's callback must not kill the job
                            pass
                elif len(msg) == 1 and next(iter(msg)) in EARLY_MESSAGES:
                    kind = next(iter(msg))
                    fn = early.get(kind) if left.get(kind, 0) > 0 else None
                    if fn is not None:
                        left[kind] -= 1
                        try:
                            fn(next(iter(msg.values())))
                        except Exception:  # noqa: BLE001 - a caller's callback must not kill the job
                            pass
                elif any(k in msg for k in ("bundle", "measured", "error", "probe")):
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
    if res.limit_hit == "memory":
        return ExplorerError("limit", f"the job's processes together used more than the memory limit "
                                      f"({limits.memory_mb} MB; {res.containment or 'job-wide limit'}) and were stopped",
                             filename, line, None, excerpt)
    if res.limit_hit == "processes":
        return ExplorerError("limit", f"the job started more than the process limit ({limits.nproc} processes "
                                      f"and threads; {res.containment or 'job-wide limit'})", filename, line, None, excerpt)
    if res.limit_hit == "scratch":
        return ExplorerError("limit", f"the job wrote more than the scratch limit ({limits.scratch_mb} MB) and was stopped",
                             filename, line, None, excerpt)
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
