"""How the app gets a Bundle: every compile goes to a worker process through the job queue
(``analysis.jobs``: sandbox, limits, cache). The app's own process never imports JAX."""

from __future__ import annotations

import importlib.util
import os
from typing import Callable

from analysis.bundle import Bundle
from analysis.worker import Job


def compile_bundle(job: Job, session: str = "app", progress: Callable[[str], None] | None = None) -> Bundle:
    try:
        from analysis.jobs import compile_job
    except ImportError:  # the queue is optional for the viewer; fall back to a plain worker
        from analysis.worker import run_job

        return run_job(job, progress=progress)
    return compile_job(job, session=session, progress=progress)


def gpu_present() -> bool:
    """Cheap check without importing JAX: an NVIDIA device node and JAX's CUDA plugin."""
    has_dev = os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl")
    has_plugin = any(importlib.util.find_spec(m) is not None
                     for m in ("jax_cuda12_plugin", "jax_cuda13_plugin"))
    return has_dev and has_plugin


def sandbox_state() -> tuple[bool, str]:
    try:
        from analysis.sandbox import sandbox_status
    except ImportError:
        return False, "the sandbox module is not installed"
    return sandbox_status()
