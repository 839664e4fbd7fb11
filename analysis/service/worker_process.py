"""One worker process, from the parent's side: started (in the bubblewrap sandbox, or with the
limits only), fed its job, read to its answer, ended with everything it started.

``run_worker`` is the whole of it for one job. The process (``WorkerProcess``) holds a slot (a
uid, ``analysis.service.slots``), a job token that every process of the job inherits, and the
job-wide limits and their watchdog (``analysis.service.cgroup``); ``close`` kills every process
of the job and gives the slot back. The conversation (``_Conversation``) writes the job to the
worker's stdin, keeps the tail of its stderr, and reads its stdout line by line: progress
phases, the early messages and the final answer (``analysis.service.messages``), while the output cap, the
wall clock and a cancel each stop the worker (the first of them is the limit it hit). With
spare workers on (``keep_spare``) a job takes the worker started ahead for its kind
(``analysis.service.spare``). The protocol is in ``docs/worker.md``."""

from __future__ import annotations

import atexit
import collections
import json
import os
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

import re2

from analysis import tuning
from analysis.errors import ExplorerError
from analysis.service import cgroup, runtimes, seccomp
from analysis.service.job import PHASES, Job, job_devices, names_torch
from analysis.service.sandbox import (PASSED_ENV, bwrap_argv, cuda_plugin_installed, gpu_device_nodes,
                                      sandbox_env, sandbox_status, torch_cuda_installed, use_seccomp)
from analysis.service.settings import REPO_ROOT, Limits
from analysis.service.slots import JOB_TOKEN_ENV, give_slot, kill_job_processes, processes_with_token, take_slot, \
    tasks_of_uid
from analysis.service.messages import EARLY, FINAL, Decisions, Failure, Message, Preview, Progress, Texts
from analysis.service.messages import read as read_message
from analysis.service.spare import SPARE_ENV, SparePool

LIMITS_ENV = "XLA_EXPLORER_RLIMITS"


# A worker without a GPU compiles the model's own eager ops (the inputs it makes: a gallery
# model's jax.random weights are two dozen small compiles) at LLVM's O0, so the model loads
# sooner (docs/performance.md). Every compile the user is shown, measured or
# timed sets XLA's default back (``analysis.compile.stages.FULL_OPTIMIZATION``). The operator's
# own XLA_FLAGS come after, so a level set there wins. (A GPU worker is left as it is: that
# the default comes back byte for byte is checked on XLA:CPU only.)
EAGER_XLA_FLAGS = "--xla_backend_optimization_level=0"


# A job's devices on the CPU: XLA's host platform split into that many devices, read once when
# JAX starts its backends, so it is set in the worker's environment before it imports JAX.
# (After the operator's own flags: the job's count wins over one set there.)
DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def worker_xla_flags(gpu: bool, devices: int = 1) -> str | None:
    """The XLA_FLAGS a worker runs with (None: none) for a job on ``devices`` devices."""
    own = os.environ.get("XLA_FLAGS", "").strip()
    count = f"{DEVICE_COUNT_FLAG}={devices}" if devices > 1 else ""
    if gpu:
        return f"{own} {count}".strip() or None
    return f"{EAGER_XLA_FLAGS} {own} {count}".strip()


@dataclass
class WorkerResult:
    message: Message | None  # the worker's final message (messages.FINAL: Answer, Measured, Failure, Probe)
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


# The worker's progress phases the parent passes on (anything else is dropped), and how many.
MAX_PROGRESS = 200


def run_worker(job: dict, limits: Limits | None = None, progress: Callable[[str], None] | None = None,
               cancel: threading.Event | None = None, preview: Callable[[dict], None] | None = None,
               texts: Callable[[dict], None] | None = None,
               decisions: Callable[[dict], None] | None = None,
               hold: threading.Event | None = None) -> WorkerResult:
    """Start one sandboxed worker for ``job`` (a Job as a dict), feed it, read its answer.
    ``texts``, ``decisions`` and ``preview`` receive the value of the worker's ``{"texts": ...}``
    messages (its HLO as XLA dumps it and once compiled: at most ``messages.EARLY``), of its
    ``{"decisions": ...}`` and of its first ``{"preview": ...}``, as it sent them (untrusted: the
    caller checks them), while the worker goes on. With ``hold``, the worker's stdin stays open
    after the job until ``hold`` is set (or the job ends): a worker that sent a preview waits for
    that (at most ``worker_main.PREVIEW_HOLD_S``) before it reads the rest and measures, so the
    page that draws the preview has the cores. With spare workers on (``keep_spare``), the
    worker is the one started for a job like this one beforehand, if there is one.

    Whatever the worker does, this returns (after at most ``limits.timeout_s`` plus a moment)
    and no process of the job is left running."""
    limits = limits or Limits.from_env()
    use_bwrap, reason = sandbox_status(limits)
    if not use_bwrap and limits.sandbox == "require":
        raise ExplorerError("limit", f"refusing to run untrusted code without a sandbox: {reason}")
    runtime = runtimes.resolve(job.get("jax"), say=lambda m: progress and _call(progress, "runtime"))
    kind = WorkerKind.of_job(job, limits, use_bwrap, runtime.python)
    w = spare.take(kind) or WorkerProcess(kind)
    res = None
    try:
        talk = _Conversation(w.proc, limits, w.kill, progress, {Preview: preview, Texts: texts,
                                                                Decisions: decisions})
        res = talk.run(job, cancel, isolated=use_bwrap, hold=hold)
        res.token = w.token
        return res
    finally:
        w.close(res)
        spare.after(kind)


