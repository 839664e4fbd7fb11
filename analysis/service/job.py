"""What a worker is asked to do (``Job``), as JSON both ways.

A worker (``python -m analysis.service.worker_main``, documented in ``docs/worker.md``) reads one
``Job`` as a JSON object on stdin; what it writes back, and what it leaves out of its answer for
the parent to put back, is ``analysis.service.messages``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field
from analysis.devices.catalog import check_devices, devices_in_source
from analysis.errors import ExplorerError


KINDS = ("gallery", "code", "file", "probe", "sweep", "open")

# The phases a job goes through, as a worker names them in ``{"progress": PHASE}`` (a phase may
# carry a detail after a colon: ``sweep:cached calls``), with the words the app shows for each;
# ``cached`` is the queue's (a bundle found in the store). A worker's other progress is not read.
PHASES = {"load": "Loading the code", "trace": "Tracing to a jaxpr", "lower": "Lowering to StableHLO / HLO",
          "compile": "Compiling with XLA", "analyze": "Analyzing kernels", "measure": "Measuring kernels",
          "held": "Measuring kernels (once the graphs are drawn)",
          "passes": "Reading the per-pass snapshots", "sweep": "Compiling for every input length",
          "compare": "Compiling and measuring with fusion disabled", "cached": "Found in the cache",
          "runtime": "Making the jax runtime (first use: pip installs it)",
          "inductor": "Compiling with PyTorch Inductor"}


@dataclass(frozen=True)
class Sweep:
    """A ``sweep`` job's payload: the input lengths to compile for, the bucket lengths they are
    padded to, and the calls timed per length (``analysis.compile.sweep``; each checked there,
    empty for the defaults)."""

    lengths: list = field(default_factory=list)
    buckets: list = field(default_factory=list)
    repeats: int | None = None


@dataclass(frozen=True)
class Opened:
    """An ``open`` job's payload besides the file itself (the job's ``source``, its bytes in
    base64; ``filename``, its name): the trace of its run (base64) and that trace's name, the
    module or program to open, and ``prefer="passes"`` for a dump's pass snapshots."""

    trace: str | None = None
    trace_name: str | None = None
    module: str | None = None
    prefer: str | None = None


# The payload each kind of job carries, besides the fields every job has.
PAYLOADS = {"sweep": ("sweep", Sweep), "open": ("upload", Opened)}


def _payload(kind: str, field_name: str, cls: type, value):
    """``value`` as ``cls`` (it comes as a JSON object from the parent), for a job of that kind
    only."""
    if value is None or isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        raise ExplorerError("options", f"a {kind} job's {field_name} must be an object")
    unknown = sorted(set(value) - set(cls.__dataclass_fields__))
    if unknown:
        raise ExplorerError("options", f"a {kind} job's {field_name} has no field {unknown[0]!r}")
    return cls(**value)


