"""Compare: kernel matching (analysis.studies.compare) on hand-made kernels and on two real compiles of
mlp (default vs fusion disabled), and the Compare page."""

from __future__ import annotations

from analysis.bundle.core import Bundle

import os

import pytest

from analysis.studies import compare
from analysis.program.kernels import Kernel
from analysis.options import fusion_disabled_options
from analysis.render.format import human_seconds
from tests.paths import ROOT

PAGE = os.path.join(ROOT, "app", "sections", "compare.py")


def K(name, ops, route="emitter"):
    return Kernel(name=name, opcode="fusion", route=route, computation="main", shape="f32[4]", op_names=tuple(ops))


def test_pairing_by_name_then_by_ops():
    a = [K("fusion", ["f/add", "f/mul"]), K("dot.1", ["f/dot"], "library"), K("copy.2", ["f/t"]),
         K("while", [], "control")]
    b = [K("fusion", ["f/add"]), K("dot_general.7", ["f/dot"], "library"), K("mul.3", ["f/mul"]), K("extra", ["g/x"])]
    m = {(x.a, x.b): x for x in compare.pair_kernels(a, b)}
    assert m[("fusion", "fusion")].how == "name" and m[("fusion", "fusion")].score == 0.5
    assert m[("dot.1", "dot_general.7")].how == "ops" and m[("dot.1", "dot_general.7")].score == 1.0
    assert m[("copy.2", None)].how == "only a"
    assert {x.b for x in m.values() if x.how == "only b"} == {"mul.3", "extra"}
    assert "while" not in {x.a for x in m.values()}  # control flow is not a kernel row
    rel = compare.related(a, b)
    assert rel["fusion"] == ["fusion", "mul.3"]
    assert rel["copy.2"] == []
    assert compare.missing_ops(a, b) == {"copy.2": ["f/t"]}
    assert compare.jaccard([], []) == 0.0


def test_same_name_without_common_ops_is_not_a_name_match():
    m = compare.pair_kernels([K("fusion.1", ["a/x"])], [K("fusion.1", ["b/y"])])
    assert {x.how for x in m} == {"only a", "only b"}


@pytest.fixture(scope="module")
def pair(gallery_bundle):
    return gallery_bundle("mlp"), gallery_bundle("mlp", **fusion_disabled_options("cpu"))


def test_default_vs_unfused_on_real_bundles(pair):
    default, unfused = pair
    assert unfused.metrics["kernels_after"] > default.metrics["kernels_after"]
    # every op of every default kernel is done by some unfused kernel
    assert compare.missing_ops(default.kernels, unfused.kernels) == {}
    rel = compare.related(default.kernels, unfused.kernels)
    assert all(rel[k.name] for k in default.kernels if k.route != "control")
    # a multi-op fusion is done by several unfused kernels
    multi = [k for k in default.kernels if k.is_multi_op_fusion]
    assert multi and any(len(rel[k.name]) >= 2 for k in multi)
    matches = compare.pair_kernels(default.kernels, unfused.kernels)
    assert sorted(m.a for m in matches if m.a) == sorted(k.name for k in default.kernels if k.route != "control")
    assert sorted(m.b for m in matches if m.b) == sorted(k.name for k in unfused.kernels if k.route != "control")
    assert all(m.b for m in matches if m.a)  # every default kernel found a partner
    rows = {r["metric"]: r for r in compare.summary_deltas(default, unfused)}
    assert rows["kernels"]["delta"] == unfused.metrics["kernels_after"] - default.metrics["kernels_after"] > 0
    assert rows["fusion coverage"]["b"] == 0.0 and rows["fusion coverage"]["a"] > 0.5
    assert rows["step (median, traced)"]["delta"] is None and rows["call (median, no profiler)"]["delta"] is None
    # the generated code: with fusion off every op's kernel stores its own result
    assert rows["stores in the generated code"]["b"] > rows["stores in the generated code"]["a"] > 0
    table = compare.kernel_table(default, unfused, matches)
    assert len(table) == len(matches) and table[0]["A kernel"]


