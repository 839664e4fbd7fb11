"""The Streamlit app through Streamlit's AppTest: every control, bad input, and that the app
keeps what the user had (code, previous bundle) when something fails."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl

import pytest
from streamlit.testing.v1 import AppTest

from app.explorer_state import ExplorerState, explorer_state
from tests.paths import ROOT

APP = os.path.join(ROOT, "app", "main.py")
TIMEOUT = 240


@pytest.fixture
def at():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def _paste_and_compile(at, code: str) -> None:
    """Switch to pasted code, put ``code`` in the editor's place and press Compile."""
    at.radio(key="source_kind").set_value("Paste code").run()
    _shown(at).code = code
    at.run()
    at.button(key="compile").click().run()


def _shown(at) -> ExplorerState:
    """The page's state: for what the page does not draw as text (the bundle's kernels and
    metrics to compare the page with, the editor's code)."""
    return explorer_state(at.session_state)


def _link(at) -> dict[str, str]:
    """The parameters of the link the page shows for copying (``Share and export``): the model,
    the options, the selection and the tab drawn."""
    links = [c.value for c in at.code if c.value.partition("?")[2].startswith(("model=", "code="))]
    assert len(links) == 1, links
    return dict(parse_qsl(links[0].partition("?")[2]))


def _metric(at, label):
    for m in at.metric:
        if m.label == label:
            return m.value
    raise AssertionError(f"no metric {label!r}: {[m.label for m in at.metric]}")


def _markdown_text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_first_screen_is_mlp_compiled_on_cpu(at):
    assert _link(at)["model"] == "mlp"
    b = _shown(at).bundle
    assert b.environment["platform"] == "cpu"
    before, after = _metric(at, "Ops → kernels").split("→")
    assert int(before) == b.metrics["compute_ops_before"]
    assert int(after) == b.metrics["kernels_after"]
    assert int(after) < int(before)
    # the legend names every route
    text = _markdown_text(at)
    for label in ("Library call", "Triton", "XLA emitter", "Layout / copy", "Collective", "Control flow"):
        assert label in text


def test_gallery_switch_and_compile(at):
    at.selectbox(key="gallery_choice").select("transformer_block").run()
    at.button(key="compile").click().run()
    assert not at.exception
    assert _link(at)["model"] == "transformer_block"
    b = _shown(at).bundle
    assert "Gallery" in [r for r in at.radio(key="source_kind").options]
    # measured, the step is among the cards and the library calls are on the routes' line
    library = b.metrics["kernels_by_route"]["library"]
    assert library > 0 and f"<b>{library}</b> library call" in _markdown_text(at)
    assert _metric(at, "Step (median)")


def test_find_selects_and_details_show_absorbed_ops(at):
    b = _shown(at).bundle
    fusion = next(k for k in b.kernels if k.is_multi_op_fusion)
    at.text_input(key="find").input(fusion.name).run()
    assert (_link(at)["node"], _link(at)["side"]) == (fusion.name, "post")
    assert f"Selected: **{fusion.name}** (after optimization)" in [c.value for c in at.caption]
    text = _markdown_text(at)
    absorbed = b.provenance.kernel_to_pre[fusion.name]
    assert f"Absorbed {len(absorbed)} op(s)" in text
    assert any(op in text for op in absorbed)
    # the fused computation is shown as code
    codes = "\n".join(c.value for c in at.code)
    assert fusion.fused_ops[0] in codes


def _open_tab(at, label: str) -> None:
    """Switch the explorer's tabs (only the open tab's content is made)."""
    at.session_state["view_tab"] = label
    at.run()


def test_only_the_open_tab_is_made(at):
    assert "src_line" not in [getattr(w, "key", None) for w in at.selectbox]  # Kernels & timings is open
    _open_tab(at, "Source")
    assert "src_line" in [getattr(w, "key", None) for w in at.selectbox]
    assert "q_hlo_after" not in [getattr(w, "key", None) for w in at.text_input]


def test_source_line_lights_up_ops(at):
    _open_tab(at, "Source")
    sb = at.selectbox(key="src_line")
    line = next(o for o in sb.options if o != "— pick a line to light up its ops —")
    sb.select(line).run()
    picked = _link(at)["line"]  # the link names the line picked
    assert line.startswith(f"line {picked}: ")
    assert f"Source line {picked}" in _markdown_text(at)


