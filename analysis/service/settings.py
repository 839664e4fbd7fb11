"""Settings: where the data lives, what a job may use, and whether the sandbox is on -- resolved
in one place.

Order: defaults < settings file (``$XLA_EXPLORER_SETTINGS`` or ``<repo>/xla-explorer.toml``,
table ``[limits]``) < environment variables ``XLA_EXPLORER_<NAME>`` (e.g.
``XLA_EXPLORER_TIMEOUT_S=30``). ``XLA_EXPLORER_DATA`` names the data folder, or the store's file
itself (``/x/store.sqlite``: then the folder is ``/x``). See ``docs/worker.md``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

from analysis.errors import ExplorerError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STORE_FILE = "store.sqlite"
SANDBOX_MODES = ("auto", "require", "off")
MEASURE_MODES = ("beside", "alone")


def data_dir(environ=None) -> str:
    """The folder the app's data lives in (the store, and nothing else the worker can reach)."""
    environ = os.environ if environ is None else environ
    d = environ.get("XLA_EXPLORER_DATA")
    if d:
        return os.path.dirname(os.path.abspath(d)) if d.endswith((".sqlite", ".db")) else d
    return os.path.join(REPO_ROOT, "data")


def store_path(environ=None) -> str:
    """The store's SQLite file: ``$XLA_EXPLORER_DATA`` when it names a file, else in ``data_dir``."""
    environ = os.environ if environ is None else environ
    d = environ.get("XLA_EXPLORER_DATA")
    if d and d.endswith((".sqlite", ".db")):
        return d
    return os.path.join(data_dir(environ), STORE_FILE)


def settings_file(environ=None) -> str:
    environ = os.environ if environ is None else environ
    return environ.get("XLA_EXPLORER_SETTINGS") or os.path.join(REPO_ROOT, "xla-explorer.toml")


def settings_table(name: str, path: str) -> dict:
    """The ``[name]`` table of the settings file at ``path`` (empty when there is no file)."""
    if not os.path.exists(path):
        return {}
    import tomllib

    try:
        with open(path, "rb") as f:
            table = tomllib.load(f).get(name, {})
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ExplorerError("options", f"cannot read settings: {e}", path) from None
    if not isinstance(table, dict):
        raise ExplorerError("options", f"[{name}] must be a table", path)
    return dict(table)


