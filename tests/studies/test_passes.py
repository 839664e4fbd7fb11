"""The pass pipeline: a real CPU compile of mlp with dump_passes, the pure helpers of
analysis.studies.passes, the `passes` CLI command and the Pass pipeline page."""

from __future__ import annotations

import os

import pytest

from analysis.studies import passes
from analysis.hlo import parse_module
from tests.paths import ROOT

PAGE = os.path.join(ROOT, "app", "sections", "pass_pipeline.py")


@pytest.fixture(scope="module")
def mlp_passes():
    pytest.importorskip("jax")
    from analysis.service.job import Job
    from analysis.service.worker_main import execute

    return execute(Job(kind="gallery", name="mlp", backend="cpu", dump_passes=True))


def _fusion_step(log):
    return next(i for i, e in enumerate(log) if e["pass"] == "fusion")


def test_pass_log_is_ordered_and_has_the_fusion_pass(mlp_passes):
    log = mlp_passes.pass_log
    assert len(log) >= 3
    idx = [e["index"] for e in log]
    assert idx == sorted(idx) and len(set(idx)) == len(idx)
    assert all(e["text"] and e["instructions"] and e["kernels"] is not None for e in log)
    i = _fusion_step(log)
    assert log[i]["kernels"] < log[i - 1]["kernels"], "fusion must cut the kernel count"
    assert log[-1]["kernels"] == mlp_passes.metrics["kernels_after"]
    # consecutive snapshots differ (identical ones are left out)
    assert all(a["text"] != b["text"] for a, b in zip(log, log[1:]))
    # the dump's temp folder does not leak into the bundle's options
    assert mlp_passes.options["compiler_options"] == {}
    assert mlp_passes.options["dump_passes"] is True
    assert "xla_dump_to" not in str(mlp_passes.options)


def test_fusion_pass_diff_and_change(mlp_passes):
    log = mlp_passes.pass_log
    i = _fusion_step(log)
    d = passes.snapshot_diff(log[i - 1]["text"], log[i]["text"])
    assert d.startswith("--- before the pass") and "+" in d and "fusion(" in d
    ch = passes.pass_change(parse_module(log[i - 1]["text"]), parse_module(log[i]["text"]))
    assert ch.fused, "the fusion pass fused something"
    for fusion, absorbed in ch.fused.items():
        assert fusion in ch.added and set(absorbed) <= set(ch.removed)
    assert passes.is_fusion_pass("fusion") and passes.is_fusion_pass("priority-fusion")
    assert not passes.is_fusion_pass("algsimp")


def test_build_pass_log_drops_repeats_and_caps_texts():
    a = "HloModule m\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(p)\n}\n"
    b = a.replace("negate", "abs")
    entries = [{"index": i, "pipeline": "p", "pass": f"pass{i}", "file": str(i)} for i in range(4)]
    texts = {"0": a, "1": a, "2": b, "3": "not hlo"}
    log = passes.build_pass_log(entries, lambda e: texts[e["file"]])
    assert [e["pass"] for e in log] == ["pass0", "pass2", "pass3"]
    assert log[0]["kernels"] == 1 and log[0]["instructions"] == 2
    assert log[2]["kernels"] is None  # unparsable: kept, without counts
    capped = passes.build_pass_log(entries, lambda e: texts[e["file"]], max_text_bytes=10)
    assert all(e["text"] is None for e in capped)


def test_snapshot_files_reads_dump_names(tmp_path):
    names = ["module_0007.jit_f.0002.simplification.after_algsimp.before_dce.txt",
             "module_0007.jit_f.0001.simplification.after_pipeline-start.before_algsimp.txt",
             "module_0007.jit_f.0003.copy-insertion.after_adding_copies_to_resolve_interference.txt",
             "module_0007.jit_f.before_optimizations.txt", "module_0003.jit_g.0001.x.after_y.txt", "README"]
    for n in names:
        (tmp_path / n).write_text("x")
    got = passes.snapshot_files(str(tmp_path))
    assert [(e["index"], e["pass"], e["next_pass"]) for e in got] == [
        (1, "pipeline-start", "algsimp"), (2, "algsimp", "dce"), (3, "adding_copies_to_resolve_interference", None)]
    assert passes.snapshot_files(str(tmp_path / "absent")) == []


