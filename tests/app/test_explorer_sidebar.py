"""The Explorer sidebar through Streamlit's AppTest: its "XLA (jax) version" select offers the
runtimes on this machine (the app's own jax first chosen), and Compile runs the job in the one
picked, so the bundle is that release's; a link's values are what its widgets show when they are
first drawn, whatever the browser still held from the page before."""

from __future__ import annotations

import os

import pytest
from streamlit.testing.v1 import AppTest

from analysis.service import runtimes
from app.explorer_state import explorer_state
from tests.paths import ROOT

APP = os.path.join(ROOT, "app", "main.py")
OWN = runtimes.own().jax
# the jax 0.10 runtime scripts/dev.sh makes beside the app (.venv/jax-0.10); absent on the jax 0.10 leg
OLD = next((r.jax for r in runtimes.available() if not r.own and r.jax.startswith("0.10.")), None)


@pytest.mark.skipif(OLD is None, reason="no jax 0.10 runtime beside the app (scripts/dev.sh test makes .venv/jax-0.10)")
def test_the_jax_select_compiles_in_the_release_picked():
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    assert not at.exception, at.exception
    select = at.selectbox(key="jax")
    assert select.value == OWN and select.options[0] == f"jax {OWN} (this app's)"  # newest first
    assert f"jax {OLD}" in select.options
    assert explorer_state(at.session_state).bundle.environment["jax"] == OWN  # the first screen: the app's own
    at.checkbox(key="measure").uncheck()
    select.select(OLD).run()
    at.button(key="compile").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    b = explorer_state(at.session_state).bundle
    assert b.source["name"] == "mlp" and b.environment["jax"].startswith("0.10")
    assert f"jax {OLD}" in "\n".join(m.value for m in at.markdown)  # the header names the bundle's jax


def _sidebar_page():
    # the sidebar alone; ``arm`` (set by the test) stands for a link applied while the sidebar's
    # widgets were held back (``Sidebar(held=True)``): its values are on the state, not drawn yet
    import streamlit as st

    from app.explorer_sidebar import draw
    from app.explorer_state import explorer_state

    state = explorer_state()
    if st.session_state.get("arm"):
        st.session_state.arm = False
        state.link_widgets = {"source_kind": "Gallery", "gallery_choice": "transformer_block", "backend": "h200"}
    draw(state)


def test_a_links_values_win_over_the_widgets_the_browser_still_shows_from_the_page_before():
    # a lecture's next step opens on the same page: while its first run holds the sidebar back,
    # the browser still shows the previous step's widgets, and a rerun it sends then carries
    # their values (here set on the widgets, as the browser would send them). The link's values
    # must be what the sidebar shows, or the page calls its own graphs stale ("the sidebar names
    # softmax_layernorm") until Compile is pressed
    at = AppTest.from_function(_sidebar_page, default_timeout=60)
    at.session_state["source_kind"] = "Gallery"
    at.session_state["gallery_choice"] = "softmax_layernorm"
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="gallery_choice").value == "softmax_layernorm"
    at.selectbox(key="gallery_choice").set_value("softmax_layernorm")  # what the browser holds
    at.radio(key="backend").set_value("cpu")
    at.session_state["arm"] = True
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="gallery_choice").value == "transformer_block"
    assert at.radio(key="backend").value == "h200"
    # once drawn, the widgets are the user's again: a choice made after the link stays
    at.selectbox(key="gallery_choice").set_value("mlp").run()
    assert at.selectbox(key="gallery_choice").value == "mlp" and at.radio(key="backend").value == "h200"