@dataclass(frozen=True)
class Job:
    """One job, as asked: never changed once made (``dataclasses.replace`` makes another), so
    the job a cache key was computed from is the job that ran. ``kind`` is one of ``KINDS``;
    a kind's own payload (``PAYLOADS``) is a typed field of its own, set for that kind alone."""

    source: str = ""
    filename: str = "<pasted code>"
    name: str = "pasted"
    kind: str = "code"  # "gallery" (source ignored, name is the gallery entry) | "code" | "file" | "probe" | "sweep"
    #                     | "open" (an upload, opened by the gate: ``upload_job``)
    backend: str = "auto"
    compiler_options: dict = field(default_factory=dict)
    measure: bool = False
    iterations: int | None = None
    compare_fusion: bool = False
    # Also record the pass pipeline: a snapshot after every pass that changed the module
    # (``bundle.pass_log``, see ``analysis.studies.passes``).
    dump_passes: bool = False
    # kind="sweep": ``source`` is a model whose ``example_inputs(n)`` takes the length
    # (``analysis.compile.sweep``). Result in ``bundle.metrics["shape_sweep"]``.
    sweep: Sweep | None = None
    # Calibrated CPU peaks the parent remembered from an earlier job on this machine (the
    # sandbox gives the worker no writable place of its own to cache them). Not part of the
    # cache key: it changes how a measurement is judged, not what is measured.
    peaks: dict | None = None
    # Compile for this GPU target (``analysis.devices.catalog``) without a GPU: compile-only, needs
    # the CUDA plugin (the ``cuda`` extra).
    gpu_target: str | None = None
    # A measuring job of a program with at least this many kernels sends its bundle once it is
    # compiled, before it is measured (``{"preview": BUNDLE}``), so its graphs can be shown
    # while the timings are made; None: never. Not part of the cache key: the same bundle comes.
    preview_kernels: int | None = None
    # How many devices the program runs on (1..``analysis.devices.catalog.MAX_DEVICES``): on the CPU the
    # worker is started with that many host devices (``--xla_force_host_platform_device_count``),
    # for a GPU target the target has that many. None: the model file's ``DEVICES = N``, else 1
    # (``job_devices``). Part of the cache key, as resolved.
    devices: int | None = None
    # kind="open": what else the user handed over besides the file (``upload_job``)
    upload: Opened | None = None
    # The jax release to compile with (``analysis.service.runtimes``: its version, e.g. "0.10.2";
    # a minor version names its newest release); None: the app's own. Part of the cache key.
    jax: str | None = None
    # A PyTorch model also compiled with torch.compile (Inductor, CPU) in the same worker, beside
    # XLA's compile: ``bundle.inductor`` (analysis.compile.inductor); timed with ``measure``.
    inductor: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ExplorerError("options", f"no kind of job {str(self.kind)[:40]!r} (one of {', '.join(KINDS)})")
        for kind, (name, cls) in PAYLOADS.items():
            value = _payload(kind, name, cls, getattr(self, name))
            if value is not None and kind != self.kind:
                raise ExplorerError("options", f"a {self.kind} job has no {name}")
            object.__setattr__(self, name, value)
        if self.jax is not None:
            from analysis.service.runtimes import check_version

            object.__setattr__(self, "jax", check_version(self.jax, "a job's jax"))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, d: dict) -> "Job":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def job_source(job: Job) -> str:
    """The code a job runs (a gallery entry's file text, read without importing it)."""
    if job.kind == "gallery":
        from sample_models import gallery_entry

        return gallery_entry(job.name).source
    return job.source


def job_devices(job: Job) -> int:
    """The devices a job runs on: the one it asks for, else its model file's ``DEVICES = N``
    (read from the text, never run), else 1. An ExplorerError for a count out of range."""
    if job.devices is not None:
        return check_devices(job.devices)
    if job.kind in ("probe", "open"):
        return 1
    return devices_in_source(job_source(job), job.filename) or 1


def names_torch(job: Job) -> bool:
    """Whether a job's code names PyTorch (one substring search of its text, never parsed or
    run): its worker may load torch, and a CUDA build of torch maps CUDA's libraries
    (``WorkerKind.of``)."""
    if job.kind in ("probe", "open"):
        return False
    return "torch" in (job_source(job) or "")


def is_measure(job: Job) -> bool:
    """A job that runs the program to time it (it needs the machine to itself)."""
    return bool(job.measure or job.compare_fusion)


def upload_job(name: str, data: bytes, trace_name: str | None = None, trace: bytes | None = None,
               module: str | None = None, prefer: str | None = None) -> Job:
    """The job that opens what a user handed over (``analysis.inputs``): a file (an HLO text, a
    bundle, a zipped dump or a profiler trace), maybe the trace of its run, maybe the module or
    program to open. The bytes go to the sandboxed worker as they are: this process reads none
    of them."""
    name = (name or "upload")[-200:]
    opened = Opened(trace=base64.b64encode(trace).decode() if trace is not None else None,
                    trace_name=(trace_name or "trace")[-200:] if trace is not None else None,
                    module=(module or "")[:300] or None, prefer=prefer)
    return Job(kind="open", name=name, filename=name, source=base64.b64encode(data).decode(), upload=opened)
