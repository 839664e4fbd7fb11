"""How the app gets a Bundle: every compile goes to a worker process through the job queue
(``analysis.service.queue``: sandbox, limits, cache). The app's own process never imports JAX."""

from __future__ import annotations

import importlib.util
import os
from typing import Callable

from analysis.bundle import Bundle
from analysis.service.worker import Job


# The GPU target the app offers as a backend: XLA's GPU compiler for this device, without one.
APP_GPU_TARGET = "h200"


def compile_bundle(job: Job, session: str = "app", progress: Callable[[str], None] | None = None) -> Bundle:
    if job.backend == APP_GPU_TARGET:  # the backend choice names the target (also in links)
        job.gpu_target, job.backend = APP_GPU_TARGET, "auto"
    if job.gpu_target:
        job.measure = False  # nothing to run it on
        if not cuda_plugin_present():
            return recorded_target_bundle(job)
    try:
        from analysis.service.queue import compile_job
    except ImportError:  # the queue is optional for the viewer; fall back to a plain worker
        from analysis.service.worker import run_job

        return run_job(job, progress=progress)
    return compile_job(job, session=session, progress=progress)


def cuda_plugin_present() -> bool:
    """JAX's CUDA plugin is installed (the ``cuda`` extra), checked without importing JAX."""
    return any(importlib.util.find_spec(m) is not None for m in ("jax_cuda12_plugin", "jax_cuda13_plugin"))


def gpu_present() -> bool:
    """Cheap check without importing JAX: an NVIDIA device node and JAX's CUDA plugin."""
    has_dev = os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl")
    return has_dev and cuda_plugin_present()


def recorded_target_bundle(job: Job) -> Bundle:
    """Without the CUDA plugin a GPU-target compile cannot run here; for a gallery model with the
    options of a recorded preset, the compile ``scripts/record_gpu_target.py`` recorded is shown
    instead (re-analyzed by this version of the code)."""
    from analysis.bundle import reanalyze
    from analysis.errors import ExplorerError
    from analysis.options import presets
    from sample_models import recorded_bundle_path

    target = job.gpu_target.upper()
    need = (f"compiling for the {target} target needs JAX's CUDA plugin (.venv/bin/pip install -e '.[cuda]'; "
            f"no GPU needed); without it the app shows the gallery's recorded {target} compiles")
    if job.kind != "gallery":
        raise ExplorerError("options", need, job.filename)
    recorded = [p for p in presets("gpu") if recorded_bundle_path(job.name, job.gpu_target, p)]
    preset = next((p for p, opts in presets("gpu").items() if opts == dict(job.compiler_options)), None)
    path = recorded_bundle_path(job.name, job.gpu_target, preset) if preset else None
    if path is None:
        raise ExplorerError("options", need + f" (for {job.name}: {', '.join(recorded) or 'none'})", job.filename)
    b = Bundle.load(str(path))
    if job.dump_passes and not b.pass_log:
        import json

        from sample_models import gallery

        logged = [n for n in gallery() if (q := recorded_bundle_path(n, job.gpu_target))
                  and json.loads(q.read_text()).get("pass_log")]
        raise ExplorerError("options", need + f"; of those, only {', '.join(logged) or 'none'} carry the pass "
                                              "log", job.filename)
    reanalyze(b)  # the compile is recorded; the analysis is this version's
    if not job.compare_fusion:
        b.fusion_comparison = None
    b.__dict__["_recorded"] = str(path)
    return b


def sandbox_state() -> tuple[bool, str]:
    try:
        from analysis.service.sandbox import sandbox_status
    except ImportError:
        return False, "the sandbox module is not installed"
    return sandbox_status()
