"""Big programs: an N-layer transformer stack, measured side by side in one interleaved run.

The model is the gallery's transformer block (``sample_models/transformer_block.py``) applied N
times, each block in ``jax.named_scope("layer<i>")`` with its own weights (about 25 kernels a
layer on the CPU). Every number is a ratio against a bare ``jax.jit(model).lower(*args).compile()``
of the same N, measured beside it:

1. **first graph, in-process**: ``compile_model`` (what the worker does: compile, parse, link,
   explain) plus ``app.graph_payload`` (what the app builds and lays out before it draws),
   with the layout cache emptied first; bare and ours alternate, the order flipping per trial;
   beside them (``--report``) **the report**: ``compile_model`` plus ``html_report``, what
   ``xla-explorer report`` does, from an empty layout cache;
   and (``--report-cli``) ``xla-explorer report`` itself as a user runs it on the model file, in
   a fresh process, against a bare compile of the file in a fresh process, alternated;
2. **--measure**: ``compile_model`` plus ``measure`` against the bare compile plus the time the
   measured calls themselves take (warm-up, timed and traced calls);
3. **in a real browser** (a Streamlit server with an empty store, Chromium): a link to the
   pasted code opened, to both graphs drawn (the frame's own moment, ``__xe_ready``; the poll
   that sees it, later on a busy browser, is kept beside it; a big program's graphs come before
   its timings), and to
   its timings shown, against the bare compile in a fresh Python process (the app's worker is
   one), run just before and just after, the ratio against the mean of the two; a click on a layer to its highlight painted; a layer
   double-clicked to its view drawn; the server's resident memory after the graphs are drawn,
   after the clicks and the layer, and 16 s later ("settled": the memory janitor has had its
   round, so the reading does not depend on when its last one was).

    .venv/bin/python benchmarks/scaling.py [--ns 1,12,48,96,192] [--trials 3] [--report 12,96]
                                           [--report-cli 96] [--measure 12] [--browser 1,12,192]
                                           [--stack plain|shared]

``--stack shared``: the decoder stack whose layers share kernels (a causal mask and rotary table
computed once; ``benchmarks/big_programs.py`` measures its report and ``xe.show``).

Writes ``benchmarks/out/scaling.json``. Goals (#18): first graph <= 1.5x the bare compile at
every N; (#37) the report of N=96 <= 1.5x; in the browser at N=192 graphs drawn <= 1.5x, a click highlighted in < 100 ms, a layer
opened in < 1 s; app memory after N=192 <= 2x that after N=12.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
OUT = os.path.join(ROOT, "benchmarks", "out")
BASE_ENV = dict(os.environ)  # before an in-process compile sets XLA's dump and logging variables

from sample_models._stack import shared_stack_source, stack_source  # noqa: E402  (ROOT on the path first)

# which stack (``--stack``): ``plain`` (the gallery's block N times, no kernel shared between
# layers) or ``shared`` (a causal mask and rotary table computed once, read by every layer)
SOURCE = {"plain": stack_source, "shared": shared_stack_source}
STACK = os.environ.get("XLA_EXPLORER_BENCH_STACK", "plain")


def _load(n: int):
    from analysis.compile.load import load_source

    return load_source(SOURCE[STACK](n), f"stack{n}.py", f"stack{n}")


def bare(n: int) -> float:
    import jax

    m = _load(n)
    t0 = time.perf_counter()
    jax.jit(m.model).lower(*m.inputs).compile()
    return time.perf_counter() - t0


def ours(n: int) -> tuple[float, dict]:
    from analysis.compile.stages import compile_model
    from analysis.render import layout_cache
    from app import graph_payload

    with layout_cache.SVG_LOCK:
        layout_cache.SVG_CACHE.clear()
    graph_payload.CORES.clear()
    m = _load(n)
    t0 = time.perf_counter()
    b = compile_model(m, "cpu").bundle
    t1 = time.perf_counter()
    p = graph_payload.graph_payload(b)
    t2 = time.perf_counter()
    return t2 - t0, {"compile_model_s": t1 - t0, "payload_s": t2 - t1, "kernels": len(b.kernels),
                     "instructions_before": len(b.module("hlo_before").entry.instructions),
                     "opens": p["open_variant"], "lazy_views": len(p["lazy"]),
                     "payload_mb": round(len(json.dumps(p, default=str)) / 1e6, 2)}


def report(n: int) -> tuple[float, dict]:
    """``xla-explorer report`` in process: ``compile_model`` and ``html_report``, with the layout
    cache emptied first (a fresh CLI process has none)."""
    from analysis.compile.stages import compile_model
    from analysis.render import layout_cache
    from analysis.render.report import html_report
    from analysis.render.report_layers import LAYER_GRAPHS, LayersAhead

    with layout_cache.SVG_LOCK:
        layout_cache.SVG_CACHE.clear()
    LAYER_GRAPHS.clear()
    m = _load(n)
    t0 = time.perf_counter()
    b = compile_model(m, "cpu", ahead=LayersAhead()).bundle  # as the CLI's report: the layer graphs made while XLA compiles
    t1 = time.perf_counter()
    page = html_report(b)
    t2 = time.perf_counter()
    return t2 - t0, {"compile_model_s": t1 - t0, "report_s": t2 - t1, "report_mb": round(len(page) / 1e6, 2),
                     "as_layers": "id='xe-layers'" in page}


def first_graph(ns: list[int], trials: int, report_ns: list[int] = ()) -> dict:
    """The app's first graph and (for ``report_ns``) the report, each against the bare compile
    measured beside it: the three interleaved, their order reversed every other trial."""
    rows = {n: {"bare_s": [], "ours_s": [], "parts": [], "report_s": [], "report_parts": []} for n in ns}
    bare(1)  # JAX itself warm for both
    ours(1)
    for t in range(trials):
        for n in ns:
            order = ["bare", "ours"] + (["report"] if n in report_ns else [])
            for which in (order if t % 2 == 0 else order[::-1]):
                # each from a heap without the garbage of the runs before it: a full collection
                # of a previous run's objects would land inside whichever run came next
                gc.collect()
                if which == "bare":
                    rows[n]["bare_s"].append(bare(n))
                elif which == "ours":
                    s, parts = ours(n)
                    rows[n]["ours_s"].append(s)
                    rows[n]["parts"].append(parts)
                else:
                    s, parts = report(n)
                    rows[n]["report_s"].append(s)
                    rows[n]["report_parts"].append(parts)
            r = rows[n]
            print(f"  N={n:<4} trial {t + 1}: bare {r['bare_s'][-1]:.2f} s, ours {r['ours_s'][-1]:.2f} s "
                  f"({r['parts'][-1]})" + (f", report {r['report_s'][-1]:.2f} s ({r['report_parts'][-1]})"
                                           if r["report_s"] else ""), flush=True)
    out = {}
    for n, r in rows.items():
        mb, mo = statistics.median(r["bare_s"]), statistics.median(r["ours_s"])
        out[n] = {"bare_compile_s": round(mb, 3), "first_graph_s": round(mo, 3), "ratio": round(mo / mb, 2),
                  **{k: r["parts"][-1][k] for k in r["parts"][-1]},
                  "compile_model_s": round(statistics.median(p["compile_model_s"] for p in r["parts"]), 3),
                  "payload_s": round(statistics.median(p["payload_s"] for p in r["parts"]), 3)}
        if r["report_s"]:  # the report (compile_model + html_report) against the same bare compiles
            mr = statistics.median(r["report_s"])
            out[n]["report"] = {"total_s": round(mr, 3), "ratio": round(mr / mb, 2),
                                "html_report_s": round(statistics.median(p["report_s"] for p in r["report_parts"]), 3),
                                "report_mb": r["report_parts"][-1]["report_mb"],
                                "as_layers": r["report_parts"][-1]["as_layers"]}
    return out


def measured(ns: list[int]) -> dict:
    from analysis.compile import measure
    from analysis.compile.stages import compile_model

    # the CPU's peaks are calibrated once per machine and kept in the service's store: not here
    measure.measure(compile_model(_load(1), "cpu"))
    out = {}
    for n in ns:
        tb = bare(n)
        t0 = time.perf_counter()
        c = compile_model(_load(n), "cpu")
        t1 = time.perf_counter()
        measure.measure(c)
        t2 = time.perf_counter()
        t = c.bundle.timings
        # the calls themselves: warm-up, the 3 probe calls and the timed ones, the traced ones
        work = t["warmup_s"] + (t["iterations"] + 3) * t["call_mean_s"] + t["traced_steps"] * t["traced_call_median_s"]
        out[n] = {"bare_compile_s": round(tb, 3), "compile_s": round(t1 - t0, 3), "measure_s": round(t2 - t1, 3),
                  "calls_s": round(work, 3), "iterations": t["iterations"], "traced_steps": t["traced_steps"],
                  "events": t["events_seen"],
                  # measuring against the calls it makes, and the whole against a bare compile + calls
                  "measure_ratio": round((t2 - t1) / work, 2),
                  "ratio": round((t2 - t0) / (tb + work), 2)}
        print(f"  N={n}: measure {t2 - t1:.2f} s for {work:.2f} s of calls ({out[n]['measure_ratio']}x); "
              f"compile+measure {t2 - t0:.2f} s vs bare compile + calls {tb + work:.2f} s -> {out[n]['ratio']}x",
              flush=True)
    return out


def _rss_mb(pid: int) -> float:
    from benchmarks.upload_memory import rss_mb

    return rss_mb(pid)


def _fresh_bare(n: int) -> float:
    """Python + JAX + the bare compile in a new process (the app's worker is a new process)."""
    code = ("import sys; sys.path.insert(0, %r)\nfrom benchmarks.scaling import _load\nimport jax\n"
            "m = _load(%d)\njax.jit(m.model).lower(*m.inputs).compile()" % (ROOT, n))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=BASE_ENV)
    return time.perf_counter() - t0


