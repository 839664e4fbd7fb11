"""A shared link opened by a student: the time from opening a cached link in a fresh browser
session (a new Chromium context: no cookies, no Streamlit session, no frame state) until both
graphs are drawn (each pane's SVG laid out and marked ready by the graph component).

The server is started here (``streamlit run app/main.py`` on a free port, its own data folder);
the link is opened once to put its bundle in the cache (that first compile is not counted), then
N times more, each in a new context. Printed, and written to benchmarks/out/cached_link.json:
the median and spread of the time to the page's first element, to both graphs drawn, and to the
whole page (its last section, drawn after the graphs). The goal: graphs drawn within 2 s of
opening a cached link.

    .venv/bin/python benchmarks/cached_link.py [QUERY] [N] [--beside TREE]
    e.g.  .venv/bin/python benchmarks/cached_link.py "model=transformer_block&backend=cpu&present=1" 7

``--beside TREE`` (a checkout of another release, e.g. made by ``git worktree add``) serves the
same link from that tree too, its server beside this one's, and opens the two alternately (the
order flipped every round): the side-by-side comparison docs/performance.md reports.
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


def _start(data: str, root: str = ROOT) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = dict(os.environ, XLA_EXPLORER_DATA=data)
    # (the app puts its own tree first on the path: a tree beside runs its own code)
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", os.path.join(root, "app", "main.py"),
                             "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false"], cwd=root, env=env,
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


def _summary(runs: list[dict]) -> dict:
    g = [r["graphs_s"] for r in runs]
    return {"page_s_median": round(statistics.median(r["page_s"] for r in runs), 2),
            "graphs_s_median": round(statistics.median(g), 2), "graphs_s_min": round(min(g), 2),
            "graphs_s_max": round(max(g), 2),
            "rest_s_median": round(statistics.median(r["rest_s"] for r in runs), 2), "runs": runs}


def main() -> None:
    from playwright.sync_api import sync_playwright

    args = sys.argv[1:]
    beside = None
    if "--beside" in args:
        i = args.index("--beside")
        beside = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    query = args[0] if args else "model=transformer_block&backend=cpu&present=1"
    n = int(args[1]) if len(args) > 1 else 7
    trees = {"this": ROOT, **({"beside": beside} if beside else {})}
    datas = {k: tempfile.mkdtemp(prefix="xe-cached-link-") for k in trees}
    servers = {}
    try:
        for k, root in trees.items():
            servers[k] = _start(datas[k], root)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            # the first open compiles and measures: the bundle is cached from then on
            first = {k: _open(browser, f"{url}/?{query}", 600) for k, (_, url) in servers.items()}
            runs: dict[str, list] = {k: [] for k in trees}
            for i in range(n):
                for k in (list(trees) if i % 2 == 0 else list(trees)[::-1]):
                    runs[k].append(_open(browser, f"{servers[k][1]}/?{query}", 120))
            browser.close()
    finally:
        for proc, _ in servers.values():
            os.killpg(proc.pid, 9)
            proc.wait()
        for d in datas.values():
            shutil.rmtree(d, ignore_errors=True)
    out = {"query": query, "n": n, "first_open_s": round(first["this"]["graphs_s"], 2), **_summary(runs["this"])}
    if beside:
        out["beside"] = {"tree": beside, **_summary(runs["beside"])}
    for name, r in (("this tree", out), *((("beside: " + beside, out["beside"]),) if beside else ())):
        print(f"{query} [{name}]: cached, fresh session: graphs drawn in {r['graphs_s_median']} s median "
              f"({r['graphs_s_min']}-{r['graphs_s_max']}, N={n}), page up in {r['page_s_median']} s, "
              f"the whole page in {r['rest_s_median']} s")
    print(f"first open (compile) {out['first_open_s']} s")
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "out", "cached_link.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
