"""Hole 7, the half that remained: a big upload's memory stayed in the server after its tab
closed. A closed tab's session state is freed by the app's janitor (``app.guard``), in a real
Streamlit server and a real Chromium: the server's runtime keeps the last session it flushed in a
loop variable, and ``AppSession.shutdown`` leaves the state and the fragments in place, so
without the janitor emptying them the state of the last closed tab (a big upload and its bundle)
stays for good."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.polling import wait_until
from tests.scenarios.test_browser import CHROMIUM, ROOT, _answers, _free_port

# The app's shape: a main script that starts the janitor and navigates to one page; the page
# puts an object in its session state, keeps it in a page global (as the explorer keeps its
# bundle), passes it to a fragment, names it in a widget's function and a download callable, and
# registers it in a process-wide list of weak references. A thread in a module of its own
# writes how many of them are alive, and how many sessions are connected, to a file.
PROBE = '''
import os, threading, time
refs = []


def report(out):
    from streamlit import runtime
    while True:
        mgr = runtime.get_instance()._session_mgr
        alive = sum(1 for r in refs if r() is not None)
        with open(out + ".tmp", "w") as f:
            f.write(f"{alive} {len(mgr.list_active_sessions())}\\n")
        os.replace(out + ".tmp", out)
        time.sleep(0.3)


def start(out):
    if not any(t.name == "reap-probe" for t in threading.enumerate()):
        threading.Thread(target=report, args=(out,), name="reap-probe", daemon=True).start()
'''

MAIN = '''
import os, sys
sys.path.insert(0, {root!r})
sys.path.insert(0, {here!r})
import streamlit as st
import reap_probe
from app.guard import start_memory_janitor

start_memory_janitor(interval_s=0.5)
reap_probe.start({out!r})
st.navigation([st.Page(os.path.join({here!r}, "held_page.py"), title="Held", default=True)]).run()
'''

PAGE = '''
import weakref
import streamlit as st
import reap_probe


class Held:
    payload = None


if "held" not in st.session_state:
    h = Held()
    h.payload = bytearray(8 << 20)
    st.session_state.held = h
    reap_probe.refs.append(weakref.ref(h))
    del h
held = st.session_state.held


@st.fragment
def shown(obj):
    st.write("held", len(obj.payload))


shown(held)
st.radio("pick", ["a", "b"], format_func=lambda v: v.upper())
st.download_button("save", data=lambda: bytes(held.payload[:10]), file_name="x.bin")
'''


def _read(path: str) -> tuple[int, int] | None:
    try:
        with open(path) as f:
            a, b = f.read().split()
        return int(a), int(b)
    except (OSError, ValueError):
        return None


def _wait(path: str, ok, timeout: float, what: str) -> tuple[int, int]:
    """The probe's (alive, sessions) once ``ok`` of it."""
    seen = [None]

    def read():
        seen[0] = _read(path)
        return seen[0] if seen[0] is not None and ok(seen[0]) else None

    return wait_until(read, timeout, lambda: f"{what}: (alive, sessions) = {seen[0]}", interval_s=0.3)


def test_a_closed_tabs_state_is_freed(tmp_path):
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail("chromium is not installed (the README's test command installs it)")
    out = str(tmp_path / "alive")
    (tmp_path / "reap_probe.py").write_text(PROBE)
    (tmp_path / "held_page.py").write_text(PAGE)
    page_py = tmp_path / "main.py"
    page_py.write_text(MAIN.format(root=ROOT, here=str(tmp_path), out=out))
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(page_py), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.disconnectedSessionTTL", "2", "--server.fileWatcherType", "none"],
        cwd=str(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(url), 60, "streamlit to start", interval_s=0.5)
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = b.new_page()
            page.goto(url, timeout=60_000)
            page.get_by_text("held 8388608").wait_for(timeout=60_000)
            _wait(out, lambda s: s == (1, 1), 20, "the open tab's session and state")
            page.close()
            b.close()
        # the reconnect time (2 s) passes, the janitor shuts the session down and empties it
        _wait(out, lambda s: s == (0, 0), 30, "the closed tab's session gone and its state freed")
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
