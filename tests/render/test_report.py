"""The self-contained HTML report: what it contains, that it escapes what it shows, that it
opens in a real browser with the network blocked and loads nothing, and the CLI `report`."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import xml.dom.minidom
import zlib

import pytest

from analysis.bundle.core import Bundle, bundle_from_hlo
from analysis.render.report import exports, graph_exports, html_report
from analysis.render.format import human_bytes
from tests.paths import ROOT

OUT = os.path.join(ROOT, "test-output", "report")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def tb(gallery_bundle):
    # a JSON round trip: the report reads only what a saved bundle holds
    return Bundle.from_json(gallery_bundle("transformer_block").to_json())


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """mlp compiled, measured and compared with fusion off (its own copy: it is modified)."""
    pytest.importorskip("jax")
    from analysis.compile import fusion_off, measure, stages

    c = stages.analyze_model("mlp", "cpu")
    measure.measure(c, iterations=5)
    fusion_off.compare_fusion(c, measure_it=True, iterations=5)
    return Bundle.from_json(c.bundle.to_json())


@pytest.fixture(scope="module")
def report_file(tb):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "transformer_block.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(html_report(tb))
    return path


def _network_refs(page: str) -> list[str]:
    """Anything that would make a browser fetch: src/href/url() to another origin, <link>."""
    refs = re.findall(r"""<(?:script|img|iframe|link|source|video|audio|embed)\b[^>]*\b(?:src|href)\s*=\s*["']?([^"'\s>]+)""",
                      page, re.I)
    refs += re.findall(r"""url\(\s*["']?(https?:[^"')]+)""", page, re.I)
    refs += re.findall(r"""@import\s+["']?([^"';]+)""", page, re.I)
    return [r for r in refs if not r.startswith(("data:", "#", "blob:"))]


def test_report_holds_graphs_kernels_and_numbers(tb):
    page = html_report(tb)
    m = tb.metrics
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # both graphs as inline SVG, every element id prefixed by its side so the two never clash
    assert page.count("<svg") >= 2 and 'id="pre-op:' in page and 'id="post-k:' in page
    ids = re.findall(r'<g id="([^"]+)" class="(?:node|cluster)"', page)
    assert len(ids) == len(set(ids)) > 20
    for k in tb.kernels:
        assert f"id='kernel-{k.name}'" in page  # a table row per kernel
    assert f"{m['compute_ops_before']} → {m['kernels_after']}" in page
    assert f"{m['fusion_coverage']:.0%}" in page
    assert human_bytes(m["bytes_saved"]) in page
    assert f"YNNPACK {m['kernels_by_library']['YNNPACK']}" in page
    assert "Layout / copy" in page and "XLA emitter" in page  # the legend
    # the source with line anchors, and kernels linking to the lines they came from
    n_lines = len(tb.source["code"].splitlines())
    assert f"id='L{n_lines}'" in page
    for k in tb.kernels:
        for f, line in k.source_lines:
            if f == tb.source["file"]:
                assert f"href='#L{line}'" in page
    # the charts drawn as SVG, no chart library in the page, and nothing to fetch
    assert "chart-Top_kernels" in page and "chart-Treemap" in page and page.count("<svg id='chart-") >= 2
    assert "plotly" not in page.lower()
    assert _network_refs(page) == []
    assert "Content-Security-Policy" in page
    # the bundle is inside, deflated and intact, for "Download bundle JSON"
    embedded = re.search(r"<script type='application/octet-stream' id='xe-bundle'[^>]*>(.*?)</script>", page, re.S).group(1)
    assert Bundle.from_json(zlib.decompress(base64.b64decode(embedded)).decode()).to_json() == tb.to_json()