GRAPH_FRAME = "iframe[title='app.views.xla_graph']"
BOXES = "(s) => [...document.querySelectorAll('#view-' + s + ' g.node')].filter(n => n.id.startsWith('L:')).length"
CLICK = """(id) => new Promise((done) => {
  const el = document.querySelector("#view-pre g[id='" + id + "']");
  const t0 = performance.now();
  el.dispatchEvent(new MouseEvent('click', {bubbles: true}));
  const lit = document.querySelectorAll('#view-post .hl, #view-post .me').length;
  requestAnimationFrame(() => requestAnimationFrame(() => done([performance.now() - t0, lit])));
})"""
OPEN = """(id) => new Promise((done) => {
  const t0 = performance.now();
  document.querySelector("#view-pre g[id='" + id + "']").dispatchEvent(new MouseEvent('dblclick', {bubbles: true}));
  (function poll() {
    const still = document.querySelector("#view-pre g[id='" + id + "']");
    const svg = document.querySelector('#view-pre svg[data-ready="1"]');
    if (!still && svg) requestAnimationFrame(() => done(performance.now() - t0));
    else if (performance.now() - t0 > 120000) done(-1);
    else setTimeout(poll, 20);
  })();
})"""


def browser(ns: list[int], trials: int = 1, port: int = 0) -> dict:
    """Each N ``trials`` times, each trial a new server with an empty store (so the program is
    compiled again) between two fresh bare compiles; the rows and the drawn ratios' median and
    range. ``port``: the server's (0: a free one)."""
    out = {}
    for n in ns:
        rows = [_browser_once(n, port) for _ in range(trials)]
        ratios = [r["drawn_ratio"] for r in rows if r.get("drawn_ratio")]
        out[n] = {"trials": rows, **({"drawn_ratio_median": round(statistics.median(ratios), 2),
                                      "drawn_ratio_range": [min(ratios), max(ratios)]} if ratios else {})}
    return out


