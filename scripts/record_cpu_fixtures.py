"""Record the gallery compiled on the CPU as test fixtures (``tests/fixtures/cpu/``), so the
analysis, graph, metrics, provenance and lesson tests also run where JAX is not installed.

    .venv/bin/python scripts/record_cpu_fixtures.py

Each model with the default options, and ``mlp`` also with the option sets the tests ask for.
The fixtures carry the jax version that made them; tests/conftest.py says when one is stale
(its model's source changed since it was recorded).
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

OUT = os.path.join(ROOT, "tests", "fixtures", "cpu")
# (model, compiler options) pairs the tests use besides the defaults
EXTRA = [("mlp", {"xla_disable_hlo_passes": "fusion,dot-library-rewriter"}),
         ("mlp", {"xla_disable_hlo_passes": "fusion"})]


def fixture_name(name: str, options: dict) -> str:
    tag = "".join(f".{k}={v}" for k, v in sorted(options.items())).replace(",", "+")
    return f"{name}{tag}.bundle.json"


def main() -> int:
    from analysis.compile.stages import analyze_model
    from sample_models import gallery

    os.makedirs(OUT, exist_ok=True)
    todo = [(n, {}) for n in gallery()] + EXTRA
    from analysis.devices.catalog import devices_in_source

    for name, options in todo:
        if (devices_in_source(gallery()[name].source) or 1) > 1:  # on its devices: in a worker started with them
            from analysis.service.job import Job
            from analysis.service.worker import run_job

            b = run_job(Job(kind="gallery", name=name, filename=str(gallery()[name].path), backend="cpu",
                            compiler_options=options)).bundle
        else:
            b = analyze_model(name, "cpu", options or None).bundle
        b.source["file"] = f"sample_models/{name}.py"  # not this checkout's absolute path
        b.save(os.path.join(OUT, fixture_name(name, options)))
        print(f"{fixture_name(name, options)}: {b.metrics.get('kernels_after')} kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
