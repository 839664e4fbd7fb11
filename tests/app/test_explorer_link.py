"""A link's jax through Streamlit's AppTest: ``?model=mlp&jax=0.10.2`` compiles mlp in that
runtime, sets the sidebar's select to it and writes it in the page's own link; a release this
machine does not have is one warning line, and the app's own jax compiles it."""

from __future__ import annotations

import os

import pytest
from streamlit.testing.v1 import AppTest

from analysis.service import runtimes
from app.explorer_state import explorer_state
from tests.paths import ROOT

APP = os.path.join(ROOT, "app", "main.py")
OWN = runtimes.own().jax
HAVE = [r.jax for r in runtimes.available()]


def _open(params: dict) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params.update(params)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.skipif("0.10.2" not in HAVE or OWN == "0.10.2",
                    reason="no jax 0.10.2 runtime beside the app (scripts/dev.sh test makes .venv/jax-0.10)")
def test_a_link_naming_jax_compiles_in_that_release(address_bar):
    at = _open({"model": "mlp", "jax": "0.10.2", "measure": "0"})
    b = explorer_state(at.session_state).bundle
    assert b.source["name"] == "mlp" and b.environment["jax"] == "0.10.2"
    assert at.selectbox(key="jax").value == "0.10.2"
    assert not at.warning, [w.value for w in at.warning]
    assert address_bar(at).get("jax") == "0.10.2"
    assert "jax=0.10.2" in "\n".join(c.value for c in at.code)  # the link shown for copying


def test_a_link_naming_a_jax_not_here_warns_and_uses_the_apps_own(address_bar):
    at = _open({"model": "mlp", "jax": "0.10.99", "measure": "0"})  # a release jax never made
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and "jax 0.10.99 is not on this server" in warnings[0], warnings
    assert f"compiled with jax {OWN}" in warnings[0]
    assert explorer_state(at.session_state).bundle.environment["jax"] == OWN
    assert at.selectbox(key="jax").value == OWN
    assert "jax" not in address_bar(at)  # the app's own jax is not written in the link
