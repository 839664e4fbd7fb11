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
    # no kernel above 100% of a roof: one faster than every roof measured shows no percentage
    rates = numbers.kernel_rates(t)
    assert all(r.pct_of_roof is None or r.pct_of_roof <= 100 for r in rates.values()), name
    assert all(r.roof_note for r in rates.values() if r.roof and r.pct_of_roof is None), name
    tree = layers_of_bundle(b)
    if tree is not None and tree.time_s is not None:
        assert tree.time_s <= step.median * (1 + 1e-9)
    # one bundle, one step, written the same in the three renderings
    shown = human_seconds(step.median)
    card = next(c for c in summarize(b).cards() if c.label == "Step (median)")
    assert card.value == shown
    assert f"step (median)           : {numbers.spread_text(step, human_seconds)}" in summary_text(b)
    assert shown in html_report(b)
    _times_agree_with_their_shares_in_every_view(b, shown)


def _times_agree_with_their_shares_in_every_view(b, step_shown: str) -> None:
    """docs/numbers.md: the time written beside a kernel's share is that share of the step, to
    the rounding shown, in the CLI's table, the app's table, the graph's labels, the details and
    the report's table; and the times add up to the step's busy part."""
    import re

    from analysis.render.details import node_details
    from analysis.render.report import html_report
    from analysis.render.rows import kernel_rows
    from analysis.render.summary import summary_text
    from analysis.render.view_model import variant_specs
    from app.kernels_view import table
    from tests.shown import agree

    t = b.timings
    kts = numbers.kernel_times(t)
    busy = numbers.busy_fraction(t)
    assert sum(k.share for k in kts.values()) == pytest.approx(busy, abs=1e-9)
    assert sum(k.time_s for k in kts.values()) == pytest.approx(t["device_busy_s"], rel=1e-9)
    # the CLI's table: kernel, route, time (2 words), calls, share[*], own (2 words or none), ...
    text = summary_text(b)
    lines = text.split("top kernels", 1)[1].splitlines()[2:]
    cli = [ln.split() for ln in lines if ln.startswith("    ") and not ln.strip().startswith(("...", "time =", "*"))]
    assert cli, text
    for r in cli:
        assert agree(f"{r[2]} {r[3]}", r[5].rstrip("*"), step_shown), r
    # the app's table, as its cells are written (human_seconds, "50.0%")
    styler, _ = table(kernel_rows(b), measured=True)
    df = styler.data
    for _, row in df[df["time"] >= 0].iterrows():
        assert agree(human_seconds(row["time"]), f"{row['share']:.1f}%", step_shown), row["kernel"]
    # the graph's labels: "368.1 µs · 59% of step"
    drawn = [x for side in variant_specs(b, ["default"]).values() for sp in side.values()
             for x in [*(n.label for n in sp.nodes.values()), *(n.tooltip or "" for n in sp.nodes.values()),
                       *(c.label for c in sp.clusters.values())]]
    labels = [m for x in drawn for m in re.findall(r"(\S+ (?:s|ms|µs|ns)) · (\S+) of step", x)]
    assert labels or not kts
    for tm, sh in labels:
        assert agree(tm, sh, step_shown), (tm, sh)
    # the details: "measured 368.1 µs (58.9% of the 625.0 µs step)", the step the page shows
    facts = [f for d in node_details(b).values() for f in d.get("facts") or [] if f.startswith("measured ")]
    assert facts or not kts
    for f in facts:
        m = re.match(r"measured (\S+ \S+) \((\S+) of the (\S+ \S+) step\)", f)
        assert m.group(3) == step_shown and agree(m.group(1), m.group(2), step_shown), f
    # the report's table: its time and share cells
    html = html_report(b)
    table_html = html[html.index("id='kernel-table'"):]
    table_html = table_html[:table_html.index("</table>")]
    for row in re.findall(r"<tr id='kernel-.*?</tr>", table_html):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        tm, sh = re.sub(r"<sup.*?</sup>", "", cells[9]), re.sub(r"<div.*?</div>", "", cells[10])
        if tm != "–":
            assert agree(tm, sh, step_shown), row


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
            assert row["verdict"].startswith("within the spread")  # and, when the calls ran out, says so
    # the fusion passes only: the library calls are the same on both sides
    assert fc["disabled_passes"] == ["fusion"]
    assert fc["unfused"]["kernels_by_route"].get("library") == fc["default"]["kernels_by_route"].get("library")
    assert fc["unfused"]["kernels"] > fc["default"]["kernels"]
