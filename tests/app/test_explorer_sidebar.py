"""The Explorer sidebar's "XLA (jax) version" select through Streamlit's AppTest: it offers the
runtimes on this machine (the app's own jax first chosen), and Compile runs the job in the one
picked, so the bundle is that release's."""

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
