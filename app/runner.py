"""How the app gets a Bundle: every compile goes to a worker process through the job queue
(``analysis.service.job_queue``: sandbox, limits, cache). The app's own process never imports JAX."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from analysis.errors import ExplorerError
from analysis.pipeline import WorkAhead
from analysis.service.job import Job
from analysis.service.job_queue import Outcome, compile_job
# the pages ask these of the runner: whether JAX's CUDA plugin is installed, whether a GPU is here
from analysis.service.sandbox import cuda_plugin_installed as cuda_plugin_present, gpu_present  # noqa: F401
from analysis.service.sandbox import sandbox_status

# The GPU target the app offers as a backend: XLA's GPU compiler for this device, without one.
APP_GPU_TARGET = "h200"


def app_job(job: Job) -> Job:
    """The job the app runs for what the page asked (a copy; ``job`` is not changed): the
    backend choice ``h200`` (also in links) names the GPU target, and a compile for a target
    is never measured (there is nothing to run it on)."""
    if job.backend == APP_GPU_TARGET:
        job = replace(job, gpu_target=APP_GPU_TARGET, backend="auto")
    if job.gpu_target:
        job = replace(job, measure=False)
    return job


def compile_bundle(job: Job, session: str = "app", progress: Callable[[str], None] | None = None,
                   early: bool = False, ahead: WorkAhead | None = None, use_cache: bool = True) -> Outcome:
    """The bundle for ``job`` (``use_cache=False``: run anew, as each of measured runs compared
    side by side must be, and not stored). With ``early``, a big program's measuring job (``preview_kernels``
    in the limits: 200 kernels) comes back once it is compiled, its measured bundle in
    ``Outcome.pending``. ``ahead``: the page's work on a draft of the bundle, made while the
    worker compiles (the explorer lays its graphs out: ``graph_payload.PayloadAhead``)."""
    job = app_job(job)
    if early:
        from analysis.service.settings import Limits

        job = replace(job, preview_kernels=Limits.from_env().preview_kernels)
    return compile_job(job, session=session, progress=progress, early=early, ahead=ahead, use_cache=use_cache)


def start_spare_worker() -> bool:
    """With the local engine and ``spare_worker = "on"`` (the default): one sandboxed worker
    started ahead for the next job, from now on (``worker_process.keep_spare``; idempotent). Whether
    spares are kept."""
    from analysis.service import worker_process
    from analysis.service.settings import EngineSettings, Limits

    try:
        limits, engine = Limits.from_env(), EngineSettings.from_env()
    except ExplorerError:  # bad settings: the page says so where it uses them
        return False
    on = engine.kind == "local" and limits.spare_worker == "on"
    if on != worker_process.spare.kept:
        worker_process.keep_spare(on, limits)
    return on


def sandbox_state() -> tuple[bool, str]:
    return sandbox_status()


def engine_line() -> str:
    """Where this app's jobs run, in one line for the sidebar (``[engine]`` settings)."""
    from analysis.service.settings import EngineSettings, Limits

    try:
        e = EngineSettings.from_env()
        workers = Limits.from_env().workers
    except ExplorerError as err:
        return err.one_line()
    if e.kind == "ray":
        return f"Jobs run on the Ray cluster at {e.address or 'a Ray started by this app'}."
    return f"Jobs run on this machine, {workers} at a time."