@dataclass(frozen=True)
class WorkerKind:
    """What a worker is started with before it reads its job: a spare serves only a job of the
    same kind (its limits, sandbox and devices are set as it starts)."""

    limits: Limits
    use_bwrap: bool
    gpu: bool
    cuda: bool
    devices: int = 1  # the host devices it starts with (``worker_xla_flags``)
    python: str = sys.executable  # the runtime's interpreter (``analysis.service.runtimes``)

    @classmethod
    def of(cls, limits: Limits, use_bwrap: bool, gpu_target: bool = False, devices: int = 1,
           python: str | None = None, torch: bool = False) -> WorkerKind:
        """The kind of worker for jobs under ``limits`` on this machine (``gpu_target``: a
        compile for a GPU target described without the GPU) on ``devices`` devices, run by
        ``python`` (a runtime's; None: this process's); ``torch``: the job's code names PyTorch."""
        gpu = bool(gpu_device_nodes())
        python = python or sys.executable
        # CUDA reserves far more address space than it uses, so wherever its libraries load (a GPU
        # here, a compile for a GPU target without one, a PyTorch job where torch is a CUDA build)
        # memory is bounded by the data segment; an address-space limit makes them crash (a
        # segfault, or std::bad_alloc as torch loads). The job-wide limit bounds memory either way.
        cuda = gpu or gpu_target or cuda_plugin_installed() or (torch and torch_cuda_installed(python))
        return cls(limits, use_bwrap, gpu, cuda, devices, python)

    @classmethod
    def of_job(cls, job: dict, limits: Limits, use_bwrap: bool, python: str | None = None) -> WorkerKind:
        """The kind of worker ``job`` (a Job as a dict) runs in, its runtime's ``python`` given."""
        as_job = Job.from_dict(job)
        return cls.of(limits, use_bwrap, gpu_target=bool(job.get("gpu_target")), devices=job_devices(as_job),
                      python=python, torch=names_torch(as_job))

    def key(self) -> tuple:
        lim = self.limits
        # (the wall clock and the output cap are the parent's, from the job's own limits)
        return (lim.cpu_s, lim.memory_mb, lim.nproc, lim.file_mb, lim.tmp_mb, lim.scratch_mb, lim.sandbox,
                self.use_bwrap, self.gpu, self.cuda, self.devices, self.python,
                tuple(os.environ.get(k, "") for k in PASSED_ENV))


class WorkerProcess:
    """One worker process, started: its slot (uid), job token, job-wide limits and watchdog.
    ``close`` ends it and everything it started, and gives the slot back."""

    def __init__(self, kind: WorkerKind, spare: bool = False):
        limits, use_bwrap, gpu, cuda = kind.limits, kind.use_bwrap, kind.gpu, kind.cuda
        self.kind, self.born = kind, time.monotonic()
        self.token = token = secrets.token_hex(8)
        recent_tokens.append(token)
        self.slot = slot = take_slot()
        root = os.geteuid() == 0
        rl = {"cpu_s": limits.cpu_s, "file_mb": limits.file_mb}
        rl["data_mb" if cuda else "as_mb"] = limits.memory_mb
        if (use_bwrap and root) or not root:
            rl["nproc"] = limits.nproc + (0 if use_bwrap and root else tasks_of_uid(os.getuid()))
        # (root without bwrap: root ignores RLIMIT_NPROC; the job-wide limit and the wall clock bound it.)
        self.scratch = scratch = None
        self.job_limits = job_limits = cgroup.JobLimits(token, limits.memory_mb, limits.nproc)
        fd = None
        worker = ["-m", "analysis.service.worker_main"]
        extra = {LIMITS_ENV: json.dumps(rl), **({SPARE_ENV: "1"} if spare else {})}
        if use_bwrap:
            fd = seccomp.program_fd() if use_seccomp() else None
            argv = bwrap_argv(slot.n, gpu, limits, fd, kind.python) + [kind.python] + worker
            env = sandbox_env(token, extra)
            cwd = "/"
        else:
            # A shell between us and the worker, so that os.kill(os.getppid()) hits the shell, not us.
            self.scratch = scratch = tempfile.mkdtemp(prefix="xla-explorer-job-")
            argv = ["/bin/sh", "-c", '"$@"; exit $?', "sh", kind.python] + worker
            env = dict(os.environ, PYTHONPATH=REPO_ROOT, HOME=scratch, TMPDIR=scratch, PYTHONUNBUFFERED="1",
                       XLA_PYTHON_CLIENT_PREALLOCATE="false", **{JOB_TOKEN_ENV: token}, **extra)
            cwd = scratch
        env.pop("XLA_FLAGS", None)
        flags = worker_xla_flags(gpu, kind.devices)
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


