"""The Devices setting and tab through Streamlit's AppTest: a sharded gallery model compiled on
its 8 devices (in the job's worker) and shown per device; a count its mesh cannot use is one
line naming the limit, and the app keeps the bundle it had."""

from __future__ import annotations

import os

import pytest
from streamlit.testing.v1 import AppTest

from app.explorer_state import explorer_state
from tests.paths import ROOT

APP = os.path.join(ROOT, "app", "main.py")


@pytest.fixture
def at():
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_sharded_model_on_its_devices_and_a_count_it_cannot_use(at):
    at.selectbox(key="gallery_choice").select("ring_shard_map").run()
    assert at.selectbox(key="devices").value == 0  # as the file says
    at.button(key="compile").click().run()
    assert not at.exception
    b = explorer_state(at.session_state).bundle
    assert b.source["name"] == "ring_shard_map" and b.options["devices"] == 8
    at.session_state["view_tab"] = "Devices"
    at.run()
    text = "\n".join(m.value for m in at.markdown)
    assert "**8 devices** · mesh `ring` = 8" in text
    # 7 steps of the ring, each one block of 2048 / 8 rows x 64 floats = 64 KiB sent per device
    assert any("about 448.0 KiB" in c.value for c in at.caption)
    # two devices for a file whose mesh needs eight: one line, the limit named, the bundle kept
    at.selectbox(key="devices").select(2).run()
    at.button(key="compile").click().run()
    errors = [e.value for e in at.error]
    assert any("Number of devices 2" in e and "DEVICES = 8" in e and "at most 8" in e for e in errors), errors
    assert explorer_state(at.session_state).bundle is b
    assert "**8 devices** · mesh `ring` = 8" in "\n".join(m.value for m in at.markdown)


def test_a_link_carries_the_device_count(address_bar):
    """dp_train_step's mesh spans the devices it is given: a link asking for 2 compiles it on 2,
    and the page's own link says so again."""
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params["model"] = "dp_train_step"
    at.query_params["devices"] = "2"
    at.run()
    assert not at.exception, at.exception
    b = explorer_state(at.session_state).bundle
    assert b.source["name"] == "dp_train_step" and b.options["devices"] == 2
    assert at.selectbox(key="devices").value == 2
    assert address_bar(at).get("devices") == "2"