def _browser_once(n: int, port: int = 0) -> dict:
    from playwright.sync_api import sync_playwright

    from analysis.service.store import Store

    # the bare compile beside it: once before and once after (this machine's compile times
    # drift by 2x within minutes), the ratio against their mean
    load_before = os.getloadavg()[0]
    bare_before = _fresh_bare(n)
    data = tempfile.mkdtemp(prefix="xla-scaling-")
    code_id = Store(os.path.join(data, "store.sqlite")).put_code(SOURCE[STACK](n))
    if not port:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", os.path.join(ROOT, "app", "main.py"),
                               "--server.headless", "true", "--server.port", str(port),
                               "--browser.gatherUsageStats", "false"], cwd=ROOT,
                              env={**BASE_ENV, "XLA_EXPLORER_DATA": data},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    row: dict = {}
    for _ in range(600):  # the server listening
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.2)
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium",
                                  args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = b.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/?model=softmax", timeout=120_000)  # the server warm
            page.wait_for_selector(GRAPH_FRAME, timeout=240_000)
            # an idle server, as a user finds it: the first page's job done and its spare
            # worker started (analysis.service.worker_process.keep_spare: 0.5 s after a job, then its
            # imports)
            time.sleep(5)
            row["server_rss_idle_mb"] = round(_rss_mb(server.pid))
            t0, t0_wall = time.perf_counter(), time.time()
            page.goto(f"http://127.0.0.1:{port}/?code={code_id}&backend=cpu", timeout=120_000)
            frame = None
            while frame is None and time.perf_counter() - t0 < 900:
                for f in page.frames:
                    if "xla_graph" in (f.url or "") and not f.is_detached():
                        try:
                            if (n < 2 or f.evaluate(BOXES, "pre") >= 2) and \
                                    f.locator("#view-post svg[data-ready='1']").count():
                                frame = f
                        except Exception:  # noqa: BLE001 - a frame swapped by a rerun
                            pass
                page.wait_for_timeout(100)
            if frame is None:  # what the page showed instead, kept
                row["graphs_drawn_s"] = None
                page.screenshot(path=os.path.join(OUT, f"scaling_{n}_not_drawn.png"))
                print(f"  browser N={n}: no graphs drawn in 900 s (scaling_{n}_not_drawn.png)", flush=True)
                return row
            # the moment the frame had both graphs in its page (graph_view.js: ``__xe_ready``, the
            # wall clock in ms); polling a browser that is busy drawing sees it up to a second later
            row["graphs_seen_s"] = round(time.perf_counter() - t0, 2)
            row["graphs_drawn_s"] = round(frame.evaluate("() => window.__xe_ready") / 1000 - t0_wall, 2)
            # a big program's graphs come before its timings (a notice says they follow)
            notice = page.get_by_text("kernel timings follow")
            row["drawn_while_measuring"] = notice.count() > 0
            page.screenshot(path=os.path.join(OUT, f"scaling_{n}_drawn.png"))
            while notice.count() and time.perf_counter() - t0 < 900:
                page.wait_for_timeout(200)
            row["timings_shown_s"] = round(time.perf_counter() - t0, 2)
            # the measured bundle's rerun (its payload sent and unpacked in the frame) done
            # before anything is timed, as it is once a user has the timings
            page.wait_for_timeout(500)
            while page.locator("[data-testid='stStatusWidget']").count() and time.perf_counter() - t0 < 900:
                page.wait_for_timeout(100)
            frame = next(f for f in page.frames if "xla_graph" in (f.url or "") and not f.is_detached())
            frame.wait_for_selector("#view-post svg[data-ready='1']", timeout=120_000)
            time.sleep(1)
            row["server_rss_drawn_mb"] = round(_rss_mb(server.pid))
            layer = f"L:layer{n // 2}" if n >= 2 else None
            if layer:
                clicks = [frame.evaluate(CLICK, layer) for _ in range(5)]
                row["click_to_paint_ms"] = round(statistics.median(c[0] for c in clicks), 1)
                row["click_lit_nodes"] = clicks[-1][1]
                # the clicks' reruns (the panels below follow the selection) finish first
                t1 = time.perf_counter()
                page.wait_for_timeout(500)
                while page.locator("[data-testid='stStatusWidget']").count() and time.perf_counter() - t1 < 120:
                    page.wait_for_timeout(100)
                row["rerun_after_click_s"] = round(time.perf_counter() - t1, 2)
                frame = next(f for f in page.frames if "xla_graph" in (f.url or "") and not f.is_detached())
                ms = frame.evaluate(OPEN, f"L:layer{n // 2 + 1}")
                row["open_layer_ms"] = round(ms) if ms >= 0 else None
                page.screenshot(path=os.path.join(OUT, f"scaling_{n}_open.png"))
            row["server_rss_after_mb"] = round(_rss_mb(server.pid))
            # and once the memory janitor's round (every 15 s) has handed free heap back:
            # the reading right after a view depends on how long ago the last round was
            time.sleep(16)
            row["server_rss_settled_mb"] = round(_rss_mb(server.pid))
            b.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    bare_after = _fresh_bare(n)
    row["fresh_bare_compile_before_after_s"] = [round(bare_before, 2), round(bare_after, 2)]
    row["fresh_bare_compile_s"] = round((bare_before + bare_after) / 2, 2)
    if row.get("graphs_drawn_s"):
        row["drawn_ratio"] = round(row["graphs_drawn_s"] / row["fresh_bare_compile_s"], 2)
    row["load_average_before_after"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
    print(f"  browser N={n}: {row}", flush=True)
    return row


def _fresh_bare_file(path: str) -> float:
    """``python`` running a model file and compiling its model, nothing of XLA Explorer imported:
    a bare compile of the file as its author would run it."""
    code = ("import runpy, jax\nns = runpy.run_path(%r, run_name='__main__')\n"
            "jax.jit(ns['model']).lower(*ns['example_inputs']()).compile()" % path)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.path.dirname(path), env=BASE_ENV)
    return time.perf_counter() - t0


