"""The worker: compiles (and optionally measures) one job in a separate process.

Protocol (``python -m analysis.worker``): one JSON object on stdin, a ``Job``; the worker
writes JSON lines to stdout: ``{"progress": PHASE}`` while it runs, then exactly one of
``{"bundle": BUNDLE}`` or ``{"error": ERROR}`` where ERROR is an ``ExplorerError`` as a dict.
Anything else the user's code prints goes to stderr, never into the protocol stream.

``run_job`` is the parent's side: it starts the worker, streams progress, and turns every way
a worker can end (crash, kill, garbage output) into a Bundle or an ``ExplorerError``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Callable

from analysis.bundle import Bundle
from analysis.errors import ExplorerError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Job:
    source: str = ""
    filename: str = "<pasted code>"
    name: str = "pasted"
    kind: str = "code"  # "gallery" (source ignored, name is the gallery entry) | "code" | "file"
    backend: str = "auto"
    compiler_options: dict = field(default_factory=dict)
    measure: bool = False
    iterations: int | None = None
    compare_fusion: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, d: dict) -> "Job":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def execute(job: Job, progress: Callable[[str], None] | None = None) -> Bundle:
    """Run a job in this process (the worker's body)."""
    from analysis import run

    if job.kind == "gallery":
        loaded = run.load_gallery(job.name)
    else:
        if progress:
            progress("load")
        loaded = run.load_source(job.source, job.filename, job.name)
    bundle = run.compile_to_bundle(loaded, job.backend, job.compiler_options, progress, source_kind=job.kind)
    if job.measure or job.compare_fusion:
        from analysis import timings

        if job.measure:
            if progress:
                progress("measure")
            timings.measure_bundle(bundle, iterations=job.iterations)
        if job.compare_fusion:
            if progress:
                progress("compare")
            timings.compare_fusion(bundle, loaded, measure=job.measure, iterations=job.iterations)
    return bundle


def _worker_main() -> int:
    out = sys.stdout
    # The user's prints must not corrupt the protocol: route fd 1 to stderr for everything else.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    del out

    def emit(obj):
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    try:
        job = Job.from_dict(json.loads(sys.stdin.read()))
    except (ValueError, TypeError) as e:
        emit({"error": ExplorerError("protocol", f"bad job: {e}").to_dict()})
        return 0
    try:
        bundle = execute(job, lambda p: emit({"progress": p}))
        emit({"bundle": bundle.to_dict()})
    except ExplorerError as e:
        emit({"error": e.to_dict()})
    except MemoryError:
        emit({"error": ExplorerError("limit", "out of memory", job.filename).to_dict()})
    except BaseException as e:  # noqa: BLE001 - report anything the user's code raised
        emit({"error": ExplorerError("run", f"{type(e).__name__}: {e}", job.filename).to_dict()})
    return 0


def run_job(job: Job, progress: Callable[[str], None] | None = None, timeout: float = 300.0) -> Bundle:
    """Run ``job`` in a separate worker process; returns its Bundle or raises ExplorerError."""
    cmd = [sys.executable, "-m", "analysis.worker"]
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", ""))
    if not env["JAX_PLATFORMS"]:
        env.pop("JAX_PLATFORMS")
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=REPO_ROOT, env=env, text=True, start_new_session=True)
    return _collect(proc, job, progress, timeout)


def _collect(proc, job: Job, progress, timeout: float) -> Bundle:
    import threading

    stderr_chunks: list[str] = []

    def drain():
        for line in proc.stderr:
            if sum(map(len, stderr_chunks)) < 64_000:
                stderr_chunks.append(line)

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    timer = threading.Timer(timeout, lambda: _kill(proc))
    timer.start()
    result = None
    try:
        proc.stdin.write(job.to_json())
        proc.stdin.close()
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "progress" in msg and progress:
                progress(msg["progress"])
            elif "bundle" in msg or "error" in msg:
                result = msg
        proc.wait()
    finally:
        timer.cancel()
        _kill(proc)
    if result is None:
        tail = "".join(stderr_chunks).strip().splitlines()[-1:] or [""]
        if proc.returncode is not None and proc.returncode < 0:
            raise ExplorerError("run", f"the worker was killed by signal {-proc.returncode}"
                                       + (f" ({tail[0][:120]})" if tail[0] else ""), job.filename)
        raise ExplorerError("run", f"the worker ended without a result (exit {proc.returncode})"
                                   + (f": {tail[0][:160]}" if tail[0] else ""), job.filename)
    if "error" in result:
        raise ExplorerError.from_dict(result["error"])
    return Bundle.from_dict(result["bundle"])


def _kill(proc) -> None:
    import signal

    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


if __name__ == "__main__":
    sys.exit(_worker_main())
