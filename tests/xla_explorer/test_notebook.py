"""The explorer in a notebook (xla_explorer): a notebook executed by nbclient on a real
IPython kernel shows the explorer for a function, for an HLO text and for a %%xla_explorer cell,
says a bad input in one line, and its output, opened in Chromium, lights up the ops a kernel
does when that kernel is clicked."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.paths import ROOT

pytest.importorskip("jax")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

HLO = """HloModule jit_two, is_scheduled=true
%fa (x: f32[256]) -> f32[256] {
  %x = f32[256]{0} parameter(0)
  %n = f32[256]{0} negate(%x)
  ROOT %e = f32[256]{0} exponential(%n)
}
ENTRY %main (p: f32[256]) -> f32[256] {
  %p = f32[256]{0} parameter(0)
  %neg_exp = f32[256]{0} fusion(%p), kind=kLoop, calls=%fa
  ROOT %t = f32[256]{0} tanh(%neg_exp)
}
"""

CELLS = [
    # a user's function, as they would write it
    "import json\n"
    "import jax, jax.numpy as jnp\n"
    "import xla_explorer as xe\n"
    "\n"
    "@jax.jit\n"
    "def gelu_mlp(x, w):\n"
    "    h = x @ w\n"
    "    return 0.5 * h * (1 + jnp.tanh(0.79788456 * (h + 0.044715 * h ** 3)))\n"
    "\n"
    "e = xe.show(gelu_mlp, jnp.ones((32, 64)), jnp.ones((64, 128)))\n"
    "fusion = next(k for k in e.bundle.kernels if len(e.bundle.provenance.kernel_to_pre.get(k.name, [])) > 1)\n"
    "print(json.dumps({fusion.name: e.bundle.provenance.kernel_to_pre[fusion.name]}))\n"
    "e",
    f"xe.show({HLO!r})",
    "%load_ext xla_explorer",
    "%%xla_explorer\n"
    "import jax.numpy as jnp\n"
    "def model(x):\n"
    "    return jnp.exp(jnp.sin(x)) * 2\n"
    "def example_inputs():\n"
    "    return (jnp.ones((128,)),)",
    "xe.show('neither HLO nor a bundle nor a path')",
]


def _html(cell) -> str:
    outs = [o for o in cell.outputs if o.get("output_type") in ("execute_result", "display_data")]
    assert outs, cell.outputs
    return outs[-1]["data"]["text/html"]


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nb.cells[-1].metadata["tags"] = ["raises-exception"]  # the bad input: the cell fails, in one line
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": ROOT}}).execute()
    path = tmp_path_factory.mktemp("nb") / "explore.ipynb"
    nbformat.write(nb, str(path))
    return nb


def test_a_function_an_hlo_text_and_a_cell_are_shown_inline(executed):
    fn, hlo, _, cell, _ = executed.cells
    for c in (fn, hlo, cell):
        page = _html(c)
        assert page.startswith("<iframe class='xla-explorer'") and "srcdoc=" in page
        assert "graph-post" in page and "kernel-table" in page
    assert not [o for c in executed.cells[:-1] for o in c.outputs if o.get("output_type") == "error"]
    # the HLO the test wrote: its two kernels, the fusion and the tanh, are the graph's
    page = _html(hlo)
    assert "post-k:neg_exp" in page and "post-k:t" in page
    assert "jit_two" in page


def test_a_bad_input_is_one_line_in_the_notebook(executed):
    bad = executed.cells[-1]
    out = _stdout(bad).strip().splitlines()
    assert len(out) == 1 and out[0].startswith("xla-explorer: load error") and "HloModule" in out[0], out
    assert not [o for o in bad.outputs if o.get("output_type") == "error" and o.get("traceback")], bad.outputs


def test_the_notebooks_output_lights_a_kernels_ops_in_chromium(executed, tmp_path):
    if not os.path.exists(CHROMIUM):
        pytest.fail("chromium is not installed (the README's test command installs it)")
    from playwright.sync_api import sync_playwright

    fn = executed.cells[0]
    (kernel, ops), = json.loads(_stdout(fn).strip().splitlines()[-1]).items()
    page_file = tmp_path / "output.html"
    page_file.write_text("<!doctype html><html><body>" + _html(fn) + "</body></html>", encoding="utf-8")
    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto("file://" + str(page_file))
            frame = page.frame_locator("iframe.xla-explorer")
            frame.locator("#graph-post svg g.node").first.wait_for(timeout=30_000)
            frame.locator(f"#graph-post [id='post-k:{kernel}']").dispatch_event("click", {"bubbles": True})
            frame.locator(f"tr.xe-hl[data-kernel='{kernel}']").wait_for(timeout=30_000)
            drawn = [o for o in ops if frame.locator(f"#graph-pre [id='pre-op:{o}']").count()]
            lit = frame.locator("#graph-pre g.node.xe-hl").count()
            assert drawn and lit == len(drawn)
        finally:
            browser.close()
    assert errors == [], errors


# ----------------------------------------------------------------------------- weight

SMALL_CELLS = [
    "import jax.numpy as jnp\n"
    "import xla_explorer as xe\n"
    "\n"
    "def two_ops(x):\n"
    "    return jnp.tanh(jnp.exp(x))\n"
    "\n"
    "xe.show(two_ops, jnp.ones((256,)))",
    "def scale_shift(x, y):\n"
    "    return jnp.sin(x) * 2.0 + y\n"
    "\n"
    "xe.show(scale_shift, jnp.ones((64, 64)), jnp.ones((64, 64)))",
]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Two cells, each showing a small function, executed and saved as a user's notebook is."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in SMALL_CELLS]
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": ROOT}}).execute()
    path = tmp_path_factory.mktemp("nb") / "small.ipynb"
    nbformat.write(nb, str(path))
    return nb, path


def _page(cell) -> str:
    """The page inside a cell's output (its iframe's srcdoc, unescaped)."""
    import html

    import re

    return html.unescape(re.search(r'srcdoc="([^"]*)"', _html(cell)).group(1))


def test_two_small_cells_weigh_under_a_megabyte_and_draw_both_graphs_and_the_charts(small):
    import re

    nb, path = small
    assert os.path.getsize(path) <= 1_000_000, os.path.getsize(path)
    ops = (("exp", "tanh"), ("sin", "mul", "add"))  # what each function does: JAX names its ops so
    for cell, wanted in zip(nb.cells, ops):
        page = _page(cell)
        # both graphs laid out in the page: the ops before optimization, the kernels after
        pre = re.search(r"id='graph-pre'>.*?<svg.*?</svg>", page, re.S)
        post = re.search(r"id='graph-post'>.*?<svg.*?</svg>", page, re.S)
        assert pre and post
        pre_ops = re.findall(r'id="pre-op:([^"]+)"', pre.group(0))
        for op in wanted:
            assert any(o.startswith(op) for o in pre_ops), (op, pre_ops)
        assert re.findall(r'id="post-k:([^"]+)"', post.group(0))
        # the charts drawn in the page, no chart library in it
        assert page.count("<svg id='chart-") >= 2 and "plotly" not in page.lower()


@pytest.mark.browser
def test_a_saved_output_draws_its_graphs_and_charts_offline(small, tmp_path):
    if not os.path.exists(CHROMIUM):
        pytest.fail("chromium is not installed (the README's test command installs it)")
    from playwright.sync_api import sync_playwright

    nb, _ = small
    page_file = tmp_path / "output.html"
    page_file.write_text("<!doctype html><html><body>" + _html(nb.cells[1]) + "</body></html>", encoding="utf-8")
    requests, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})

            def route(r):  # the network is off: anything but the file itself is refused
                if r.request.url.startswith(("file://", "data:", "blob:", "about:")):
                    r.continue_()
                else:
                    requests.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto("file://" + str(page_file))
            frame = page.frame_locator("iframe.xla-explorer")
            for side in ("pre", "post"):
                frame.locator(f"#graph-{side} svg g.node").first.wait_for(timeout=30_000)
            charts = frame.locator("svg.xe-chart")
            assert charts.count() >= 2
            bar = frame.locator("#chart-Top_kernels rect[data-kernel]").first
            bar.scroll_into_view_if_needed()
            box = bar.bounding_box()
            assert box and box["width"] > 1 and box["height"] > 1
        finally:
            browser.close()
    assert requests == [], requests
    assert errors == [], errors


def test_a_big_functions_layer_graphs_are_made_beside_its_compile(monkeypatch):
    """``xe.show`` of a function makes its page's layer graphs while XLA compiles it (as the
    command's report does, ``report_layers.LayersAhead``): the page finds them made."""
    from analysis.compile.load import load_source
    from analysis.render import layer_graph, report_layers
    from sample_models._stack import shared_stack_source

    import xla_explorer as xe

    monkeypatch.setattr(layer_graph, "OPEN_AS_LAYERS", 100)  # three layers opened as a big program's
    report_layers.LAYER_GRAPHS.clear()
    m = load_source(shared_stack_source(3), "shared3.py", "shared3")
    shown = xe.show(m.model, *m.inputs, backend="cpu")
    made = report_layers.LAYER_GRAPHS.get(shown.bundle, lambda: None)  # None: not made beside the compile
    assert made is not None and made["maps"]["order"] == ["L:layer0", "L:layer1", "L:layer2"]
    assert "id='xe-layers'" in shown.html()
