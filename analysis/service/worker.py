"""The worker: compiles (and optionally measures) one job in a separate process.

Protocol (``python -m analysis.service.worker``, documented in ``docs/worker.md``): one JSON object on
stdin, a ``Job``; the worker writes JSON lines to stdout: ``{"progress": PHASE}`` while it
runs, then exactly one of ``{"bundle": BUNDLE}``, ``{"error": ERROR}`` (an ``ExplorerError``
as a dict) or, for a ``kind="probe"`` job, ``{"probe": {...}}``. Anything else the user's code
prints goes to stderr, never into the protocol stream. Before it reads the job the worker
applies the resource limits it is given in ``$XLA_EXPLORER_RLIMITS`` (set by
``analysis.service.sandbox``), so the user's code can never raise them.

``run_job`` is the parent's side: it starts the worker in the sandbox (``analysis.service.sandbox``),
streams progress, and turns every way a worker can end (crash, kill, limit, garbage output)
into a Bundle or an ``ExplorerError``. The app and CLI call ``analysis.service.queue.compile_job``,
which adds the queue and the cache in front of this.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Callable

from analysis.bundle import Bundle
from analysis.errors import ExplorerError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Job:
    source: str = ""
    filename: str = "<pasted code>"
    name: str = "pasted"
    kind: str = "code"  # "gallery" (source ignored, name is the gallery entry) | "code" | "file" | "probe" | "sweep"
    backend: str = "auto"
    compiler_options: dict = field(default_factory=dict)
    measure: bool = False
    iterations: int | None = None
    compare_fusion: bool = False
    # Also record the pass pipeline: a snapshot after every pass that changed the module
    # (``bundle.pass_log``, see ``analysis.passes``).
    dump_passes: bool = False
    # kind="sweep": ``{"lengths": [...], "buckets": [...], "repeats": N}``; ``source`` is a model
    # whose ``example_inputs(n)`` takes the length (``analysis.compile.sweep``). Result in
    # ``bundle.metrics["shape_sweep"]``.
    sweep: dict | None = None
    # Calibrated CPU peaks the parent remembered from an earlier job on this machine (the
    # sandbox gives the worker no writable place of its own to cache them). Not part of the
    # cache key: it changes how a measurement is judged, not what is measured.
    peaks: dict | None = None
    # Compile for this GPU target (``analysis.devices``) without a GPU: compile-only, needs
    # the CUDA plugin (the ``cuda`` extra).
    gpu_target: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, d: dict) -> "Job":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def execute(job: Job, progress: Callable[[str], None] | None = None) -> Bundle:
    """Run a job in this process (the worker's body)."""
    from analysis.compile import lower as run

    if job.kind == "probe":
        raise ExplorerError("protocol", "a probe job has no bundle; use probe()")
    if job.kind == "sweep":
        from analysis.compile import sweep

        return sweep.run_sweep(job, progress)
    if job.gpu_target and job.measure:
        raise ExplorerError("options", f"a compile for GPU target {job.gpu_target!r} without a GPU cannot be "
                                       "measured (there is nothing to run it on)")
    if job.gpu_target:
        # With no GPU the CUDA plugin refuses to load unless told to skip its device checks.
        os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    if job.kind == "gallery":
        loaded = run.load_gallery(job.name)
    else:
        if progress:
            progress("load")
        loaded = run.load_source(job.source, job.filename, job.name)
    dump_dir = None
    options = job.compiler_options
    if job.dump_passes:
        import tempfile

        # Inside the worker's private /tmp (or $TMPDIR); removed once read.
        dump_dir = tempfile.mkdtemp(prefix="xla-passes-")
        options = {**job.compiler_options, "xla_dump_to": dump_dir, "xla_dump_hlo_pass_re": ".*"}
    try:
        bundle = run.compile_to_bundle(loaded, job.backend, options, progress, source_kind=job.kind,
                                       gpu_target=job.gpu_target)
        if dump_dir is not None:
            from analysis.passes import pass_log_from_dir

            if progress:
                progress("passes")
            bundle.options["compiler_options"] = dict(job.compiler_options)  # not the dump's temp path
            bundle.options["dump_passes"] = True
            bundle.pass_log = pass_log_from_dir(dump_dir)
    finally:
        if dump_dir is not None:
            import shutil

            shutil.rmtree(dump_dir, ignore_errors=True)
    if job.measure or job.compare_fusion:
        from analysis.compile import measure as timings

        if job.peaks:
            timings.remember_peaks(bundle.environment, job.peaks)
        if job.measure:
            if progress:
                progress("measure")
            timings.measure_bundle(bundle, iterations=job.iterations)
        if job.compare_fusion:
            if progress:
                progress("compare")
            timings.compare_fusion(bundle, loaded, measure=job.measure, iterations=job.iterations)
    return bundle


def probe() -> dict:
    """What this machine's JAX sees: per backend the device kind and count, and the default."""
    import jax

    out: dict = {"jax": jax.__version__, "backends": {}}
    for b in ("cpu", "gpu", "tpu"):
        try:
            devs = jax.devices(b)
        except RuntimeError:
            continue
        if devs:
            out["backends"][b] = {"device_kind": getattr(devs[0], "device_kind", b), "count": len(devs)}
    d = jax.devices()[0]
    out["default"] = "gpu" if d.platform in ("gpu", "cuda", "rocm") else d.platform
    return out


def apply_limits(spec: dict) -> None:
    """Lower this process's resource limits (soft and hard, so they stay down)."""
    import resource

    def setl(res, value):
        try:
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):
            pass

    mb = 1024 * 1024
    setl(resource.RLIMIT_CORE, 0)
    if spec.get("cpu_s"):
        resource.setrlimit(resource.RLIMIT_CPU, (int(spec["cpu_s"]), int(spec["cpu_s"]) + 5))
    if spec.get("as_mb"):
        setl(resource.RLIMIT_AS, int(spec["as_mb"]) * mb)
    if spec.get("data_mb"):
        setl(resource.RLIMIT_DATA, int(spec["data_mb"]) * mb)
    if spec.get("file_mb"):
        setl(resource.RLIMIT_FSIZE, int(spec["file_mb"]) * mb)
    if spec.get("nproc"):
        setl(resource.RLIMIT_NPROC, int(spec["nproc"]))