def test_a_bundle_too_big_to_embed_is_left_out_and_the_footer_says_so(tb, monkeypatch):
    from analysis.render import report

    size = len(tb.to_json())
    monkeypatch.setattr(report, "MAX_EMBEDDED_BUNDLE", size // 2)  # this bundle, twice too big
    page = html_report(tb)
    assert "id='xe-bundle'" not in page and "<button id='dl-bundle'>" not in page
    assert "not in this file" in page and "--out FILE.json" in page
    monkeypatch.setattr(report, "MAX_EMBEDDED_BUNDLE", size + 1000)  # and one that fits
    page = html_report(tb)
    assert "<button id='dl-bundle'>" in page and f"bundle {tb.content_hash()}" in page and "not in this file" not in page


def test_measured_report_has_timings_charts_and_fusion_comparison(measured):
    page = html_report(measured)
    t = measured.timings
    assert "time / step" in page and "% of roof" in page and "% of peak" not in page and "Step (median)" in page
    for name in t["kernels"]:
        assert f"id='kernel-{name}'" in page
    assert "chart-Timeline" in page and "chart-Roofline" in page
    assert "What fusion saved" in page and "fusion off" in page and "chart-fusion" in page
    assert _network_refs(page) == []
    with open(os.path.join(OUT, "mlp_measured.html") if os.makedirs(OUT, exist_ok=True) is None else "", "w") as f:
        f.write(page)


def test_report_without_source_or_pre_graph():
    hlo = """HloModule m, is_scheduled=true

fused (p: f32[8]) -> f32[8] {
  p = f32[8]{0} parameter(0)
  e = f32[8]{0} exponential(p)
  ROOT n = f32[8]{0} negate(e)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  ROOT f = f32[8]{0} fusion(x), kind=kLoop, calls=fused
}
"""
    b = bundle_from_hlo(hlo, "<b>m</b>&", "x.hlo")
    page = html_report(b)
    assert "No pre-optimization HLO" in page and 'id="post-k:f"' in page
    assert "<b>m</b>" not in page and "&lt;b&gt;m&lt;/b&gt;&amp;" in page


def test_user_text_is_escaped(gallery_bundle):
    b = Bundle.from_json(gallery_bundle("mlp").to_json())
    evil = "</script><script>alert(1)</script><!--"
    b.source["code"] = b.source["code"] + f"\n# {evil}\n"
    b.source["name"] = evil
    b.source["description"] = evil + "\n" + evil
    page = html_report(b)
    assert "<script>alert(1)" not in page
    # inside the embedded JSON the closing tag is escaped, and the JSON still holds the text
    assert page.count("</script>") == page.count("<script")


def test_the_report_inlines_the_files_the_apps_component_serves(tb):
    """One source for both front ends: the app's component is the folder ``assets/`` (its
    ``index.html`` loads real files of it, no long inline script and no link), and the report
    inlines the same files' texts (pan/zoom, the helpers, and with code the Code pane)."""
    from analysis.codegen import kernel_code
    from analysis.render import web_assets

    assets = web_assets.COMPONENT_DIR
    index = web_assets.text("index.html")
    loaded = re.findall(r"<script src=\"([^\"]+)\"></script>", index) + re.findall(r"<link rel=\"stylesheet\" href=\"([^\"]+)\">", index)
    assert {"graph.js", "helpers.js", "code_pane.js", "graph_view.js", "code_pane.css", "graph_view.css"} <= set(loaded)
    assert all(os.path.isfile(os.path.join(assets, f)) for f in loaded)
    inline = re.findall(r"<script>(.*?)</script>", index, re.S) + re.findall(r"<style>(.*?)</style>", index, re.S)
    assert sum(t.count("\n") + 1 for t in inline) <= 3
    assert not any(os.path.islink(os.path.join(assets, f)) for f in os.listdir(assets))
    with open(os.path.join(ROOT, "app", "views.py"), encoding="utf-8") as f:
        assert 'declare_component("xla_graph", path=COMPONENT_DIR)' in f.read()
    page = html_report(tb)
    for name in ("helpers.js", "graph.js", "report.js"):
        assert web_assets.text(name) in page
    assert kernel_code.has_code(tb)
    assert web_assets.text("code_pane.js") in page and web_assets.text("code_pane.css") in page


def test_graph_exports_and_downloads(tb):
    ex = graph_exports(tb)
    assert set(ex) == {f"transformer_block.{s}.{e}" for s in ("before", "after") for e in ("dot", "svg")}
    mime, svg = ex["transformer_block.after.svg"]
    assert mime == "image/svg+xml"
    doc = xml.dom.minidom.parseString(svg)  # well-formed XML
    assert doc.documentElement.tagName == "svg"
    assert ex["transformer_block.before.dot"][1].startswith(b"digraph")
    all_ = exports(tb)
    assert Bundle.from_json(all_["transformer_block.bundle.json"][1]).to_json() == tb.to_json()
    assert all_["transformer_block.report.html"][0] == "text/html"
    assert not any(n.endswith(".trace.json.gz") for n in all_)  # not measured


def test_trace_export_of_a_measured_bundle(measured):
    import gzip

    ex = exports(measured, report=False)
    if measured.timings.get("trace_json_gz_b64"):
        raw = ex["mlp.trace.json.gz"][1]
        assert json.loads(gzip.decompress(raw))["traceEvents"]
    assert "mlp.report.html" not in ex


# ----------------------------------------------------------------------------- in a browser


@pytest.mark.browser
def test_report_opens_offline_in_chromium(report_file, tb):
    if not os.path.exists(CHROMIUM):
        pytest.fail("chromium is not installed (the README's test command installs it)")
    from playwright.sync_api import sync_playwright

    requests, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1050})

            def route(r):
                url = r.request.url
                if url.startswith(("file://", "data:", "blob:")):
                    r.continue_()
                else:
                    requests.append(url)
                    r.abort()

            page.route("**/*", route)
            page.on("request", lambda r: None if r.url.startswith(("file://", "data:", "blob:")) else requests.append(r.url))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto("file://" + report_file)
            page.wait_for_selector("#graph-post svg g.node", timeout=30_000)
            assert page.locator("#graph-pre svg g.node").count() > 0
            assert page.locator("#kernel-table tbody tr").count() == len(tb.kernels)
            # the charts, drawn: the treemap's boxes and the top kernels' bars have an area on screen
            assert page.locator("svg.xe-chart").count() >= 2
            for chart in ("#chart-Treemap", "#chart-Top_kernels"):
                box = page.locator(f"{chart} rect[data-kernel]").first.bounding_box()
                assert box and box["width"] > 1 and box["height"] > 1, chart
            # a kernel's bar selects that kernel: its row in the table lights up
            bar = page.locator("#chart-Top_kernels rect[data-kernel]").first
            name = bar.get_attribute("data-kernel")
            bar.click()
            page.locator(f"tr.xe-hl[data-kernel='{name}']").wait_for(timeout=30_000)
            page.screenshot(path=os.path.join(OUT, "report-top.png"))
            # click a fusion kernel: the ops it absorbed light up on the left, its table row too
            fusion = next(k for k in tb.kernels if k.fused_ops and k.name in (tb.provenance.kernel_to_pre or {}))
            page.locator(f"#graph-post [id='post-k:{fusion.name}']").dispatch_event("click", {"bubbles": True})
            page.locator(f"tr.xe-hl[data-kernel='{fusion.name}']").wait_for(timeout=30_000)
            lit = page.locator("#graph-pre g.node.xe-hl").count()
            assert lit == len([o for o in tb.provenance.kernel_to_pre[fusion.name]
                               if page.locator(f"#graph-pre [id='pre-op:{o}']").count()])
            assert lit > 0
            assert page.locator(f"tr.xe-hl[data-kernel='{fusion.name}']").count() == 1
            # a source link in the table jumps to the line
            line = fusion.source_lines[0][1]
            page.locator(f"tr[data-kernel='{fusion.name}'] a[href='#L{line}']").click()
            assert page.evaluate("location.hash") == f"#L{line}"
            page.screenshot(path=os.path.join(OUT, "report-full.png"), full_page=True)
        finally:
            browser.close()
    assert requests == [], requests
    assert errors == [], errors