def report_cli(ns: list[int], trials: int) -> dict:
    """``xla-explorer report stackN.py --html OUT`` as a user runs it (a fresh process; the
    model file compiled in the sandboxed worker, as by default) against a bare compile of the
    same file in a fresh process (``_fresh_bare_file``: Python, JAX, the file's inputs and
    ``jit(model).lower(*inputs).compile()``), alternated, their order flipped per trial."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for n in ns:
            path = os.path.join(d, f"stack{n}.py")
            with open(path, "w") as f:
                f.write(SOURCE[STACK](n))
            cli = [os.path.join(os.path.dirname(sys.executable), "xla-explorer"), "report", path,
                   "--html", os.path.join(d, "r.html")]
            bare_s, cli_s = [], []
            for t in range(trials):
                for which in (("bare", "cli") if t % 2 == 0 else ("cli", "bare")):
                    if which == "bare":
                        bare_s.append(_fresh_bare_file(path))
                    else:
                        t0 = time.perf_counter()
                        subprocess.run(cli, check=True, cwd=ROOT, env=BASE_ENV, capture_output=True)
                        cli_s.append(time.perf_counter() - t0)
                print(f"  N={n:<4} trial {t + 1}: fresh bare {bare_s[-1]:.2f} s, xla-explorer report {cli_s[-1]:.2f} s",
                      flush=True)
            mb, mc = statistics.median(bare_s), statistics.median(cli_s)
            out[n] = {"fresh_bare_compile_s": round(mb, 3), "report_cli_s": round(mc, 3), "ratio": round(mc / mb, 2),
                      "bare_s": [round(x, 2) for x in bare_s], "cli_s": [round(x, 2) for x in cli_s]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="1,12,48,96,192")
    ap.add_argument("--trials", type=int, default=3)  # a median of two is their mean: one outlier moves it
    ap.add_argument("--measure", default="12")
    ap.add_argument("--browser", default="1,12,192")
    ap.add_argument("--report", default="12,96")  # of --ns: the report timed beside them too
    ap.add_argument("--report-cli", default="96")  # xla-explorer report in a fresh process vs a fresh bare compile
    ap.add_argument("--browser-trials", type=int, default=1)  # each a new server and store
    ap.add_argument("--port", type=int, default=0)  # the browser runs' server (0: a free port)
    ap.add_argument("--stack", default="plain", choices=sorted(SOURCE))
    a = ap.parse_args()
    global STACK
    STACK = BASE_ENV["XLA_EXPLORER_BENCH_STACK"] = a.stack  # (the fresh processes' ``_load`` too)
    ints = lambda s: [int(x) for x in s.split(",") if x.strip()]  # noqa: E731
    os.makedirs(OUT, exist_ok=True)
    res = {"machine": f"{os.cpu_count()} cores", "when": time.strftime("%Y-%m-%d %H:%M"), "stack": a.stack}
    print("first graph, in-process (interleaved):", flush=True)
    res["first_graph"] = first_graph(ints(a.ns), a.trials, ints(a.report))
    if a.report_cli:
        print("xla-explorer report, a fresh process each (alternated):", flush=True)
        res["report_cli"] = report_cli(ints(a.report_cli), a.trials)
    if a.measure:
        print("--measure:", flush=True)
        res["measure"] = measured(ints(a.measure))
    if a.browser:
        print("browser:", flush=True)
        res["browser"] = browser(ints(a.browser), a.browser_trials, a.port)
        m = {n: r["trials"][-1] for n, r in res["browser"].items()}
        # the goal's baseline is N=12 (a small program's page), when it was measured
        lo, hi = (12 if 12 in m else min(m)), max(m)
        if m[lo].get("server_rss_drawn_mb") and m[hi].get("server_rss_drawn_mb"):
            res["memory_ratio"] = round(m[hi]["server_rss_after_mb"] / m[lo]["server_rss_after_mb"], 2)
            res["memory_ratio_settled"] = round(m[hi]["server_rss_settled_mb"] / m[lo]["server_rss_settled_mb"], 2)
    with open(os.path.join(OUT, "scaling.json" if a.stack == "plain" else f"scaling_{a.stack}.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("\n| N | kernels | bare compile | first graph | ratio | report | ratio |")
    print("|---|---|---|---|---|---|---|")
    for n, r in res["first_graph"].items():
        rep = r.get("report")
        print(f"| {n} | {r['kernels']} | {r['bare_compile_s']:.2f} s | {r['first_graph_s']:.2f} s | {r['ratio']}x | "
              + (f"{rep['total_s']:.2f} s | {rep['ratio']}x |" if rep else "– | – |"))
    for n, r in (res.get("report_cli") or {}).items():
        print(f"xla-explorer report, N={n}: {r['report_cli_s']:.2f} s against a fresh bare compile's "
              f"{r['fresh_bare_compile_s']:.2f} s: {r['ratio']}x")
    print(json.dumps({k: v for k, v in res.items() if k != "first_graph"}, indent=1))


if __name__ == "__main__":
    main()
