"""Round 3 (issue 38), finding 5: the app started exactly as a user starts it with
``XLA_EXPLORER_ENGINE=ray`` and no address (so it starts its own Ray), opened in a real Chromium,
compiles its first gallery model through that Ray and stays up. Started from a thread that
ended, Ray's processes died a second after they started, the first page never drew and the app
exited after 60 s ("Failed to connect to GCS")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from tests.polling import app_idle, wait_until
from tests.scenarios.test_browser import CHROMIUM, ROOT, _free_port, _graph_frames

ray = pytest.importorskip("ray", reason="the README's test command installs the ray extra")
pytestmark = [pytest.mark.ray, pytest.mark.browser, pytest.mark.sandbox]


def _healthy(url: str) -> bool:
    try:
        return urllib.request.urlopen(url + "/_stcore/health", timeout=2).status == 200
    except OSError:
        return False


def test_the_app_starts_its_own_ray_and_compiles_through_it(tmp_path):
    from playwright.sync_api import sync_playwright

    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_EXPLORER_", "RAY_"))}
    env.update(XLA_EXPLORER_ENGINE="ray", XLA_EXPLORER_DATA=str(tmp_path / "data"))  # no address; an empty store
    log_path = tmp_path / "streamlit.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", os.path.join(ROOT, "app", "main.py"), "--server.headless",
             "true", "--server.port", str(port), "--server.address", "127.0.0.1"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(url) or proc.poll() is not None, 90, "the app to answer")
        assert proc.poll() is None, log_path.read_text()[-2000:]
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            try:
                page = b.new_page(viewport={"width": 1280, "height": 720})
                page.goto(url, timeout=120_000)
                # the first screen's gallery model, compiled (and measured) through the app's Ray
                panes = _graph_frames(page, 2, timeout=300_000)
                assert len(panes) >= 2
                app_idle(page, 300)
                body = page.locator("body").inner_text()
                assert "a Ray started by this app" in body
                assert "cannot reach the Ray cluster" not in body and "Traceback" not in body
            finally:
                b.close()
        # the app and its Ray are still up once the page has drawn (Ray's processes died a second
        # after they started; the app 60 s later)
        assert proc.poll() is None, log_path.read_text()[-2000:]
        assert _healthy(url)
        assert "Failed to connect to GCS" not in log_path.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