_LIMIT_WORDS = ("RESOURCE_EXHAUSTED", "MemoryError", "Out of memory", "out of memory", "Cannot allocate memory")


def _as_limit(err: ExplorerError) -> ExplorerError:
    """Memory exhaustion reported by JAX/XLA is a limit, whatever phase it happened in."""
    if err.phase != "limit" and any(w in (err.message or "") for w in _LIMIT_WORDS):
        return ExplorerError("limit", f"out of memory ({err.phase}): {err.message}", err.file, err.line,
                             err.column, err.excerpt)
    return err


def _worker_main() -> int:
    import faulthandler
    import signal

    spec = os.environ.get("XLA_EXPLORER_RLIMITS")
    if spec:
        apply_limits(json.loads(spec))
    # A crash (segfault in the user's ctypes, ...) dumps the Python stack, user's line included,
    # to stderr, where the parent finds it.
    faulthandler.enable(file=sys.stderr, all_threads=False)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails with EFBIG instead
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
        if job.kind == "probe":
            emit({"probe": probe()})
            return 0
        bundle = execute(job, lambda p: emit({"progress": p}))
        emit({"bundle": bundle.to_dict()})
    except ExplorerError as e:
        emit({"error": _as_limit(e).to_dict()})
    except MemoryError:
        emit({"error": ExplorerError("limit", "out of memory", job.filename).to_dict()})
    except BaseException as e:  # noqa: BLE001 - report anything the user's code raised
        emit({"error": ExplorerError("run", f"{type(e).__name__}: {e}", job.filename).to_dict()})
    return 0


def run_job(job: Job, progress: Callable[[str], None] | None = None, timeout: float | None = None,
            limits=None, cancel=None) -> Bundle:
    """Run ``job`` in a sandboxed worker process; returns its Bundle or raises ExplorerError.

    No queue and no cache: ``analysis.service.queue.compile_job`` is what the app and CLI call."""
    from dataclasses import replace

    from analysis.service import sandbox

    limits = limits or sandbox.Limits.from_env()
    if timeout is not None:
        limits = replace(limits, timeout_s=float(timeout))
    res = sandbox.run_worker(asdict(job), limits, progress, cancel)
    msg = res.message
    if msg is None:
        raise sandbox.describe_failure(res, limits, job.filename, job.source)
    if "error" in msg:
        try:
            raise ExplorerError.from_dict(msg["error"])
        except (TypeError, AttributeError):
            raise ExplorerError("protocol", "the worker sent a malformed error", job.filename) from None
    if "bundle" in msg:
        bundle = Bundle.from_dict(msg["bundle"])
        bundle.__dict__["_isolated"] = res.isolated
        return bundle
    raise ExplorerError("protocol", f"the worker answered {sorted(msg)} to a {job.kind} job", job.filename)


def run_probe(limits=None) -> dict:
    """Ask a (sandboxed) worker what devices JAX sees here."""
    from analysis.service import sandbox

    limits = limits or sandbox.Limits.from_env()
    res = sandbox.run_worker(asdict(Job(kind="probe", name="probe")), limits)
    if res.message is None or "probe" not in res.message:
        if res.message and "error" in res.message:
            raise ExplorerError.from_dict(res.message["error"])
        raise sandbox.describe_failure(res, limits)
    return res.message["probe"]


if __name__ == "__main__":
    sys.exit(_worker_main())