@dataclass(frozen=True)
class Limits:
    """What one job may use, how many run at once, and whether they are sandboxed."""

    timeout_s: float = 120.0  # wall clock, from start to result
    cpu_s: int = 300  # CPU seconds (all threads together)
    memory_mb: int = 4096  # all of a job's processes together (cgroup or watchdog), and also the
    #                        address space (CPU) or data segment (GPU) of each process
    nproc: int = 256  # processes + threads of the job
    file_mb: int = 64  # largest file the worker may write
    output_mb: int = 160  # bytes read back from stdout + stderr (a bundle is a few MB, the biggest
    #                       program's twice over with its preview: docs/performance.md)
    workers: int = 2  # compile-only jobs running at once
    session_jobs: int = 3  # queued or running jobs per session
    # queued or running jobs per client (its address and user agent, app.guard): fresh cookie jars
    # are fresh sessions, not a fresh client. A class behind one address with one browser build
    # shares it, so it is several sessions' worth.
    client_jobs: int = 12
    sandbox: str = "auto"  # auto: bwrap if it works, else limits only (with a warning);
    #                        require: refuse to run untrusted code without bwrap; off: never bwrap
    tmp_mb: int = 512  # size of the worker's private /tmp (a tmpfs: host memory)
    scratch_mb: int = 256  # size of the worker's /scratch (its home and working folder, a tmpfs)
    measure_timeout_s: float = 60.0  # wall clock of a measuring job (shorter: it holds a core)
    # the app shows a measured program of at least this many kernels as soon as it is compiled,
    # its timings following (measuring grows with the kernels, and outlasts a big program's
    # compile: docs/performance.md)
    preview_kernels: int = 200
    measure_mode: str = "beside"  # beside: compile jobs keep running while one job measures;
    #                               alone: a measuring job waits for the machine to itself
    upload_mb: int = 32  # largest upload the app reads (HLO text, bundle or dump zip)
    store_busy_s: float = 10.0  # how long a store call waits for another process's write
    # on: the app keeps one sandboxed worker started ahead for the next job (its Python and JAX
    # imports done before it is asked for; analysis.service.worker_process.keep_spare,
    # docs/performance.md)
    spare_worker: str = "on"

    @classmethod
    def from_env(cls, environ: dict | None = None, settings_path: str | None = None) -> "Limits":
        environ = os.environ if environ is None else environ
        values = settings_table("limits", settings_path or settings_file(environ))
        for f in fields(cls):
            v = environ.get(f"XLA_EXPLORER_{f.name.upper()}")
            if v is not None and v != "":
                values[f.name] = v
        out = {}
        for f in fields(cls):
            if f.name not in values:
                continue
            v = values[f.name]
            typ = type(getattr(cls, f.name))
            try:
                v = typ(v)
            except (TypeError, ValueError):
                raise ExplorerError("options", f"setting {f.name} must be a {typ.__name__}, not {v!r}") from None
            if typ is not str and v <= 0:
                raise ExplorerError("options", f"setting {f.name} must be positive, not {v!r}")
            if f.name == "sandbox":
                v = v.lower()
                if v not in SANDBOX_MODES:
                    raise ExplorerError("options", f"setting sandbox must be auto, require or off, not {v!r}")
            if f.name == "spare_worker":
                v = v.lower()
                if v not in ("on", "off"):
                    raise ExplorerError("options", f"setting spare_worker must be on or off, not {v!r}")
            if f.name == "measure_mode":
                v = v.lower()
                if v not in MEASURE_MODES:
                    raise ExplorerError("options", f"setting measure_mode must be beside or alone, not {v!r}")
            out[f.name] = v
        return cls(**out)


ENGINES = ("local", "ray")


@dataclass(frozen=True)
class EngineSettings:
    """Where jobs run: ``local`` (this machine's queue and workers, the default) or ``ray`` (a
    Ray cluster at ``address``: ``auto``, ``ray://HOST:10001``, or empty to start a local one).
    Table ``[engine]`` of the settings file; ``XLA_EXPLORER_ENGINE`` and
    ``XLA_EXPLORER_RAY_ADDRESS`` override it."""

    kind: str = "local"
    address: str = ""
    inflight: int = 64  # Ray tasks this app keeps running at once (the cluster queues the rest)
    local_cpus: int = 0  # CPUs of a local Ray started here (0: all)
    object_store_mb: int = 256  # object store of a local Ray started here

    @classmethod
    def from_env(cls, environ: dict | None = None, settings_path: str | None = None) -> "EngineSettings":
        environ = os.environ if environ is None else environ
        path = settings_path or settings_file(environ)
        values = settings_table("engine", path)
        if environ.get("XLA_EXPLORER_ENGINE"):
            values["kind"] = environ["XLA_EXPLORER_ENGINE"]
        if environ.get("XLA_EXPLORER_RAY_ADDRESS") is not None:
            values["address"] = environ["XLA_EXPLORER_RAY_ADDRESS"]
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ExplorerError("options", f"unknown [engine] setting {sorted(unknown)[0]!r}", path)
        out = {}
        for f in fields(cls):
            if f.name in values:
                typ = type(getattr(cls, f.name))
                try:
                    out[f.name] = typ(values[f.name])
                except (TypeError, ValueError):
                    raise ExplorerError("options", f"engine setting {f.name} must be a {typ.__name__}") from None
        kind = str(out.get("kind", cls.kind)).lower()
        if kind not in ENGINES:
            raise ExplorerError("options", f"setting engine must be local or ray, not {kind!r}")
        out["kind"] = kind
        if out.get("inflight", 1) <= 0:
            raise ExplorerError("options", "engine setting inflight must be positive")
        return cls(**out)
