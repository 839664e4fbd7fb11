"""Whole or readable, at a projector's 1280x720 in a real browser: in presentation mode a graph
opens and fits at 14 px or more, and a pane that cannot hold its whole graph at that size says
so; a node found by the search is brought into view; Compare's two graphs are as tall as the
window and start on its first screen."""

from __future__ import annotations

import os

import pytest

from tests.polling import app_idle, in_page, settled
from tests.scenarios.test_browser import OUT, _graph_frames, _retry, browser, server  # noqa: F401 - fixtures
from tests.scenarios.test_browser_graph import _frame

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1280, "height": 720}

# Per pane: its box, the drawing's box, the smallest graph text drawn inside the pane (its font
# size times the zoom it is drawn at), and whether the pane's "part of the graph" note shows.
PANES = """() => {
  const out = {};
  for (const s of ['pre', 'post']) {
    const v = document.getElementById('view-' + s), svg = v && v.querySelector('svg');
    if (!svg) continue;
    const p = v.getBoundingClientRect(), g = svg.querySelector('g.graph').getBoundingClientRect();
    let small = Infinity;
    svg.querySelectorAll('text').forEach((t) => {
      const r = t.getBoundingClientRect();
      if (r.height === 0 || r.right < p.left || r.left > p.right || r.bottom < p.top || r.top > p.bottom) return;
      const m = t.getScreenCTM();
      small = Math.min(small, parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b));
    });
    const note = v.querySelector('.part');
    out[s] = {pane: [p.left, p.top, p.right, p.bottom], graph: [g.left, g.top, g.right, g.bottom], small: small,
              note: !!note && getComputedStyle(note).display !== 'none', noteText: note ? note.textContent : ''};
  }
  return out;
}"""


def _whole(side: dict) -> bool:
    (pl, pt, pr, pb), (gl, gt, gr, gb) = side["pane"], side["graph"]
    return gl >= pl - 1 and gt >= pt - 1 and gr <= pr + 1 and gb <= pb + 1


def _whole_or_says_so(got: dict) -> None:
    for side in ("pre", "post"):
        g = got[side]
        assert g["small"] >= 14 - 0.25, (side, g["small"])  # every label drawn at 14 px or more
        # the whole graph inside its pane, or a pane that says it shows a part (drag to see the rest)
        assert _whole(g) or (g["note"] and "Part of the graph" in g["noteText"]), (side, g)


def _shown(got: dict) -> dict:
    """The panes drawn now (presentation mode hides the graph not shown: a pane of no size)."""
    return {s: g for s, g in got.items() if g["pane"][2] > g["pane"][0]}


# Small gallery programs (under ~40 nodes a graph): in presentation mode each graph, shown alone
# the width of both panes, is whole with every label at 14 px or more (a layout made for the
# pane: dense, folded into columns), Before and After alike, and after Fit too.
@pytest.mark.parametrize("model", ["mlp", "layernorm"])
def test_small_program_in_presentation_is_whole_at_14_px(server, browser, model):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + f"/?model={model}&present=1")
    _frame(page)
    app_idle(page)
    for button, side in (("#soloPre", "pre"), ("#soloPost", "post")):
        f = _frame(page)
        f.locator(button).click()
        got = settled(lambda: _shown(_retry(page, lambda: _frame(page).evaluate(PANES))), what=f"the {side} graph")
        assert list(got) == [side], got  # one graph at a time
        g = got[side]
        # alone, it takes both panes' width: more than half the 1280 px window
        assert g["pane"][2] - g["pane"][0] > VIEWPORT["width"] / 2, g
        assert _whole(g), (side, g)  # the whole drawing inside its pane
        assert g["small"] >= 14 - 0.25, (side, g["small"])  # every label at 14 px or more
        assert not g["note"], g  # and the pane does not say it shows a part
        page.screenshot(path=os.path.join(OUT, f"readable_{model}_{side}_present_1280.png"))
        f.locator("#fit").click()
        got = settled(lambda: _shown(f.evaluate(PANES)), what="the view after Fit")
        assert _whole(got[side]) and got[side]["small"] >= 14 - 0.25, got


def test_a_big_program_in_presentation_is_readable_or_says_so(server, browser):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/?model=attention&present=1")
    _frame(page)
    app_idle(page)
    f = _frame(page)
    f.locator("#soloBoth").click()
    got = settled(lambda: _retry(page, lambda: _frame(page).evaluate(PANES)), what="the opening view")
    _whole_or_says_so(got)


