"""The rules of the house, checked: the viewer never imports JAX; analysis never imports
Streamlit; the HLO parser imports neither."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VIEWER = ["app.views", "app.kernels_view", "app.runner", "app.page_helpers", "analysis.render.report", "analysis.dump",
          "analysis.permalink", "analysis.passes", "analysis.compare", "analysis.render.graph", "analysis.render.charts",
          "analysis.service.queue", "analysis.service.store", "analysis.service.sandbox", "analysis.service.worker", "analysis.bundle",
          "analysis.cli", "analysis.render.summary", "sample_models", "sample_models.lessons",
          # these import JAX only inside the functions that run a compile
          "analysis.compile.lower", "analysis.compile.measure", "analysis.compile.sweep"]
ANALYSIS = [m for m in VIEWER if m.startswith("analysis.")]


def _loaded_after_import(modules: list[str]) -> set[str]:
    code = ("import sys, json\n"
            f"for m in {modules!r}:\n    __import__(m)\n"
            "print(json.dumps(sorted(k.split('.')[0] for k in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    import json

    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_viewer_does_not_import_jax():
    loaded = _loaded_after_import(VIEWER)
    assert "jax" not in loaded and "jaxlib" not in loaded


def test_analysis_does_not_import_streamlit():
    loaded = _loaded_after_import(ANALYSIS)
    assert "streamlit" not in loaded


def test_the_parser_is_pure_python():
    loaded = _loaded_after_import(["analysis.hlo.parser", "analysis.hlo.shape"])
    assert not loaded & {"jax", "jaxlib", "numpy", "streamlit", "plotly"}
