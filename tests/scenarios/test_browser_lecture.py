"""The gallery's lecture walked in a real browser at a projector's 1280x720, in presentation
mode, stepped on with the → key: every step draws its view (the graphs with the step's node
selected, or the step's page), its caption on the bar; the smallest text on screen is 14 px or
more and nothing is cut; and on each measured step the kernels' times and shares on the graph
agree with the step shown beside them (share = time / step to the rounding shown)."""

from __future__ import annotations

import os
import re

import pytest

from app import lecture
from tests.paths import ROOT
from tests.polling import app_idle, in_page
from tests.presentation import scan
from tests.scenarios.test_browser import OUT, _retry, browser, server  # noqa: F401 - fixtures
from tests.scenarios.test_browser_graph import drawn_frame
from tests.shown import agree

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1280, "height": 720}
SHOTS = {1, 3, 7, 10}  # steps whose screen is kept (test-output/browser/lecture-step-K.png)
LABELS = """() => [...document.querySelectorAll('#view-post g.node, #view-post g.cluster')]
  .map((g) => [...g.querySelectorAll('text')].map((t) => t.textContent).join(' '))"""
SELECTED = "() => document.getElementById('details') && document.getElementById('details').dataset.name"
# presentation mode shows the summary's cards in the graphs' details panel while nothing is selected
STEP_CARD = """() => { for (const c of document.querySelectorAll('#details .card')) {
  if (/^Step/.test(c.querySelector('.clabel').textContent.trim())) return c.querySelector('.cvalue').textContent.trim(); }
  return null; }"""


def _bar(page) -> str:
    el = page.locator(".st-key-lecture_bar")
    return el.inner_text() if el.count() else ""


def _explorer_step(page, step) -> None:
    """The step's graphs drawn, its node selected (when it names one)."""
    def ready():
        f = drawn_frame(page)
        if f is None:
            return None
        if step.params.get("node") and f.evaluate(SELECTED) != step.params["node"]:
            return None
        return f
    in_page(page, ready, 240, f"the graphs of {step.params}", interval_s=0.5, ignoring=(Exception,))


def _measured_numbers_agree(page) -> list:
    """Each graph label's "time · share of step" against the step shown in the details panel."""
    try:
        step = in_page(page, lambda: drawn_frame(page).evaluate(STEP_CARD), 90, "the step in the details panel",
                       ignoring=(Exception,))
    except AssertionError:
        return ["no step (median) on screen"]
    f = drawn_frame(page)
    labels = [m for x in f.evaluate(LABELS) for m in re.findall(r"(\d\S* (?:s|ms|µs|ns))(?: ·)? (\S+%) of step", x)]
    assert labels, "no timed kernels on a measured step's graph"
    return [(tm, sh, step) for tm, sh in labels if not agree(tm, sh, step)]


def test_the_shipped_lecture_walks_at_a_projectors_size(server, browser):  # noqa: F811
    lec = lecture.shipped("xla-claims")
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/?lecture=xla-claims")
    small, cut, disagree = {}, {}, {}
    for k, step in enumerate(lec.steps, 1):
        in_page(page, lambda: f"Step {k} of {len(lec.steps)}" in _bar(page), 120, f"step {k} on the lecture bar")
        assert step.caption[:40] in _bar(page).replace("\n", " ")  # the caption says what to look at
        if step.page == "explorer":
            _explorer_step(page, step)
        else:  # the shape sweep: its chart
            in_page(page, lambda: page.locator(".js-plotly-plot").count() > 0, 300, "the sweep's chart")
        app_idle(page, timeout_s=240)
        assert page.get_by_test_id("stException").count() == 0, f"step {k}"
        # the link applied whole: no warning stays. (A step's first run holds the sidebar back
        # while the browser still shows the step before's; a rerun sent then carried that step's
        # model into the sidebar and the page called its graphs stale for good: seen at step 10
        # locally and at step 3 in CI, fixed by the link's values set again as the sidebar is
        # drawn: tests/app/test_explorer_sidebar.py. A rerun on its way may show it a moment.)
        in_page(page, lambda: page.locator("[data-testid='stAlertContentWarning']").count() == 0, 60,
                lambda: f"step {k} without a warning: {page.locator('[data-testid=stAlertContentWarning]').all_inner_texts()}")
        assert f"present=1" in page.url and f"slide={k}" in page.url, page.url
        # a measured step shows the step (the summary's card) while nothing is selected
        if step.page == "explorer" and step.params.get("backend") == "cpu" and not step.params.get("node"):
            disagree[k] = _measured_numbers_agree(page)
        got = _retry(page, lambda: scan(page))
        small[k], cut[k] = got["small"], got["cut"]
        if k in SHOTS:
            os.makedirs(OUT, exist_ok=True)
            page.screenshot(path=os.path.join(OUT, f"lecture-step-{k}.png"))
        if k < len(lec.steps):
            page.locator(".st-key-lecture_bar").click(position={"x": 5, "y": 5})  # the focus on the page
            page.keyboard.press("ArrowRight")
    # the last step: → does nothing more, ← goes back
    page.keyboard.press("ArrowLeft")
    in_page(page, lambda: f"Step {len(lec.steps) - 1} of" in _bar(page), 120, "← to the step before")
    assert {k: v for k, v in disagree.items() if v} == {}  # share = time / step, as shown
    assert {k: v for k, v in small.items() if v} == {}  # every text on screen 14 px or more
    assert {k: v for k, v in cut.items() if v} == {}  # nothing cut