class _Conversation:
    """One job's exchange with its worker: the job written to its stdin, the tail of its stderr
    kept, its stdout read line by line (progress, early messages, the answer); the output cap,
    the wall clock and a cancel each kill the worker, and the first of them is the limit hit."""

    STDERR_TAIL = 16384  # bytes of the worker's stderr kept (describe_failure reads them)

    def __init__(self, proc, limits: Limits, kill: Callable[[], None], progress: Callable[[str], None] | None,
                 early: dict):
        self.proc, self.limits, self.kill, self.progress = proc, limits, kill, progress
        self.early = {k: fn for k, fn in early.items() if fn is not None}
        self.left = dict(EARLY)  # how many more of each early message are passed on
        self.cap = limits.output_mb * 1024 * 1024
        self.lock = threading.Lock()  # guards read and hit (the reading threads and the timers)
        self.read = 0  # bytes read from stdout and stderr together
        self.hit: str | None = None  # "output" | "timeout" | "cancelled": why the worker was killed
        self.stderr_tail = bytearray()
        self.final: Message | None = None  # the answer (one of messages.FINAL)
        self.phases_said = 0
        self.last_phase: str | None = None

    def run(self, job: dict, cancel: threading.Event | None, isolated: bool,
            hold: threading.Event | None = None) -> WorkerResult:
        proc = self.proc
        t_err = threading.Thread(target=self._drain_stderr, daemon=True)
        t_err.start()
        threading.Thread(target=self._feed, args=(job, hold), daemon=True).start()
        timer = threading.Timer(self.limits.timeout_s, self._on_timeout)
        timer.daemon = True
        timer.start()
        if cancel is not None:
            threading.Thread(target=self._watch, args=(cancel,), daemon=True).start()
        try:
            self._read_stdout()
            try:
                proc.wait(timeout=max(1.0, self.limits.timeout_s))
            except subprocess.TimeoutExpired:
                self.kill()
                proc.wait(timeout=5)
        finally:
            timer.cancel()
            if hold is not None:  # the job is over: nothing waits for it any more (_feed ends)
                hold.set()
        t_err.join(timeout=2)
        tail = bytes(self.stderr_tail).decode("utf-8", "replace")
        return WorkerResult(self.final if self.hit is None else None, proc.returncode, tail, isolated, self.hit)

    def _count(self, n: int) -> bool:
        """Count ``n`` bytes read; past the output cap the worker is killed. True once the worker
        was stopped for any limit (reading ends)."""
        with self.lock:
            self.read += n
            if self.read > self.cap and self.hit is None:
                self.hit = "output"
                self.kill()
            return self.hit is not None

    def _stop(self, why: str) -> None:
        with self.lock:
            if self.hit is None:
                self.hit = why
        self.kill()

    def _on_timeout(self) -> None:
        if self.proc.poll() is None:
            self._stop("timeout")
        else:
            self.kill()

    def _watch(self, cancel: threading.Event) -> None:
        while self.proc.poll() is None:
            if cancel.wait(0.2):
                self._stop("cancelled")
                return

    def _feed(self, job: dict, hold: threading.Event | None = None) -> None:
        """The job as one line (JSON escapes every newline in it), then stdin closed: at once,
        or once ``hold`` is set (``run_worker``)."""
        try:
            self.proc.stdin.write(json.dumps(job).encode() + b"\n")
            self.proc.stdin.flush()
            if hold is not None:
                hold.wait()
            self.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):  # (ValueError: closed as the job ended)
            pass

    def _drain_stderr(self) -> None:
        err = self.proc.stderr
        while True:
            chunk = err.read1(65536) if hasattr(err, "read1") else err.read(65536)
            if not chunk:
                return
            self.stderr_tail.extend(chunk)
            del self.stderr_tail[:-self.STDERR_TAIL]
            if self._count(len(chunk)):
                return

    def _read_stdout(self) -> None:
        reader = LineReader()
        while True:
            chunk = self.proc.stdout.read1(65536)
            if not chunk or self._count(len(chunk)):
                return
            for line in reader.feed(chunk):
                if self.final is None and line.startswith(b"{"):
                    self._message(line)

    def _message(self, line: bytes) -> None:
        many = wire_containers(line)
        if many is not None:  # refused before anything is built of it
            if self.final is None:
                self.final = Failure(ExplorerError("limit", f"the worker's answer holds {many:,} JSON objects and "
                                                            f"lists, more than the {MAX_WIRE_CONTAINERS:,} a bundle "
                                                            "may").to_dict())
            return
        try:
            with tuning.building():  # a big bundle's JSON is hundreds of thousands of objects
                msg = read_message(json.loads(line))
        except (ValueError, RecursionError):
            return
        if isinstance(msg, Progress):
            self._progress(msg.phase)
        elif type(msg) in EARLY:
            fn = self.early.get(type(msg)) if self.left[type(msg)] > 0 else None
            if fn is not None:
                self.left[type(msg)] -= 1
                (value,) = vars(msg).values()
                _call(fn, value)
        elif isinstance(msg, FINAL):
            self.final = msg

    def _progress(self, phase) -> None:
        """Pass a phase on: one of PHASES (with a detail after a colon), short, not the one said
        last, at most MAX_PROGRESS of them."""
        if self.progress and isinstance(phase, str) and len(phase) <= 40 and phase.split(":", 1)[0] in PHASES \
                and phase != self.last_phase and self.phases_said < MAX_PROGRESS:
            self.phases_said += 1
            self.last_phase = phase
            _call(self.progress, phase)


