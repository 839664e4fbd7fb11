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
