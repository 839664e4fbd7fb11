"""Graphviz against in-browser layout engines on the graphs a big program shows.

The graphs are those of ``benchmarks/scaling.py``'s N-layer transformer stack: the layers view of
the optimized module (what a big program opens with) and its every-kernel view (Collapse all).
Each is laid out, side by side in one run, by

- Graphviz ``dot`` (what the app uses; ``analysis.render.graphviz_runner.render_svg``, as the app calls it),
- dagre (``@dagrejs/dagre``) and ELK's layered algorithm (``elkjs``) in Chromium, timed in the page.

dagre and ELK are fetched from the npm registry into ``benchmarks/out/js/`` the first time (they
are not part of the project: only this measurement uses them). Every engine gets the same nodes,
sized from their labels, and the same edges; only the time to positions is compared (Graphviz
also draws the SVG, which the in-browser engines would still have to do).

    .venv/bin/python benchmarks/layout_engines.py [--ns 48,192] [--repeats 3]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tarfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
JS = os.path.join(ROOT, "benchmarks", "out", "js")
PACKAGES = {  # file in the package -> its tarball on the npm registry
    "dagre.min.js": ("https://registry.npmjs.org/@dagrejs/dagre/-/dagre-1.1.4.tgz", "package/dist/dagre.min.js"),
    "elk.bundled.js": ("https://registry.npmjs.org/elkjs/-/elkjs-0.9.3.tgz", "package/lib/elk.bundled.js"),
}


def fetch_js() -> dict[str, str]:
    os.makedirs(JS, exist_ok=True)
    out = {}
    for name, (url, member) in PACKAGES.items():
        path = os.path.join(JS, name)
        if not os.path.exists(path):
            with urllib.request.urlopen(url, timeout=60) as r:
                data = r.read()
            with tarfile.open(fileobj=io.BytesIO(data)) as t:
                with open(path, "wb") as f:
                    f.write(t.extractfile(member).read())
        with open(path) as f:
            out[name] = f.read()
    return out


def graphs(n: int) -> dict:
    from analysis.compile.stages import compile_model
    from app import graph_payload
    from benchmarks.scaling import _load

    b = compile_model(_load(n), "cpu").bundle
    specs = graph_payload.variant_specs(b, ["layers", "collapsed"])
    return {f"N={n} {name}": specs["post"][name] for name in ("layers", "collapsed")}


def as_plain(spec) -> dict:
    """Nodes with sizes (points, from their labels, as Graphviz sizes a 14 pt box) and edges."""
    nodes = []
    for nid, node in spec.nodes.items():
        lines = node.label.split("\n")
        nodes.append({"id": nid, "width": 7.5 * max(len(x) for x in lines) + 12, "height": 17 * len(lines) + 8})
    ids = {x["id"] for x in nodes}
    edges = [[e.src, e.dst] for e in spec.edges if e.src in ids and e.dst in ids]
    return {"nodes": nodes, "edges": edges}


PAGE_JS = """async (g) => {
  const out = {};
  let t0 = performance.now();
  try {
  const d = new dagre.graphlib.Graph({multigraph: true}); d.setGraph({rankdir: 'TB', nodesep: 18, ranksep: 25}); d.setDefaultEdgeLabel(() => ({}));
  g.nodes.forEach((n) => d.setNode(n.id, {width: n.width, height: n.height}));
  g.edges.forEach((e, i) => d.setEdge(e[0], e[1], {}, 'e' + i));
  dagre.layout(d);
  out.dagre_s = (performance.now() - t0) / 1000;
  } catch (e) { out.dagre_s = null; out.dagre_error = String(e).slice(0, 120); }
  const elk = new ELK();
  t0 = performance.now();
  try {
  await elk.layout({id: 'root', layoutOptions: {'elk.algorithm': 'layered', 'elk.direction': 'DOWN'},
                    children: g.nodes.map((n) => ({id: n.id, width: n.width, height: n.height})),
                    edges: g.edges.map((e, i) => ({id: 'e' + i, sources: [e[0]], targets: [e[1]]}))});
  out.elk_s = (performance.now() - t0) / 1000;
  } catch (e) { out.elk_s = null; out.elk_error = String(e).slice(0, 120); }
  return out;
}"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="48,192")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from analysis.render.graphviz_runner import render_svg

    js = fetch_js()
    todo = {}
    for n in [int(x) for x in a.ns.split(",")]:
        todo.update(graphs(n))
    res = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.set_content("<html><body></body></html>")
        page.add_script_tag(content=js["dagre.min.js"])
        page.add_script_tag(content=js["elk.bundled.js"])
        for name, spec in todo.items():
            plain, dot = as_plain(spec), spec.to_dot()
            row = {"nodes": len(plain["nodes"]), "edges": len(plain["edges"]), "graphviz_s": [], "dagre_s": [], "elk_s": []}
            for _ in range(a.repeats):  # interleaved: Graphviz, then both in the page
                t0 = time.perf_counter()
                try:
                    render_svg(dot, timeout=300)
                    row["graphviz_s"].append(time.perf_counter() - t0)
                except RuntimeError:
                    row["graphviz_s"].append(float("inf"))
                r = page.evaluate(PAGE_JS, plain)
                for eng in ("dagre", "elk"):
                    row[eng + "_s"].append(r[eng + "_s"])
                    if r.get(eng + "_error"):
                        row[eng + "_error"] = r[eng + "_error"]
            for k in ("graphviz_s", "dagre_s", "elk_s"):
                done = [x for x in row[k] if x is not None]
                row[k] = round(statistics.median(done), 3) if done else None
            for eng in ("dagre", "elk"):
                if row[eng + "_s"] is not None:
                    row[eng + "_vs_graphviz"] = round(row[eng + "_s"] / row["graphviz_s"], 2)
            res[name] = row
            print(name, row, flush=True)
        browser.close()
    with open(os.path.join(ROOT, "benchmarks", "out", "layout_engines.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
