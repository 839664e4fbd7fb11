"""Three real programs (``tests/real_programs/``) pasted into the app as a user would (a ``code=``
link to the server's stored code), in Chromium: each compiles, its Layers view shows the
program's own module names (a Linen model's one root module looked through, a scanned stack as
one layer with its repeat count), and the layers view's title adds up to the summary strip."""

from __future__ import annotations

import os
import re

import pytest

from tests.scenarios.test_browser import OUT, browser, server  # noqa: F401 - fixtures
from tests.scenarios.test_browser_graph import VIEWPORT, _frame
from tests.paths import REAL_PROGRAMS

pytestmark = pytest.mark.browser
PROGRAMS_DIR = REAL_PROGRAMS

BOXES = "(s) => [...document.querySelectorAll('#view-' + s + ' g.node')].filter(n => n.id.startsWith('L:')).map(n => n.id).sort()"


@pytest.mark.parametrize("name, layers, label", [
    # Flax Linen: every layer inside the one root module ResNet, which the view looks through
    ("linen_resnet", ["ResNet/ResNetBlock_0", "ResNet/ResNetBlock_1", "ResNet/ResNetBlock_2", "ResNet/bn_init",
                      "ResNet/conv_init", "ResNet/head"], None),
    # Flax NNX: nnx.scan over three stacked blocks is the one layer "blocks", repeated 3 times
    ("nnx_scan_mlp", ["blocks", "embed", "head"], ("blocks", "blocks ×3")),
    # Equinox: a training step given the module; the GRU cell runs once per step of lax.scan, and
    # optax's update is the layer named after the optimizer (adam)
    ("equinox_gru", ["adam", "cell", "linear"], ("cell", "cell ×16")),
])
def test_a_real_program_opens_as_its_own_layers(server, browser, name, layers, label):  # noqa: F811
    from analysis.service.store import default_store

    with open(os.path.join(PROGRAMS_DIR, f"{name}.py")) as f:
        cid = default_store().put_code(f.read())
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{server}/?code={cid}")
    f = _frame(page, 300)
    f.locator("#layersB").click()
    try:
        f.wait_for_function(f"() => ({BOXES})('pre').length === {len(layers)}", timeout=60_000)
    except Exception:
        raise AssertionError(f.evaluate(BOXES, "pre")) from None
    assert f.evaluate(BOXES, "pre") == sorted("L:" + p for p in layers)
    assert set(f.evaluate(BOXES, "post")) <= {"L:" + p for p in layers}
    if label is not None:
        path, text = label
        shown = f.evaluate("(id) => [...document.querySelectorAll(`#view-pre g[id='${id}'] text`)].map(t => t.textContent)",
                           f"L:{path}")
        assert text in shown, shown
    # the view's title says how many of the program's ops its layers hold; the strip says the total
    title = f.locator("#title-pre").inner_text()
    m = re.search(r"(\d+) layers hold (\d+) of (\d+) ops", title)
    assert m is not None, title
    assert int(m.group(1)) == len(layers) and int(m.group(2)) <= int(m.group(3))
    strip = page.locator("[data-testid='stMetric']").filter(has_text="Ops → kernels").first
    assert strip.locator("[data-testid='stMetricValue']").inner_text().split("→")[0].strip() == m.group(3)
    page.screenshot(path=os.path.join(OUT, f"real_{name}_layers.png"))