def test_the_code_rows_sum_each_kernels_facts_and_are_empty_without_code():
    from analysis.bundle.core import bundle_from_hlo
    from analysis.codegen.kernel_code import make_code

    hlo = ("HloModule m\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(p)\n}\n")
    a, b = bundle_from_hlo(hlo), bundle_from_hlo(hlo)
    facts = {"global_loads": 3, "global_stores": 2, "vector_width": None, "instructions": 9, "registers": None,
             "spills": None, "shared_bytes": None, "stage": "llvm-ir"}
    b.code = make_code({"k1": {"stages": {"llvm-ir": "x"}, "facts": facts},
                        "k2": {"stages": {"llvm-ir": "y"}, "facts": dict(facts, global_loads=1, global_stores=1)}},
                       None, None)
    rows = {r["metric"]: r for r in compare.summary_deltas(a, b)}
    assert rows["loads in the generated code"]["a"] is None and rows["loads in the generated code"]["b"] == 4
    assert rows["stores in the generated code"]["b"] == 3 and rows["stores in the generated code"]["delta"] is None


def test_page_compares_default_and_fusion_disabled():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(PAGE, default_timeout=240)
    at.session_state["cmp_backend"] = "cpu"
    at.run()
    assert not at.exception, at.exception
    a, b = at.session_state["cmp_pair"]
    assert b.options["compiler_options"] == fusion_disabled_options("cpu")
    text = "\n".join(m.value for m in at.markdown)
    assert "xla_disable_hlo_passes=fusion" in text
    assert "Kernels matched:" in text
    summaries = [d.value for d in at.dataframe if "B vs A" in d.value.columns]
    assert summaries and "kernels" in list(summaries[0].iloc[:, 0])
    assert {m.label: m.value for m in at.metric}["Kernels A → B"] == \
        f"{a.metrics['kernels_after']} → {b.metrics['kernels_after']}"
    # select a fused kernel of A: its unfused counterparts are named
    fused = next(k for k in a.kernels if k.is_multi_op_fusion)
    at.session_state["cmp_sel"] = {"side": "a", "name": fused.name}
    at.run()
    assert not at.exception
    sel = next(m.value for m in at.markdown if m.value.startswith("Selected"))
    for other in compare.related(a, b)[fused.name][:3]:
        assert f"`{other}`" in sel
    # two models
    at.radio(key="cmp_mode").set_value("Two models").run()
    at.selectbox(key="cmp_model_b").set_value("softmax").run()
    at.button(key="cmp_go").click().run()
    assert not at.exception
    a, b = at.session_state["cmp_pair"]
    assert (a.title, b.title) == ("mlp", "softmax")


def test_measure_both_shows_the_two_steps_side_by_side_with_a_verdict_the_numbers_allow():
    from streamlit.testing.v1 import AppTest

    from analysis import measures
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.session_state["cmp_backend"] = "cpu"
    at.session_state["cmp_measure"] = True
    at.run()
    assert not at.exception, at.exception
    a, b = at.session_state["cmp_pair"]
    assert a.timings and b.timings  # both sides measured, the same way: alternated runs, as the CLI's
    assert a.timings["rounds"] == b.timings["rounds"] == compare.ROUNDS
    lines = {m.value.split("**")[1]: m.value for m in at.markdown if m.value.startswith("**Call") or
             m.value.startswith("**Step")}
    assert set(lines) == {"Call, no profiler", "Step, traced"}
    assert all(f"of {compare.ROUNDS} alternated runs' medians" in v for v in lines.values())
    for what, get in (("Call, no profiler", measures.call), ("Step, traced", measures.step)):
        sa, sb = get(a.timings), get(b.timings)
        line = lines[what]
        assert measures.spread_text(sa, human_seconds) in line and measures.spread_text(sb, human_seconds) in line
        # a verdict only where the interquartile ranges part, and then the one the medians say
        if sa.q3 < sb.q1:
            assert "B is slower" in line
        elif sb.q3 < sa.q1:
            assert "B is faster" in line
        else:
            assert "no verdict: the spreads overlap" in line
    assert at.session_state["cmp_link"]["measure"] == "1"


def test_switching_what_to_compare_keeps_the_model():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(PAGE, default_timeout=240)
    at.session_state["cmp_backend"] = "cpu"
    at.run()
    at.selectbox(key="cmp_model").set_value("softmax").run()
    at.radio(key="cmp_mode").set_value("One model, two backends").run()
    assert at.selectbox(key="cmp_model_be").value == "softmax"
    at.radio(key="cmp_mode").set_value("Two models").run()
    assert at.selectbox(key="cmp_model_a").value == "softmax"
    at.radio(key="cmp_mode").set_value("One model, two option sets").run()
    assert at.selectbox(key="cmp_model").value == "softmax"
    assert not at.exception