# The most JSON objects and lists a worker's message may hold: each costs the parent 56-64 bytes
# once parsed, so the bound is what the parse may take (a 96-layer program's bundle holds
# far fewer: docs/worker.md, "The gate"). Counted before the message is parsed.
MAX_WIRE_CONTAINERS = 1_500_000
_JSON_STRING = re2.compile(rb'"(?:[^"\\]|\\.)*"')


def wire_containers(line: bytes) -> int | None:
    """How many JSON objects and lists ``line`` holds when that is more than
    ``MAX_WIRE_CONTAINERS``, else None. Linear in the line: brackets counted at C speed, and
    only where they are too many, counted again outside the strings (an HLO text in a string
    has brackets of its own), the strings taken out by RE2."""
    n = line.count(b"{") + line.count(b"[")
    if n <= MAX_WIRE_CONTAINERS:
        return None
    bare = _JSON_STRING.sub(b"", line)
    n = bare.count(b"{") + bare.count(b"[")
    return n if n > MAX_WIRE_CONTAINERS else None


def _call(fn: Callable, arg) -> None:
    try:
        fn(arg)
    except Exception:  # noqa: BLE001 - a caller's callback must not kill the job
        pass


# The spare worker (analysis.service.spare): one worker of the last job's kind started ahead
# (one started for a job about to be handed over reads it at once, and prepares its parser beside
# XLA as a fresh worker does: prepared first, that 0.2 s came before the compile, docs/performance.md)
spare = SparePool(start=lambda kind: WorkerProcess(kind, spare=True), start_now=lambda kind: WorkerProcess(kind))
atexit.register(spare.drop)


def start_ahead(job: dict, limits: Limits | None = None):
    """The worker ``job`` (a Job as a dict) will run in, started now, before the caller is ready to
    hand the job over: the command line starts it before its own imports, so that the worker's
    Python and JAX start beside them (docs/performance.md, "Tenth pass"). It waits as the spare
    (``analysis.service.spare``), serving only a job of its kind and no other after it; the caller
    gives it to ``spare.discard`` once the job is done, which ends it if no job took it. Only with
    the bubblewrap sandbox, as every spare, and for this process's own jax (a runtime's may have
    to be made first): otherwise None, and the job starts its own worker."""
    limits = limits or Limits.from_env()
    use_bwrap, _ = sandbox_status(limits)
    if not use_bwrap or job.get("jax"):
        return None
    try:
        return spare.start_now(WorkerKind.of_job(job, limits, use_bwrap))
    except ExplorerError:  # a bad job says so when it is run
        return None


def keep_spare(on: bool = True, limits: Limits | None = None) -> None:
    """Spare workers on (with one started now for a CPU job under ``limits``) or off (the spare
    ended). Only with the bubblewrap sandbox: without it a worker's limits depend on the moment
    it starts."""
    spare.keep(on)
    if on:
        limits = limits or Limits.from_env()
        use_bwrap, _ = sandbox_status(limits)
        spare.after(WorkerKind.of(limits, use_bwrap), delay=0.0)