def test_cli_passes(capsys):
    pytest.importorskip("jax")
    from analysis.cli import main

    assert main(["passes", "mlp", "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "mlp:" in out and "/ fusion" in out and "<- fusion" in out


def test_page_steps_through_the_passes():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(PAGE, default_timeout=240)
    at.session_state["pp_backend"] = "cpu"
    at.run()
    assert not at.exception, at.exception
    b = at.session_state["pp_bundle"]
    log = b.pass_log
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Passes that changed the module"] == str(len(log) - 1)
    assert metrics["Kernels: first → last"] == f"{log[0]['kernels']} → {log[-1]['kernels']}"
    # the header's instructions are the chart's: one count, the entry computation's instructions
    # (the header read 22 → 26, every computation's, beside a chart line falling 18 → 9)
    import json

    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    lines = {t["name"]: t["y"] for t in chart["data"] if t.get("visible", True) is True}
    counted = [r["entry_instructions"] for r in log]
    assert lines["instructions (entry)"] == counted and lines["kernels"] == [r["kernels"] for r in log]
    assert not [name for name in lines if name.startswith("instructions") and name != "instructions (entry)"]
    assert metrics["Instructions in the entry: first → last"] == f"{counted[0]} → {counted[-1]}"
    # opens on the fusion pass: what it fused, the diff, the graph
    i = _fusion_step(log)
    assert at.slider(key="pp_step").value == i
    text = "\n".join(m.value for m in at.markdown)
    assert "What it did:** fused" in text and "<code>fusion</code>" in text
    assert any(c.language == "diff" and "+++ after the pass" in c.value for c in at.code)
    at.button(key="pp_prev").click().run()
    assert not at.exception
    assert at.slider(key="pp_step").value == i - 1
    at.slider(key="pp_step").set_value(0).run()
    assert "the module as the pipeline received it" in "\n".join(m.value for m in at.markdown)


def test_pass_pipeline_page_on_the_h200_target():
    """The recorded H200 compile of transformer_block carries its pass log: the page steps
    through XLA:GPU's pipeline and its fusion passes; a model recorded without one is a clear error."""
    from streamlit.testing.v1 import AppTest

    from app.runner import cuda_plugin_present

    if cuda_plugin_present():
        pytest.skip("with the CUDA plugin the page records passes live")
    page = os.path.join(ROOT, "app", "sections",
                        "pass_pipeline.py")
    at = AppTest.from_file(page, default_timeout=240)
    at.session_state["pp_backend"] = "cpu"
    at.run()
    at.selectbox(key="pp_model").set_value("transformer_block").run()
    at.radio(key="pp_backend").set_value("h200").run()
    at.button(key="pp_compile").click().run()
    assert not at.exception, at.exception
    b = at.session_state["pp_bundle"]
    assert b.environment["gpu_target"] == "h200" and b.pass_log
    passes = [e["pass"] for e in b.pass_log]
    assert "priority-fusion" in passes and "triton-softmax-rewriter" in passes
    at = AppTest.from_file(page, default_timeout=240)
    at.session_state["pp_backend"] = "h200"
    at.session_state["pp_model"] = "rnn_scan"
    at.run()
    assert not at.exception, at.exception
    errors = " ".join(e.value for e in at.error)
    assert "pass log" in errors and "transformer_block" in errors


def test_a_link_reopens_the_same_pass(address_bar):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(PAGE, default_timeout=240)
    for k, v in {"model": "softmax", "backend": "cpu", "step": "2"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    b = at.session_state["pp_bundle"]
    assert b.title == "softmax" and at.slider(key="pp_step").value == 2
    shown = address_bar(at)
    assert shown == {"model": "softmax", "backend": "cpu", "step": "2"}
    # stepping on moves the link with it
    at.button(key="pp_next").click().run()
    shown = address_bar(at)
    assert shown["step"] == "3"
    # a model that is not in the gallery is named, and the default opens instead
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.query_params["model"] = "nope"
    at.query_params["backend"] = "cpu"
    at.run()
    assert any("model=nope" in w.value for w in at.warning)
    assert at.session_state["pp_bundle"].title == "mlp"


CODE = ("import jax.numpy as jnp\n\n\ndef model(x):\n    return jnp.tanh(x) * 3 + 1\n\n\n"
        "def example_inputs():\n    return (jnp.ones((8, 8)),)\n")


def test_page_takes_pasted_code():
    """Pasted code, as the Explorer takes it: compiled with a snapshot after every pass; the
    tanh, multiply and add written here are one loop fusion by the last snapshot."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(PAGE, default_timeout=240)
    at.session_state["pp_source"] = "Paste code"
    at.session_state["pp_code"] = CODE
    at.session_state["pp_backend_code"] = "cpu"
    at.run()
    assert not at.exception, at.exception
    at.button(key="pp_compile_code").click().run()
    assert not at.exception, at.exception
    b = at.session_state["pp_bundle"]
    assert b.source["code"] == CODE and b.pass_log
    assert b.pass_log[-1]["kernels"] < b.pass_log[0]["kernels"]

