"""The app with engine = "ray" when the cluster cannot be reached (a separate module: the engine
tests keep this process connected to their local cluster until their module ends)."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason="the README's test command installs the ray extra")
pytestmark = [pytest.mark.ray]

from app.explorer_state import explorer_state  # noqa: E402



def test_the_app_says_the_cluster_is_out_of_reach_and_keeps_serving_cached_bundles(monkeypatch):
    """engine = "ray" with an address nobody answers: pasted code gets a one-line error naming
    the address (not a hang, not a traceback), the code stays in the editor, and a gallery model
    already in the store is still shown (the cache is looked up before the engine)."""
    from streamlit.testing.v1 import AppTest

    from analysis.service.job_queue import reset_default_queue
    from tests.app.test_app import APP, _paste_and_compile

    reset_default_queue()
    # the first screen's gallery compile goes into the store with the local engine
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    assert not at.exception and explorer_state(at.session_state).bundle.source["name"] == "mlp"
    reset_default_queue()
    monkeypatch.setenv("XLA_EXPLORER_ENGINE", "ray")
    monkeypatch.setenv("XLA_EXPLORER_RAY_ADDRESS", "ray://127.0.0.1:9")
    was_up = ray.is_initialized()
    if was_up:  # this process is a driver of the test cluster: a new address needs a fresh one
        pytest.skip("ray is connected in this process")
    try:
        at = AppTest.from_file(APP, default_timeout=240)
        at.run()
        assert not at.exception
        assert explorer_state(at.session_state).bundle.source["name"] == "mlp"  # from the store
        assert any("Ray cluster at ray://127.0.0.1:9" in c.value for c in at.caption)
        code = "import jax.numpy as jnp\ndef model(x):\n    return x * 7\ndef example_inputs():\n    return (jnp.ones(3),)\n"
        _paste_and_compile(at, code)
        assert not at.exception
        errors = [e.value for e in at.error]
        assert any("cannot reach the Ray cluster at ray://127.0.0.1:9" in e for e in errors), errors
        # each error is one line, shown as text (a fenced block: nothing in it formatted)
        assert all(e.startswith("```text\n") and e.count("\n") == 2 for e in errors), errors
        assert explorer_state(at.session_state).code == code
    finally:
        reset_default_queue()
