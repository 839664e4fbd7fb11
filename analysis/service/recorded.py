"""Recorded GPU-target compiles: what the service serves for a GPU-target job where JAX's CUDA
plugin is not installed (no XLA:GPU compiler here). For a gallery model compiled with the
options of a recorded preset, the compile ``scripts/record_gpu_target.py`` recorded is served,
analyzed again by this version of the code; any other such job is one line saying what is
recorded and how to compile live."""

from __future__ import annotations

import json

from analysis.bundle.core import Bundle, reanalyze
from analysis.errors import ExplorerError
from analysis.options import presets
from analysis.service.job import Job, job_devices
from sample_models import gallery, recorded_bundle_path


def recorded_target_bundle(job: Job) -> tuple[Bundle, str]:
    """The recorded compile for GPU-target ``job`` and the file it came from; ExplorerError
    where none is recorded for its model, options and devices."""
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
    have = b.options.get("devices", 1)
    if job_devices(job) != have:
        raise ExplorerError("options", need + f" (for {job.name}: on {have} device{'s' if have > 1 else ''} only)",
                            job.filename)
    if job.dump_passes and not b.pass_log:
        logged = [n for n in gallery() if (q := recorded_bundle_path(n, job.gpu_target))
                  and json.loads(q.read_text()).get("pass_log")]
        raise ExplorerError("options", need + f"; of those, only {', '.join(logged) or 'none'} carry the pass "
                                              "log", job.filename)
    reanalyze(b)  # the compile is recorded; the analysis is this version's
    if not job.compare_fusion:
        b.fusion_comparison = None
    return b, str(path)