def test_page_compares_cpu_with_the_h200_target():
    from streamlit.testing.v1 import AppTest

    from app.runner import cuda_plugin_present

    at = AppTest.from_file(PAGE, default_timeout=240)
    at.session_state["cmp_backend"] = "cpu"
    at.run()
    at.radio(key="cmp_mode").set_value("One model, two backends").run()
    assert at.radio(key="cmp_backend_a").value == "cpu" and at.radio(key="cmp_backend_b").value == "h200"
    at.selectbox(key="cmp_model_be").set_value("transformer_block").run()
    at.button(key="cmp_go").click().run()
    assert not at.exception, at.exception
    a, b = at.session_state["cmp_pair"]
    assert a.platform == "cpu" and b.environment["gpu_target"] == "h200"
    if not cuda_plugin_present():  # without the plugin the recorded H200 compile is shown
        from sample_models import recorded_bundle_path

        assert b.stages == Bundle.load(str(recorded_bundle_path("transformer_block", "h200"))).stages
    # the same source ops pair up across the two compilers
    matches = compare.pair_kernels(a.kernels, b.kernels)
    by_ops = [m for m in matches if m.a and m.b and m.how == "ops"]
    assert len(by_ops) >= 5
    assert {k.route for k in b.kernels} >= {"triton"} and "triton" not in {k.route for k in a.kernels}
    text = "\n".join(m.value for m in at.markdown)
    assert "NVIDIA H200" in text and "Kernels matched:" in text


def test_page_compares_triton_with_cublas_on_the_h200_target():
    from streamlit.testing.v1 import AppTest

    from app.runner import cuda_plugin_present

    if cuda_plugin_present():
        pytest.skip("with the CUDA plugin the page compiles live")
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.session_state["cmp_backend"] = "h200"
    at.session_state["cmp_preset_b"] = "Triton GEMM off"
    at.run()
    assert not at.exception, at.exception
    a, b = at.session_state["cmp_pair"]
    assert {k.library for k in a.kernels if k.route != "emitter"} == {"Triton"}
    assert {k.library for k in b.kernels} == {"cuBLAS"}  # mlp: two cuBLAS calls, epilogues included
    # no autotuning preset for a compile that is never autotuned; other options were not recorded
    assert "Autotuning off" not in at.selectbox(key="cmp_preset_b").options
    at.text_area(key="cmp_free_b").input("xla_gpu_enable_triton_gemm=true").run()
    at.button(key="cmp_go").click().run()
    errors = " ".join(e.value for e in at.error)
    assert "Default, Fusion + Triton rewrites off, Triton GEMM off" in errors, errors


