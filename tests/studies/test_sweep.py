"""Shape specialization: bucket arithmetic, a real sweep in the worker's body (fewer
executables with bucketing, padding only the axes that follow the length), and the page."""

from __future__ import annotations

import html
import os
import re

import pytest

from analysis.errors import ExplorerError
from analysis.studies.sweep import MIN_REPEATS, bucket_for, conclusions, parse_lengths, spread, summary, verdict
from tests.paths import ROOT

PAGE = os.path.join(ROOT, "app", "sections", "shape_sweep.py")


def test_bucket_for():
    assert [bucket_for(n, [256, 512, 1024]) for n in (1, 256, 257, 1000, 1024, 1025, 3000)] == \
        [256, 256, 512, 1024, 1024, 2048, 3072]
    assert bucket_for(7, []) == 7


def test_parse_lengths():
    assert parse_lengths("100..1000 step 100") == list(range(100, 1001, 100))
    assert parse_lengths("100, 250 300") == [100, 250, 300]
    assert parse_lengths("8:33:8") == [8, 16, 24, 32]
    for bad in ("", "abc", "0", "1..100000"):
        with pytest.raises(ExplorerError) as e:
            parse_lengths(bad)
        assert e.value.phase == "options"


def test_summary_counts():
    plain = [{"length": 10, "padded_to": 10, "compile_s": 1.0, "first_call_s": 1.1, "cached_call_s": 0.1, "executables": 1},
             {"length": 30, "padded_to": 30, "compile_s": 1.0, "first_call_s": 1.1, "cached_call_s": 0.3, "executables": 2}]
    buck = [dict(r, padded_to=32, executables=1, compile_s=1.0 if i == 0 else 0.0) for i, r in enumerate(plain)]
    s = summary(plain, buck)
    assert (s["executables"], s["executables_bucketed"]) == (2, 1)
    assert s["compile_s"] == 2.0 and s["compile_s_bucketed"] == 1.0
    assert s["padding_overhead"] == pytest.approx(64 / 40 - 1)


def test_spread_is_the_median_and_the_middle_half():
    sp = spread([5.0, 1.0, 3.0, 2.0, 4.0])
    # sorted 1..5: median 3; inclusive quartiles 2 and 4
    assert (sp["median_s"], sp["q1_s"], sp["q3_s"], sp["n"]) == (3.0, 2.0, 4.0, 5)
    assert spread([])["median_s"] is None


def _rows(length, padded, q1, med, q3):
    return {"length": length, "padded_to": padded, "cached_q1_s": q1, "cached_call_s": med, "cached_q3_s": q3}


def _sweep(plain, buck):
    s = {"executables": len(plain), "executables_bucketed": 1, "compile_s": 3.0, "compile_s_bucketed": 1.0,
         "padding_overhead": 0.3}
    return {"plain": plain, "bucketed": buck, "summary": s, "verdict": verdict(plain, buck)}


def test_a_sweep_says_slower_only_when_the_middle_halves_part():
    plain = [_rows(n, n, 1.0, 1.1, 1.2) for n in (100, 200, 300)]
    slower = [_rows(n, 512, 1.5, 1.6, 1.7) for n in (100, 200, 300)]
    v = verdict(plain, slower)
    assert v["finding"] == "slower" and v["slower"] == 3
    assert v["ratio"] == pytest.approx(1.6 / 1.1)
    text = " ".join(conclusions(_sweep(plain, slower)))
    assert "slower at 3 of 3 padded lengths" in text and "45%" in text  # 1.6 / 1.1 - 1


def test_a_sweep_whose_calls_overlap_claims_no_difference():
    plain = [_rows(n, n, 1.0, 1.1, 1.3) for n in (100, 200, 300)]
    # one length clearly faster, two overlapping: no finding either way
    buck = [_rows(100, 512, 0.5, 0.6, 0.7), _rows(200, 512, 1.2, 1.25, 1.4), _rows(300, 512, 0.9, 1.0, 1.1)]
    v = verdict(plain, buck)
    assert v["finding"] == "within spread" and (v["faster"], v["alike"]) == (1, 2)
    text = " ".join(conclusions(_sweep(plain, buck)))
    assert "no difference beyond the run-to-run spread" in text
    assert "slower" not in text.split("(")[0] and "faster at" not in text


def test_a_bucketed_sweep_measured_faster_says_so_and_not_that_padding_costs():
    plain = [_rows(n, n, 1.0, 1.1, 1.2) for n in (100, 200, 300)]
    buck = [_rows(n, 512, 0.6, 0.7, 0.8) for n in (100, 200, 300)]
    text = " ".join(conclusions(_sweep(plain, buck)))
    assert "measured faster at 3 of 3" in text and "cost time" not in text


def test_lengths_that_needed_no_padding_are_not_counted():
    plain = [_rows(256, 256, 1.0, 1.1, 1.2), _rows(300, 300, 1.0, 1.1, 1.2)]
    buck = [_rows(256, 256, 3.0, 3.1, 3.2), _rows(300, 512, 1.0, 1.1, 1.2)]
    v = verdict(plain, buck)
    assert v["padded_lengths"] == 1 and v["finding"] == "within spread"