# ----------------------------------------------------------------------------- CLI


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "analysis.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_cli_report(tb, tmp_path):
    src = tmp_path / "tb.json"
    tb.save(src)
    out = tmp_path / "tb.html"
    r = _cli("report", str(src), "--html", str(out), "--svg-dir", str(tmp_path / "svg"))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert 'id="post-k:' in page and all(f"kernel-{k.name}" in page for k in tb.kernels)
    assert sorted(os.listdir(tmp_path / "svg")) == sorted(f"transformer_block.{s}.{e}" for s in ("after", "before")
                                                         for e in ("dot", "svg"))
    hlo = tmp_path / "m.hlo"
    hlo.write_text(tb.stages["hlo_after"])
    r = _cli("report", str(hlo), "--html", str(tmp_path / "m.html"))
    assert r.returncode == 0 and "No pre-optimization HLO" in (tmp_path / "m.html").read_text()


@pytest.mark.parametrize("args, expect", [
    (["report", "no_such_model", "--html", "x.html"], "error"),
    (["report", "missing.json", "--html", "x.html"], "load error at missing.json: no such file"),
    (["report", "mlp", "--html", "/no/such/dir/x.html"], "write error"),
])
def test_cli_report_errors(args, expect):
    r = _cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and expect in r.stderr and "Traceback" not in r.stderr


def test_cli_report_needs_html():
    r = _cli("report", "mlp")
    assert r.returncode == 2 and "--html" in r.stderr
