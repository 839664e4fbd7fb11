"""A PyTorch transformer block pasted into the app (a ``code=`` link to the server's stored code,
as the Share area makes), in Chromium: it compiles through torchax in the sandboxed worker, both
graphs are drawn with fused kernels, and the Layers view shows the module's own names
(``layers.0``, ``layers.1`` of its ``nn.ModuleList``). Skipped where the [torch] extra is absent."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("torchax", reason="the [torch] extra is not installed here")

from tests.scenarios.test_browser import OUT, browser, server  # noqa: F401,E402 - fixtures
from tests.scenarios.test_browser_graph import VIEWPORT, _frame  # noqa: E402
from tests.scenarios.test_browser_real_programs import BOXES  # noqa: E402

pytestmark = pytest.mark.browser

BLOCK = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        h = self.ln(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(x)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.stack = nn.ModuleList([Block(), Block(), Block()])
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        for block in self.stack:
            x = block(x)
        return self.head(x)


model = Encoder()


def example_inputs():
    return (torch.randn(2, 8, 32),)
'''


def test_a_pasted_torch_block_draws_both_graphs_and_its_modules_as_layers(server, browser):  # noqa: F811
    from analysis.service.store import default_store

    cid = default_store().put_code(BLOCK)
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{server}/?code={cid}")
    f = _frame(page, 300)
    # both graphs are drawn, the optimized one with fusions
    f.wait_for_function("() => document.querySelectorAll('#view-post g.node').length > 0", timeout=60_000)
    assert f.evaluate("() => document.querySelectorAll('#view-pre g.node').length") > 0
    fused = f.evaluate("() => [...document.querySelectorAll('#view-post g.node text')].map(t => t.textContent)"
                       ".filter(t => /fusion/.test(t)).length")
    assert fused > 0
    f.locator("#layersB").click()
    want = ["L:head", "L:stack.0", "L:stack.1", "L:stack.2"]  # the names the file's module gives
    try:
        f.wait_for_function(f"() => ({BOXES})('pre').length === {len(want)}", timeout=60_000)
    except Exception:
        raise AssertionError(f.evaluate(BOXES, "pre")) from None
    assert f.evaluate(BOXES, "pre") == want
    page.screenshot(path=os.path.join(OUT, "torch_block_layers.png"))


def test_compare_shows_xla_beside_inductor_layer_by_layer_and_measured(server, browser):  # noqa: F811
    """The gallery's torch_mlp on the Compare page, "XLA beside Inductor", measured (one job: both
    compilers, each kernel timed, the two whole calls alternated), in presentation mode (its tables
    are the page's text): every layer the module names has its kernels from both compilers, the
    GELU's layer holds aten::gelu on both sides, the whole calls carry their spreads and a verdict
    line, and the address keeps the comparison."""
    import re

    from sample_models import gallery

    src = gallery()["torch_mlp"].path.read_text()
    layers = re.findall(r"self\.(\w+) = nn\.", src)  # the module's own names: hidden, act, out
    assert len(layers) == 3
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(f"{server}/Compare?mode=inductor&model=torch_mlp&measure=1&present=1")
    page.get_by_text("Where the two compilers group the ops differently").wait_for(timeout=300_000)
    assert page.get_by_test_id("stException").count() == 0
    table = page.locator("[data-testid='stTable'] table").last
    table.locator("tbody tr").first.wait_for(timeout=60_000)
    rows = table.locator("tbody tr").evaluate_all(
        "trs => trs.map(tr => [...tr.querySelectorAll('th, td')].map(c => c.innerText.trim()))")
    head = table.locator("thead th").evaluate_all("ths => ths.map(t => t.innerText.trim())")
    assert head[-7:] == ["Layer", "Compiler", "Kernel", "Runs as", "Torch ops of this layer", "Also holds ops of",
                         "Time per call"], head
    rows = [r[-7:] for r in rows]
    seen = {(r[0], r[1]) for r in rows}
    for layer in layers:
        assert (layer, "XLA") in seen and (layer, "Inductor") in seen, (layer, sorted(seen))
    gelu = [r for r in rows if r[0] == "act"]
    assert {r[1] for r in gelu if "aten::gelu" in r[4]} == {"XLA", "Inductor"}
    # measured: every kernel row of its own layer has a time; the whole calls their spreads
    assert all(r[6] for r in rows if not r[2].startswith("(none")), rows
    body = page.locator("body").inner_text()
    assert re.search(r"medians and interquartile ranges of \d+ alternated calls each", body)
    assert "Verdict:" in body
    # the gallery's lesson on where the two compilers fuse differently, every claim holding here
    assert "Lesson: torch_mlp: where XLA and Inductor fuse differently" in body
    assert body.count("✔ ") == 4 and "✘" not in body
    assert "mode=inductor" in page.url and "model=torch_mlp" in page.url
    page.screenshot(path=os.path.join(OUT, "compare_inductor_present.png"))