def test_a_link_reopens_the_same_comparison(address_bar):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(PAGE, default_timeout=240)
    for k, v in {"mode": "backends", "model": "softmax", "a": "cpu", "b": "h200"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    a, b = at.session_state["cmp_pair"]
    assert (a.title, a.platform, b.title, b.environment.get("gpu_target")) == ("softmax", "cpu", "softmax", "h200")
    assert at.radio(key="cmp_mode").value == "One model, two backends"
    # the page keeps the address bar on what it shows
    shown = address_bar(at)
    assert shown == {"mode": "backends", "model": "softmax", "a": "cpu", "b": "h200"}

    # option sets, with free options; and a value that is no choice is named, not obeyed
    at = AppTest.from_file(PAGE, default_timeout=240)
    for k, v in {"mode": "options", "model": "mlp", "backend": "cpu", "a": "Default", "b": "Nonsense",
                 "b_opt": "xla_disable_hlo_passes=fusion"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    assert any("b=Nonsense" in w.value for w in at.warning)
    a, b = at.session_state["cmp_pair"]
    assert b.options["compiler_options"]["xla_disable_hlo_passes"].startswith("fusion")
    assert at.text_area(key="cmp_free_b").value == "xla_disable_hlo_passes=fusion"


def test_one_model_on_one_device_and_on_eight_compared(gallery_bundle):
    """The data-parallel step alone and on 8 devices: the summary says the devices, the
    collectives XLA added (the gradients' all-reduce) and their traffic per device."""
    from analysis.service.job import Job
    from analysis.service.worker import run_job
    from sample_models import gallery

    entry = gallery()["dp_train_step"]
    one = run_job(Job(kind="gallery", name="dp_train_step", filename=str(entry.path), backend="cpu", devices=1)).bundle
    eight = gallery_bundle("dp_train_step")
    rows = {r["metric"]: r for r in compare.summary_deltas(one, eight)}
    assert (rows["devices"]["a"], rows["devices"]["b"]) == (1, 8)
    assert rows["collectives"]["a"] == 0 and rows["collectives"]["b"] >= 1
    assert rows["collective traffic per device (ring estimate)"]["a"] == 0
    assert rows["collective traffic per device (ring estimate)"]["b"] > 0
    # one device's part of the batch: each device's kernels move less than the one device does alone
    assert rows["bytes moved by kernels (per device)"]["b"] < rows["bytes moved by kernels (per device)"]["a"]


def test_page_compares_pasted_code_with_two_option_sets():
    """Pasted code, two option sets (the defaults: Default and Fusion disabled): the two
    compiles of the code written here, the fusion-off side with a kernel per op."""
    from streamlit.testing.v1 import AppTest

    code = ("import jax.numpy as jnp\n\n\ndef model(x):\n    return jnp.tanh(x) * 3 + 1\n\n\n"
            "def example_inputs():\n    return (jnp.ones((8, 8)),)\n")
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.session_state["cmp_mode"] = "Your code, two option sets"
    at.session_state["cmp_code"] = code
    at.session_state["cmp_backend_code"] = "cpu"
    at.run()
    assert not at.exception, at.exception
    a, b = at.session_state["cmp_pair"]
    assert a.source["code"] == code and b.source["code"] == code
    assert b.options["compiler_options"] and not a.options.get("compiler_options")
    # tanh, multiply, add: one loop fusion with fusion on, three kernels with it off
    assert a.metrics["kernels_after"] < b.metrics["kernels_after"]


def test_page_compares_one_device_with_eight():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(PAGE, default_timeout=300)
    at.session_state["cmp_mode"] = "One model, two device counts"
    at.session_state["cmp_model_dv"] = "dp_train_step"
    at.run()
    assert not at.exception, at.exception
    a, b = at.session_state["cmp_pair"]
    assert (a.options.get("devices", 1), b.options.get("devices")) == (1, 8)
    summary = next(d.value for d in at.dataframe if "B vs A" in d.value.columns)
    rows = {r[""]: r for r in summary.to_dict("records")}
    assert rows["devices"]["A"] == "1" and rows["devices"]["B"] == "8"
    assert rows["collectives"]["A"] == "0" and rows["collectives"]["B"] != "0"
    assert at.session_state["cmp_link"] == {"mode": "devices", "model": "dp_train_step", "a": "1", "b": "8"}


def _release(kernels, jax, passes=(), timings=None):
    return Bundle(kernels=kernels, environment={"jax": jax, "jaxlib": jax, "xla": "extension 1"},
                  pass_log=[{"index": i, "pipeline": "p", "pass": p} for i, p in enumerate(passes)], timings=timings)


def test_versions_diff_of_two_releases():
    # A: the add and the mul are two kernels, the dot a library call; B fuses add and mul into
    # one kernel, keeps the dot as it was, splits A's reduce into two, and adds a copy
    a = _release([K("add.1", ["f/add"]), K("mul.2", ["f/mul"]), K("dot.3", ["f/dot"], "library"),
                  K("reduce.4", ["f/sum", "f/max"])], "0.10.2", passes=("fusion", "fusion", "cse"),
                 timings={"step_median_s": 1.0e-3, "step_q1_s": 0.9e-3, "step_q3_s": 1.1e-3, "traced_steps": 5,
                          "call_median_s": 2.0e-3, "call_q1_s": 1.9e-3, "call_q3_s": 2.1e-3, "iterations": 5})
    b = _release([K("fusion.7", ["f/add", "f/mul"]), K("dot.3", ["f/dot"], "library"), K("reduce.8", ["f/sum"]),
                  K("reduce.9", ["f/max"]), K("copy.5", ["f/t"], "layout")], "0.12.0", passes=("fusion", "dce"),
                 timings={"step_median_s": 0.5e-3, "step_q1_s": 0.45e-3, "step_q3_s": 0.55e-3, "traced_steps": 5,
                          "call_median_s": 2.02e-3, "call_q1_s": 1.95e-3, "call_q3_s": 2.1e-3, "iterations": 5})
    d = compare.versions_diff(a, b)
    status = {(r["a"], r["b"]): r["status"] for r in d["kernels"]}
    assert status[("dot.3", "dot.3")] == "same"
    assert status[(None, "copy.5")] == "only in B"
    assert d["counts"]["same"] == 1 and d["counts"]["only in B"] >= 1
    assert [(f["b"], f["a"]) for f in d["formed"]] == [("fusion.7", ["add.1", "mul.2"])]
    assert [(f["a"], f["b"]) for f in d["broken"]] == [("reduce.4", ["reduce.8", "reduce.9"])]
    assert d["passes"]["only_a"] == ["cse"] and d["passes"]["only_b"] == ["dce"]
    assert {"pass": "fusion", "a": 2, "b": 1} in d["passes"]["counts"]
    # the step's spreads part (0.9-1.1 ms against 0.45-0.55 ms); the call's overlap: no verdict
    assert d["times"]["step"]["verdict"] == "faster"
    assert d["times"]["call"]["verdict"] == "within the spread"
    assert d["a"].startswith("jax 0.10.2") and "extension 1" in d["b"]
    from analysis.render.versions import versions_text

    text = versions_text(d)
    assert "fusion.7 does the ops of A add.1, mul.2" in text and "passes only in B: dce" in text
    assert "step time" in text and "-> B is faster" in text


def test_kernels_sharing_a_line_of_the_program_are_not_a_fusion_formed():
    # one line made three converts (their op name is one): A converts q in one kernel and k, v
    # in another; B does the same work in other groupings, with a dtype changed. No kernel of
    # either side computes what two of the other's do together: nothing formed or broke
    from dataclasses import replace

    cvt = "f/convert_element_type"

    def k(name, ops, opcodes, shape="f32[4,64]{1,0}"):
        return replace(K(name, ops), fused_opcodes=opcodes, shape=shape)

    a = _release([k("t.1", [cvt], ("convert", "transpose")), k("c.2", [cvt, "f/reshape"], ("convert", "bitcast")),
                  k("dot.3", ["f/dot"], ("dot",))], "0.10.2")
    b = _release([k("t.1", [cvt, "f/reshape"], ("convert", "reshape", "copy")),
                  k("c.2", [cvt], ("convert", "bitcast"), "bf16[4,64]{1,0}"), k("dot.3", ["f/dot"], ("dot",))], "0.12.0")
    d = compare.versions_diff(a, b)
    assert d["formed"] == [] and d["broken"] == []
    assert {r["b"]: r["b_shape"] for r in d["kernels"]}["c.2"] == "bf16[4,64]"
    # where one kernel does compute what two did, it is a fusion formed
    fused = _release([k("f.9", [cvt, "f/reshape"], ("convert", "convert", "transpose", "bitcast"))], "0.12.0")
    assert [f["b"] for f in compare.versions_diff(a, fused)["formed"]] == ["f.9"]


def test_two_releases_with_the_same_kernels_formed_and_broke_no_fusion():
    # a broadcast XLA copied into both fusions: its op name is in two kernels on each side, and
    # every kernel is the same in both releases, so nothing formed or broke
    ks = lambda: [K("fusion.1", ["f/bcast", "f/add"]), K("fusion.2", ["f/bcast", "f/mul"])]  # noqa: E731
    d = compare.versions_diff(_release(ks(), "0.10.2"), _release(ks(), "0.12.0"))
    assert d["counts"] == {"same": 2}
    assert d["formed"] == [] and d["broken"] == []


def test_page_compares_one_model_through_two_jax_releases():
    """The versions mode, opened from a link naming it: each side compiled by its own release
    (the runtimes ``scripts/dev.sh`` makes), the header naming each jax, the diff between them."""
    from streamlit.testing.v1 import AppTest

    from analysis.service import runtimes

    have = [r.jax for r in runtimes.available()]
    if len(have) < 2:
        pytest.skip("one jax runtime here (scripts/dev.sh test makes .venv/jax-0.10)")
    old, new = have[-1], have[0]
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.query_params.update({"mode": "versions", "model": "mlp", "a": old, "b": new})
    at.run()
    assert not at.exception, at.exception
    a, b = at.session_state["cmp_pair"]
    assert (a.environment["jax"], b.environment["jax"]) == (old, new)
    text = "\n".join(m.value for m in at.markdown)
    assert f"jax {old}" in text.replace("\\", "") and f"jax {new}" in text.replace("\\", "")
    assert "What changed from jax" in text.replace("\\", "") and "Kernels matched by provenance:" in text
    # the address bar names the comparison shown
    assert at.query_params["mode"] == ["versions"] or at.query_params["mode"] == "versions"


def _measured(step_s, call_s):
    return Bundle(timings={"step_median_s": step_s, "step_q1_s": step_s, "step_q3_s": step_s, "traced_steps": 5,
                           "call_median_s": call_s, "call_q1_s": call_s, "call_q3_s": call_s, "iterations": 5})


def test_two_sides_are_measured_alternately_and_their_times_spread_over_the_runs():
    # A's runs take 1, 2, 3, 4 ms a step; B's 10, 20, 30, 40 ms: each side's spread is over its
    # own runs' medians, whichever order they ran in
    steps = {0: [1e-3, 2e-3, 3e-3, 4e-3], 1: [10e-3, 20e-3, 30e-3, 40e-3]}
    order = []

    def one(side, run):
        order.append(("AB"[side], run))
        return _measured(steps[side][run - 1], 2 * steps[side][run - 1])

    a, b = compare.measured_alternately(one, rounds=4)
    assert order == [("A", 1), ("B", 1), ("B", 2), ("A", 2), ("A", 3), ("B", 3), ("B", 4), ("A", 4)]
    from analysis import measures

    sa, sb = measures.step(a.timings), measures.step(b.timings)
    assert (sa.median, sa.lo, sa.hi) == (2.5e-3, 1e-3, 4e-3) and (sa.q1, sa.q3) == pytest.approx((1.75e-3, 3.25e-3))
    assert (sb.median, sb.lo, sb.hi) == (25e-3, 10e-3, 40e-3)
    assert measures.call(a.timings).median == 5e-3
    assert a.timings["rounds"] == b.timings["rounds"] == 4
    # the spreads part (A's quartiles end at 3.25 ms, B's begin at 17.5 ms): a verdict
    assert compare.versions_diff(a, b)["times"]["step"]["verdict"] == "slower"


def test_overlapping_runs_give_no_verdict_and_a_failed_run_stops_the_rest():
    steps = {0: [1e-3, 3e-3, 2e-3], 1: [2e-3, 1e-3, 3e-3]}
    a, b = compare.measured_alternately(lambda s, r: _measured(steps[s][r - 1], 1e-3), rounds=3)
    assert compare.versions_diff(a, b)["times"]["step"]["verdict"] == "within the spread"
    ran = []

    def fails_on_b2(side, run):
        ran.append((side, run))
        return None if (side, run) == (1, 2) else _measured(1e-3, 1e-3)

    assert compare.measured_alternately(fails_on_b2, rounds=3) is None
    assert ran == [(0, 1), (1, 1), (1, 2)]  # nothing after the run that failed
    with pytest.raises(ValueError):
        compare.measured_alternately(fails_on_b2, rounds=0)


def test_page_shows_the_lesson_on_what_changed_between_two_releases():
    """attention in versions mode, jax 0.10 against 0.12 (the link the sidebar gives): the
    gallery's lesson on the two releases under the comparison, its claims checked on them."""
    from streamlit.testing.v1 import AppTest

    from analysis.service import runtimes
    from sample_models.lessons_versions import SHOWN_BY

    have = {r.jax for r in runtimes.available()}
    old, new = SHOWN_BY["attention"]
    if not {old, new} <= have:
        pytest.skip(f"the lesson compares jax {old} with {new}; this machine has jax {', '.join(sorted(have))} "
                    "(scripts/dev.sh test makes .venv/jax-0.10)")
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.query_params.update({"mode": "versions", "model": "attention", "a": old, "b": new})
    at.run()
    assert not at.exception, at.exception
    lesson = [e for e in at.expander if e.label.startswith("Lesson: attention")]
    assert len(lesson) == 1
    text = "\n".join(m.value for m in lesson[0].markdown)
    assert f"jax {old}'s XLA (A) widens it to f32" in text and f"jax {new}'s XLA (B) keeps it in bf16" in text
    assert "✔ one release computes the P·V matmul in f32" in text and "✘" not in text
    # the sidebar links the lesson to its two releases
    assert any(f"a={old}&b={new}" in c.value for c in at.sidebar.caption)
