"""A shared link opened by a student: the time from opening a cached link in a fresh browser
session (a new Chromium context: no cookies, no Streamlit session, no frame state) until both
graphs are drawn (each pane's SVG laid out and marked ready by the graph component).

The server is started here (``streamlit run app/main.py`` on a free port, its own data folder);
the link is opened once to put its bundle in the cache (that first compile is not counted), then
N times more, each in a new context. Printed, and written to benchmarks/out/cached_link.json:
the median and spread of the time to the page's first element, to both graphs drawn, and to the
whole page (its last section, drawn after the graphs). The goal: graphs drawn within 2 s of
opening a cached link.

    .venv/bin/python benchmarks/cached_link.py [QUERY] [N]
    e.g.  .venv/bin/python benchmarks/cached_link.py "model=transformer_block&backend=cpu&present=1" 7
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
READY = ("() => { const f = [...document.querySelectorAll(\"iframe[title='app.views.xla_graph']\")];"
         " return f.some((x) => { try { const d = x.contentDocument;"
         " return d && d.querySelector('#view-pre svg[data-ready=\"1\"]') && d.querySelector('#view-post svg[data-ready=\"1\"]'); }"
         " catch (e) { return false; } }); }")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(data: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = dict(os.environ, XLA_EXPLORER_DATA=data)
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", os.path.join(ROOT, "app", "main.py"),
                             "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("streamlit did not start")


def _open(browser, link: str, timeout_s: float) -> dict:
    """One fresh session: seconds to the page's first app element and to both graphs drawn."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    page = ctx.new_page()
    t0 = time.perf_counter()
    page.goto(link)
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout_s * 1000)
    t_page = time.perf_counter() - t0
    page.wait_for_function(READY, timeout=timeout_s * 1000, polling=50)
    t_graphs = time.perf_counter() - t0
    # the rest of the page (its tabs, tables and charts) comes after the graphs: its last section
    page.wait_for_function("() => document.body.innerText.includes('Share and export')",
                           timeout=timeout_s * 1000, polling=50)
    t_rest = time.perf_counter() - t0
    ctx.close()
    return {"page_s": t_page, "graphs_s": t_graphs, "rest_s": t_rest}


def main() -> None:
    from playwright.sync_api import sync_playwright

    query = sys.argv[1] if len(sys.argv) > 1 else "model=transformer_block&backend=cpu&present=1"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    data = tempfile.mkdtemp(prefix="xe-cached-link-")
    proc, url = _start(data)
    link = f"{url}/?{query}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            first = _open(browser, link, 600)  # compiles and measures: the bundle is cached from now on
            runs = [_open(browser, link, 120) for _ in range(n)]
            browser.close()
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    g = [r["graphs_s"] for r in runs]
    out = {"query": query, "n": n, "first_open_s": round(first["graphs_s"], 2),
           "page_s_median": round(statistics.median(r["page_s"] for r in runs), 2),
           "graphs_s_median": round(statistics.median(g), 2), "graphs_s_min": round(min(g), 2),
           "graphs_s_max": round(max(g), 2),
           "rest_s_median": round(statistics.median(r["rest_s"] for r in runs), 2), "runs": runs}
    print(f"{query}: first open (compile) {out['first_open_s']} s; cached, fresh session: graphs drawn in "
          f"{out['graphs_s_median']} s median ({out['graphs_s_min']}-{out['graphs_s_max']}, N={n}), "
          f"page up in {out['page_s_median']} s, the whole page in {out['rest_s_median']} s")
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "out", "cached_link.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
