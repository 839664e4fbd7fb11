"""Bundles recorded on a real GPU by ``benchmarks/gpu_check.py`` (committed under
``tests/fixtures/gpu/``), re-analyzed here without a GPU: parsing, the kernel legend,
attribution of the measured kernels and the lessons' claims."""

from __future__ import annotations

import glob
import os

import pytest

from analysis.bundle import Bundle, analyze
from sample_models.lessons import lesson

FIXTURES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "fixtures", "gpu", "*.bundle.json")))

pytestmark = pytest.mark.skipif(not FIXTURES, reason="no GPU bundles recorded yet (run benchmarks/gpu_check.py "
                                                     "on a GPU machine and commit its bundles to tests/fixtures/gpu/)")


@pytest.fixture(params=FIXTURES, ids=lambda p: os.path.basename(p).split(".")[0])
def recorded(request) -> Bundle:
    return Bundle.load(request.param)


def test_reanalysis_reproduces_the_recorded_kernels(recorded):
    again = analyze(Bundle.from_json(recorded.to_json()))
    assert [(k.name, k.route, k.library) for k in again.kernels] == \
           [(k.name, k.route, k.library) for k in recorded.kernels]
    assert again.environment["platform"] == "gpu"


def test_library_and_triton_kernels_are_named_and_timed(recorded):
    rows = recorded.timings["kernels"]
    for k in recorded.kernels:
        if k.route in ("library", "triton"):
            assert k.library, k.name
            if k.name not in recorded.timings.get("not_run", []):
                assert rows[k.name]["median_s"] > 0, k.name


def test_lesson_claims_hold_on_the_gpu(recorded):
    les = lesson(recorded)
    if les is None:
        pytest.skip("not a gallery bundle")
    assert [c.claim for c in les.checks if not c.holds] == []