def test_sweep_job_bucketing_compiles_less():
    pytest.importorskip("jax")
    from analysis.service.job import Job
    from analysis.service.worker_main import execute

    # 128 is also the model's width: padding must touch only the axis that follows the length
    b = execute(Job(kind="sweep", name="shape_sweep", backend="cpu",
                    sweep={"lengths": [100, 128, 300], "buckets": [512], "repeats": 2}))
    sw = b.metrics["shape_sweep"]
    plain, buck = sw["plain"], sw["bucketed"]
    assert [r["length"] for r in plain] == [100, 128, 300]
    assert [r["executables"] for r in plain] == [1, 2, 3]
    assert [r["padded_to"] for r in buck] == [512, 512, 512]
    assert [r["executables"] for r in buck] == [1, 1, 1]
    assert sw["summary"]["executables_bucketed"] < sw["summary"]["executables"]
    assert all(r["compiled"] and r["compile_s"] > 0 for r in plain)
    assert [r["compiled"] for r in buck] == [True, False, False]
    assert buck[1]["compile_s"] == 0.0
    assert all(r["cached_call_s"] > 0 for r in plain + buck)
    # asked for 2 repeats: a spread needs at least MIN_REPEATS calls, so that many were timed
    assert sw["repeats"] == MIN_REPEATS
    assert all(len(r["cached_calls_s"]) == MIN_REPEATS for r in plain + buck)
    assert all(r["cached_q1_s"] <= r["cached_call_s"] <= r["cached_q3_s"] for r in plain + buck)
    assert sw["verdict"]["padded_lengths"] == 3 and conclusions(sw)
    assert b.kernels and b.stages["hlo_after"]  # the bundle is the compile at the first length


def test_sweep_needs_a_length_argument():
    pytest.importorskip("jax")
    from analysis.service.job import Job
    from analysis.service.worker_main import execute

    src = "import jax.numpy as jnp\ndef model(x):\n    return x * 2\ndef example_inputs():\n    return (jnp.ones(3),)\n"
    with pytest.raises(ExplorerError) as e:
        execute(Job(kind="sweep", source=src, name="p", backend="cpu", sweep={"lengths": [4, 8]}))
    assert e.value.phase == "inputs" and "example_inputs(n)" in e.value.message


def test_page_plots_both_runs():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(PAGE, default_timeout=240)
    at.session_state["sw_lengths"] = "100, 200, 300"
    at.session_state["sw_buckets"] = "512"
    at.session_state["sw_backend"] = "cpu"
    at.run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Executables"] == "3 → 1"
    # "102 → 34 ms" (plain → bucketed) or "1.2 s → 340 ms": numbers with a time unit
    assert re.fullmatch(r"\d+(\.\d+)?( (s|ms|µs))? → \d+(\.\d+)? (s|ms|µs)", metrics["Total compile time"]), \
        metrics["Total compile time"]
    assert any("exact shapes" in m.value for m in at.markdown)
    # what the sweep measured, in sentences that read as written once Markdown renders them
    # (a CommonMark renderer, as the browser's): no character reference left for the eye
    from markdown_it import MarkdownIt

    sw = at.session_state["sw_bundle"].metrics["shape_sweep"]
    shown = {html.unescape(re.sub(r"<[^>]+>", "", MarkdownIt().render(m.value))).strip() for m in at.markdown}
    for line in conclusions(sw):
        assert line in shown, line
    rows = at.dataframe[0].value
    assert list(rows["run"]).count("bucketed") == 3 and set(rows["padded to"][rows["run"] == "bucketed"]) == {512}
    at.text_input(key="sw_lengths").set_value("ten").run()
    at.button(key="sw_go").click().run()
    assert not at.exception
    assert any("lengths" in e.value for e in at.error)
    assert at.session_state["sw_bundle"] is not None  # the last sweep stays on screen


def test_a_link_reruns_the_same_sweep(address_bar):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(PAGE, default_timeout=240)
    for k, v in {"lengths": "100, 300", "buckets": "512", "backend": "cpu"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    assert {m.label: m.value for m in at.metric}["Executables"] == "2 → 1"
    shown = address_bar(at)
    assert shown == {"lengths": "100, 300", "buckets": "512", "backend": "cpu"}


NNX_SWEEP = '''
import jax.numpy as jnp
from flax import nnx


class Scorer(nnx.Module):
    def __init__(self, rngs):
        self.embed = nnx.Linear(4, 16, rngs=rngs)
        self.score = nnx.Linear(16, 1, rngs=rngs)

    def __call__(self, x):
        return self.score(jnp.tanh(self.embed(x)))


model = Scorer(nnx.Rngs(0))


def example_inputs(n=8):
    return (jnp.ones((n, 4)),)
'''


def test_a_sweep_of_a_module_object_runs_it_as_the_compile_does():
    """A Flax NNX module as ``model``: the sweep compiles it as every other command does (its
    parameters as the program's inputs, its layers named), where it jitted the object itself and
    showed another program; every length its own executable."""
    pytest.importorskip("flax")
    from analysis.service.job import Job
    from analysis.service.worker_main import execute

    b = execute(Job(kind="sweep", source=NNX_SWEEP, name="scorer", backend="cpu",
                    sweep={"lengths": [8, 24], "buckets": [32], "repeats": 2}))
    sw = b.metrics["shape_sweep"]
    assert [r["executables"] for r in sw["plain"]] == [1, 2]
    assert [r["padded_to"] for r in sw["bucketed"]] == [32, 32]
    assert [r["executables"] for r in sw["bucketed"]] == [1, 1]
    # embed (kernel, bias) and score (kernel, bias): 4 parameter arrays became the program's inputs
    assert b.source.get("library") == "flax.nnx" and b.source.get("parameters") == 4
    assert "embed" in b.stages["hlo_before"] and "score" in b.stages["hlo_before"]
