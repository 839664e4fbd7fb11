"""A lecture in the app through Streamlit's AppTest: a lecture link opens its step's view (model,
backend, tab, selection, presentation), Back and Next step through it, End leaves it, a bad link
is one warning, and a view added to one's own lecture comes back from the lecture's one link."""

from __future__ import annotations

import os

from streamlit.testing.v1 import AppTest

from analysis.service.store import default_store
from app import lecture
from app.explorer_state import explorer_state
from tests.paths import ROOT

APP = os.path.join(ROOT, "app", "main.py")
TIMEOUT = 240


def _open(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def _bar(at) -> str:
    lines = [m.value for m in at.markdown if m.value.startswith("**Step ")]
    assert len(lines) == 1, lines
    return lines[0]


def _params(at) -> dict:
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in at.query_params.items()}


def test_a_lecture_link_opens_its_step_and_steps_on():
    at = _open(lecture="xla-claims", slide="3")
    # step 3 of the shipped file: transformer_block on the H200, the kernels tab, gemm_fusion_dot.2
    assert _bar(at).startswith("**Step 3 of 10** · 3\\. Libraries, generated kernels, Triton")
    shown = explorer_state(at.session_state)
    assert shown.bundle.source.get("name") == "transformer_block"
    assert shown.bundle.environment.get("gpu_target") == "h200"
    assert shown.sel == {"side": "post", "name": "gemm_fusion_dot.2"}
    assert at.session_state["present"] is True  # in presentation mode
    assert at.session_state["view_tab"] == "Kernels & timings"
    p = _params(at)
    assert (p["model"], p["backend"], p["node"], p["lecture"], p["slide"]) == (
        "transformer_block", "h200", "gemm_fusion_dot.2", "xla-claims", "3")
    assert not at.warning, [w.value for w in at.warning]

    at.button(key="lecture_next").click().run()
    assert not at.exception, at.exception
    assert _bar(at).startswith("**Step 4 of 10** · 4\\. Layouts")
    shown = explorer_state(at.session_state)
    assert shown.bundle.source.get("name") == "layout_transpose"
    assert shown.sel == {"side": "post", "name": "transpose_copy_fusion"}
    assert _params(at)["slide"] == "4"

    at.button(key="lecture_back").click().run()
    assert _bar(at).startswith("**Step 3 of 10**")
    assert explorer_state(at.session_state).bundle.source.get("name") == "transformer_block"

    at.button(key="lecture_end").click().run()
    assert not [m for m in at.markdown if m.value.startswith("**Step ")]
    assert explorer_state(at.session_state).bundle.source.get("name") == "transformer_block"  # the view stays


def test_the_first_and_last_steps_cannot_step_past_the_ends():
    at = _open(lecture="xla-claims", slide="10")
    assert _bar(at).startswith("**Step 10 of 10** · 10\\. Collectives")
    assert at.button(key="lecture_next").disabled
    assert not at.button(key="lecture_back").disabled
    assert at.session_state["view_tab"] == "Devices"


def test_a_bad_lecture_link_is_one_warning():
    at = _open(lecture="<b>nope</b>")
    warnings = [w.value for w in at.warning]
    assert any("neither a lecture of the gallery" in w and "<b>nope</b>" in w for w in warnings), warnings
    assert not [m for m in at.markdown if m.value.startswith("**Step ")]
    at = _open(lecture="xla-claims", slide="99")
    assert any("slide must be a number from 1 to 10, not '99'" in w.value for w in at.warning)
    assert _bar(at).startswith("**Step 1 of 10**")


def test_my_lecture_is_built_from_views_and_shared_as_one_link():
    at = _open(model="transformer_block", backend="h200", node="gemm_fusion_dot.2", side="post")
    at.text_input(key="lecture_caption").input("Triton GEMMs: look at the route column")
    at.button(key="lecture_add").click().run()
    assert not at.exception, at.exception
    assert len(at.session_state["my_lecture"]) == 1
    at.text_input(key="lecture_caption").input("Second look")
    at.button(key="lecture_add").click().run()
    at.button(key="lecture_up_1").click().run()  # the second view first
    assert [s["caption"] for s in at.session_state["my_lecture"]] == ["Second look",
                                                                      "Triton GEMMs: look at the route column"]
    at.button(key="lecture_rm_0").click().run()
    at.button(key="lecture_share").click().run()
    links = [c.value for c in at.code if "?lecture=" in c.value]
    assert len(links) == 1, links
    lid = links[0].rpartition("?lecture=")[2]
    lec = lecture.load(lid, default_store())
    assert [s.caption for s in lec.steps] == ["Triton GEMMs: look at the route column"]
    assert lec.steps[0].params == {"model": "transformer_block", "backend": "h200", "view": "kernels",
                                   "node": "gemm_fusion_dot.2", "side": "post"}
    # the link opens it: its one step, in presentation mode
    at = _open(lecture=lid)
    assert _bar(at).startswith("**Step 1 of 1** · Triton GEMMs")
    assert explorer_state(at.session_state).sel == {"side": "post", "name": "gemm_fusion_dot.2"}