# a node drawn outside its pane's view now: its id
OUTSIDE = """() => {
  for (const s of ['post', 'pre']) {
    const v = document.getElementById('view-' + s), p = v.getBoundingClientRect();
    for (const n of v.querySelectorAll('g.node[id^="op:"], g.node[id^="k:"]')) {
      const r = n.getBoundingClientRect();
      if (r.bottom < p.top || r.top > p.bottom || r.right < p.left || r.left > p.right) return [s, n.id];
    }
  }
  return null;
}"""

SELECTED_IN_VIEW = """(id) => {
  const n = document.querySelector("g.node[id='" + id + "']");
  if (!n || !n.classList.contains('me')) return false;
  const p = n.closest('.view').getBoundingClientRect(), r = n.getBoundingClientRect();
  return r.left >= p.left - 1 && r.right <= p.right + 1 && r.top >= p.top - 1 && r.bottom <= p.bottom + 1;
}"""


def test_a_node_found_by_the_search_is_brought_into_view(server, browser):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/?model=attention&present=1")
    f = _frame(page)
    app_idle(page)
    settled(lambda: _retry(page, lambda: _frame(page).evaluate(PANES)), what="the opening view")
    f = _frame(page)
    f.locator("#soloBoth").click()
    settled(lambda: _retry(page, lambda: _frame(page).evaluate(PANES)), what="both graphs")
    side_id = f.evaluate(OUTSIDE)
    assert side_id, "every node of attention is in view at the opening: nothing to bring into view"
    _, node_id = side_id
    f.locator("#q").fill(node_id.split(":", 1)[1])
    f.locator("#q").press("Enter")
    in_page(page, lambda: f.evaluate(SELECTED_IN_VIEW, node_id), 20, f"{node_id} selected and whole in its pane")


def test_compare_graphs_fill_the_window_near_the_top(server, browser):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/Compare?present=1")
    panes = _graph_frames(page, n=2)
    app_idle(page)

    def boxes():
        frame = _graph_frames(page, n=2)[0].frame
        return frame.evaluate("""() => ['pre', 'post'].map((s) => {
          const r = document.getElementById('view-' + s).getBoundingClientRect();
          const top = window.frameElement.getBoundingClientRect().top + window.parent.document
            .querySelector("[data-testid='stMain']").scrollTop;
          return [r.height, top + r.top];
        })""")

    got = settled(lambda: _retry(page, boxes), what="Compare's graphs")
    assert panes
    for height, top in got:
        assert height >= 0.6 * VIEWPORT["height"], got  # the graphs get the window's height
        assert top < VIEWPORT["height"], got  # and begin on the page's first screen
    page.screenshot(path=os.path.join(OUT, "readable_compare_1280.png"))


FRAME_BOX = """() => {
  const fr = document.querySelector("iframe[title='app.views.xla_graph']");
  const r = fr.getBoundingClientRect();
  return [Math.round(r.top), Math.round(r.bottom), window.innerHeight];
}"""

PAD_ABOVE = """(px) => {
  const fr = document.querySelector("iframe[title='app.views.xla_graph']");
  let host = fr;
  while (host.parentElement && !host.parentElement.matches("[data-testid='stVerticalBlock']")) host = host.parentElement;
  const d = document.createElement('div');
  d.style.height = px + 'px';
  host.parentElement.insertBefore(d, host);
}"""


def test_the_graphs_keep_to_the_window_when_what_is_above_them_changes(server, browser):  # noqa: F811
    """What is above the graphs can change height once they are drawn (the first run's title and
    notices laid out after the frame has its data; a notice that goes): the frame keeps its
    bottom at the window's and the graphs open again whole at the new size, as a projector shows
    them."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/?model=mlp&present=1")
    _frame(page)
    app_idle(page)
    top, bottom, window_h = settled(lambda: page.evaluate(FRAME_BOX), what="the frame's place")
    assert bottom <= window_h, (top, bottom, window_h)
    page.evaluate(PAD_ABOVE, 60)  # 60 px more above the frame, as a notice would add
    moved = in_page(page, lambda: (lambda b: b if b[0] >= top + 60 else None)(page.evaluate(FRAME_BOX)),
                    30, "the frame moved down")
    got = settled(lambda: page.evaluate(FRAME_BOX), what="the frame refitted")
    assert got[0] == moved[0] and abs(got[1] - bottom) <= 2, (top, bottom, got)  # its bottom where it was
    f = _frame(page)
    panes = settled(lambda: _shown(f.evaluate(PANES)), what="the graphs opened again")
    for side, g in panes.items():
        assert _whole(g), (side, g)
