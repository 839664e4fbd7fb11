"""The numbers' invariants (docs/numbers.md) on every gallery model's real, measured compile on
this CPU: no kernel longer than the step, shares adding up to at most 100%, busy inside the step,
a layer tree inside the step, and the step and the kernels' shares written the same in the app's
cards, the CLI's summary and the report. And the fusion verdict on transformer_block agrees with
its own call times."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from analysis import measures as numbers  # noqa: E402
from analysis.render.format import human_seconds  # noqa: E402
from sample_models import gallery  # noqa: E402
from tests.conftest import _sharded  # noqa: E402

ITERS = 5
MODELS = sorted(gallery())


@pytest.fixture(scope="module")
def measured():
    from analysis.compile.measure import Calibrations, measure
    from analysis.compile.stages import analyze_model

    cal = Calibrations()
    cache = {}

    def get(name):
        if name not in cache:
            if _sharded(name):  # on its devices: measured in a worker started with them (this process has one)
                from analysis.service.job import Job
                from analysis.service.worker import run_job

                cache[name] = run_job(Job(kind="gallery", name=name, filename=str(gallery()[name].path),
                                          backend="cpu", measure=True, iterations=ITERS))
            else:
                cache[name] = measure(analyze_model(name, "cpu"), ITERS, cal)
        return cache[name]
    return get


@pytest.mark.parametrize("name", MODELS)
def test_every_part_of_a_measured_gallery_step_stays_inside_it(name, measured):
    from analysis.program.layers import layers_of_bundle
    from analysis.render.report import html_report
    from analysis.render.summary import summarize, summary_text

    b = measured(name).bundle
    t = b.timings
    step = numbers.step(t)
    assert step is not None and step.median > 0
    rows = t["kernels"].values()
    assert all(r["median_s"] <= step.median * (1 + 1e-9) for r in rows), name
    assert sum(r["share"] for r in rows) <= 1 + 1e-9, name
    assert t["device_busy_s"] <= step.median * (1 + 1e-9)
    tree = layers_of_bundle(b)
    if tree is not None and tree.time_s is not None:
        assert tree.time_s <= step.median * (1 + 1e-9)
    # one bundle, one step, written the same in the three renderings
    shown = human_seconds(step.median)
    card = next(c for c in summarize(b).cards() if c.label == "Step (median)")
    assert card.value == shown
    assert f"step (median)           : {numbers.spread_text(step, human_seconds)}" in summary_text(b)
    assert shown in html_report(b)


def test_the_fusion_verdict_on_transformer_block_agrees_with_its_own_times(measured):
    from analysis.compile.fusion_off import compare_fusion
    from analysis.render.charts import fusion_table

    c = measured("transformer_block")
    compare_fusion(c, measure_it=True, iterations=ITERS)
    fc = c.bundle.fusion_comparison
    rows = {r[""]: r for r in fusion_table(c.bundle)}
    for what, get in (("call, no profiler (median, IQR)", numbers.call), ("step, traced (median, IQR)", numbers.step)):
        off, on = get(fc["unfused"]), get(fc["default"])
        row = rows[what]
        assert row["fusion off"] == numbers.spread_text(off, human_seconds)
        assert row["fusion on"] == numbers.spread_text(on, human_seconds)
        if on.q3 < off.q1:
            assert row["verdict"] == "fusion on is faster" and "less" in row["change"]
        elif off.q3 < on.q1:
            assert row["verdict"] == "fusion on is slower" and "more" in row["change"]
        else:
            assert row["verdict"] == "within the spread"
    # the fusion passes only: the library calls are the same on both sides
    assert fc["disabled_passes"] == ["fusion"]
    assert fc["unfused"]["kernels_by_route"].get("library") == fc["default"]["kernels_by_route"].get("library")
    assert fc["unfused"]["kernels"] > fc["default"]["kernels"]