def test_broken_pasted_code_shows_error_and_keeps_code(at):
    bad = "import jax\ndef model(x):\n    return x +\n"
    _paste_and_compile(at, bad)
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("syntax error" in e and ":3" in e for e in errors), errors
    assert _shown(at).code == bad
    # the previous bundle is still shown
    assert _link(at)["model"] == "mlp"


def test_pasted_code_trace_error_names_user_line(at):
    code = ("import jax.numpy as jnp\n\ndef model(x, y):\n    return x @ y\n\n"
            "def example_inputs():\n    return (jnp.ones((3, 4)), jnp.ones((5, 6)))\n")
    _paste_and_compile(at, code)
    errors = [e.value for e in at.error]
    assert any("trace error" in e and ":4" in e for e in errors), errors


def test_bad_option_is_a_clear_error(at):
    at.text_area(key="free_options").input("this is not an option").run()
    at.button(key="compile").click().run()
    errors = [e.value for e in at.error]
    assert any("options error" in e and "KEY=VALUE" in e for e in errors), errors


def test_fusion_disabled_preset_gives_more_kernels(at):
    base = _shown(at).bundle.metrics["kernels_after"]
    at.selectbox(key="preset").select("Fusion passes off").run()
    at.button(key="compile").click().run()
    b = _shown(at).bundle
    assert b.options["compiler_options"].get("xla_disable_hlo_passes")
    assert b.metrics["kernels_after"] > base


def test_text_views_search(at):
    _open_tab(at, "Text views")
    at.text_input(key="q_hlo_after").input("fusion").run()
    captions = [c.value for c in at.caption]
    assert any("matching line" in c for c in captions)


def _run_with_link(params: dict) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def test_the_url_is_a_permalink_of_the_view(at):
    b = _shown(at).bundle
    fusion = next(k for k in b.kernels if k.is_multi_op_fusion)
    at.text_input(key="find").input(fusion.name).run()
    params = {k: v for k, v in at.query_params.items()}
    assert params["model"] in ("mlp", ["mlp"])
    node = params["node"][0] if isinstance(params["node"], list) else params["node"]
    assert node == fusion.name
    # the link shown for copying carries the same parameters
    codes = "\n".join(c.value for c in at.code)
    assert f"node={fusion.name}" in codes and "model=mlp" in codes


def test_opening_a_link_restores_model_options_and_selection():
    at = _run_with_link({"model": "softmax", "backend": "cpu", "opt": "xla_disable_hlo_passes=fusion"})
    assert _link(at)["model"] == "softmax"
    assert _link(at)["opt"] == "xla_disable_hlo_passes=fusion"
    b = _shown(at).bundle
    assert b.options["compiler_options"] == {"xla_disable_hlo_passes": "fusion"}
    assert at.session_state["free_options"].strip() == "xla_disable_hlo_passes=fusion"
    k = b.kernels[0].name
    at2 = _run_with_link({"model": "softmax", "backend": "cpu", "opt": "xla_disable_hlo_passes=fusion",
                          "node": k, "side": "post", "view": "source"})
    assert (_link(at2)["node"], _link(at2)["side"]) == (k, "post")
    assert f"#### Details — {k}" in _markdown_text(at2)


def test_a_link_carries_presentation_measuring_and_the_fusion_off_compile():
    at = _run_with_link({"model": "softmax", "backend": "cpu", "present": "1", "measure": "0", "compare": "1"})
    b = _shown(at).bundle
    assert b.timings is None and b.fusion_comparison is not None  # not measured, compared with fusion off
    assert at.session_state["present"] is True and at.session_state["measure"] is False
    assert at.session_state["compare"] is True
    params = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert (params["present"], params["measure"], params["compare"]) == ("1", "0", "1")
    codes = "\n".join(c.value for c in at.code)
    assert "present=1" in codes and "measure=0" in codes and "compare=1" in codes


def test_a_bad_link_warns_and_the_app_still_works():
    at = _run_with_link({"model": "no_such_model", "line": "abc"})
    warnings = " ".join(w.value for w in at.warning)
    assert "no_such_model" in warnings and "line" in warnings
    assert _link(at)["model"] == "mlp"


def test_pasted_code_gets_a_link_that_reopens_it(at):
    code = ("import jax.numpy as jnp\n\ndef model(x):\n    return jnp.tanh(x) * 3\n\n"
            "def example_inputs():\n    return (jnp.ones((8, 8)),)\n")
    _paste_and_compile(at, code)
    assert _shown(at).bundle.source["code"] == code
    cid = at.query_params["code"]
    cid = cid[0] if isinstance(cid, list) else cid
    assert _link(at)["code"] == cid
    at2 = _run_with_link({"code": cid})
    assert _shown(at2).code == code
    assert _shown(at2).bundle.source["code"] == code
    assert _link(at2)["code"] == cid


def _plugin_installed() -> bool:
    from app.runner import cuda_plugin_present

    return cuda_plugin_present()


def test_h200_backend_shows_the_recorded_gpu_compile(at):
    if _plugin_installed():
        pytest.skip("with the CUDA plugin the app compiles live instead of showing the recording")
    at.selectbox(key="gallery_choice").select("conv_bn_relu").run()
    at.radio(key="backend").set_value("h200").run()
    # nothing can be measured without the device: the control says so
    assert at.checkbox(key="measure_off").disabled and not at.checkbox(key="measure_off").value
    at.checkbox(key="compare").check().run()
    at.button(key="compile").click().run()
    assert not at.exception
    b = _shown(at).bundle
    assert b.environment["deviceless"] and b.environment["device_kind"] == "NVIDIA H200"
    assert b.timings is None and b.fusion_comparison["unfused"]["kernels"] > len(b.kernels)
    conv = [k for k in b.kernels if k.library == "cuDNN"]
    assert conv and _metric(at, "Library calls") == str(b.metrics["kernels_by_route"]["library"])
    assert any("compiled without one" in i.value and "no timings" in i.value for i in at.info)
    # and the kernels tab does not ask for a measurement that cannot be made
    captions = " ".join(c.value for c in at.caption)
    assert "nothing to run" in captions and "Turn on measuring" not in captions
    # the address bar names the target, so the link reopens the same GPU compile
    assert at.query_params["backend"] == ["h200"] or at.query_params["backend"] == "h200"


def test_h200_backend_for_pasted_code_without_the_plugin_is_a_clear_error(at):
    if _plugin_installed():
        pytest.skip("with the CUDA plugin pasted code compiles for the target")
    code = "import jax.numpy as jnp\n\ndef model(x):\n    return x * 2\n\ndef example_inputs():\n    return (jnp.ones(4),)\n"
    at.radio(key="source_kind").set_value("Paste code").run()
    _shown(at).code = code
    at.radio(key="backend").set_value("h200").run()
    at.button(key="compile").click().run()
    errors = [e.value for e in at.error]
    assert any("options error" in e and "CUDA plugin" in e and "recorded" in e for e in errors), errors
    assert _shown(at).code == code
    assert _link(at)["model"] == "mlp"  # the previous compile stays


def test_opening_an_h200_link():
    if _plugin_installed():
        pytest.skip("with the CUDA plugin the link compiles live")
    at = _run_with_link({"model": "attention", "backend": "h200"})
    assert (_link(at)["model"], _link(at)["backend"]) == ("attention", "h200")
    b = _shown(at).bundle
    assert any((k.custom_call_target or "").startswith("__cudnn$fmha") for k in b.kernels)


def test_a_cpu_lesson_links_to_the_same_model_on_the_h200(at):
    text = _markdown_text(at)
    assert "On a GPU:" in text and "(?model=mlp&backend=h200)" in text


def test_traffic_added_by_the_h200_compile_is_not_shown_as_saved():
    if _plugin_installed():
        pytest.skip("with the CUDA plugin the link compiles live")
    at = _run_with_link({"model": "mlp", "backend": "h200"})
    m = {x.label: x for x in at.metric}
    label = "Memory traffic added vs every op its own kernel"
    assert label in m and not any(k.startswith("Memory traffic saved") for k in m)
    assert m[label].delta.startswith("+") and "--" not in m[label].delta
