"""A session's first run draws the sidebar's heading only and its widgets with the run after
the graphs (their modules held the graphs back: docs/performance.md), except where no graphs
come soon: a compile to wait for, or none to show. While a first compile runs, the graphs' frame
is made in its place, and the graphs are drawn in that same frame. A server of its own, with an
empty store, so that the first open of a link compiles."""

from __future__ import annotations

import os

import pytest

from tests.polling import in_page, wait_until
from tests.scenarios.test_browser import browser, serve  # noqa: F401 - fixtures
from tests.scenarios.test_browser_graph import drawn_frame

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1280, "height": 720}


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="module")
def fresh_server(store_dir):
    yield from serve({"XLA_EXPLORER_DATA": store_dir})


def _graph_frames(page) -> list:
    return [f for f in page.frames if "xla_graph" in (f.url or "") and not f.is_detached()]


def _drawn(page) -> bool:
    return drawn_frame(page) is not None


def _sidebar_widgets(page) -> bool:
    side = page.get_by_test_id("stSidebar")
    try:
        return side.count() == 1 and "Backend" in side.inner_text(timeout=2_000)
    except Exception:  # noqa: BLE001 - redrawn under us: look again
        return False


def _headings(page) -> int:
    try:
        return page.get_by_test_id("stSidebar").get_by_role("heading", name="XLA Explorer").count()
    except Exception:  # noqa: BLE001 - redrawn under us: none counted this time
        return 0


def test_a_first_open_that_compiles_shows_the_sidebar_while_it_compiles(fresh_server, browser):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(fresh_server + "/?model=softmax&backend=cpu")  # not in this server's store: it compiles
    polls = []

    def done():
        polls.append((_sidebar_widgets(page), _drawn(page), _headings(page)))
        return polls[-1][1]

    wait_until(done, timeout_s=300, what="the graphs drawn", interval_s=0.05)
    # the sidebar's widgets were there before the graphs were: drawn when the compile began
    assert any(side and not drawn for side, drawn, _ in polls), polls[:20]
    # under the one heading the held sidebar drew, not a second one of their own
    assert all(n <= 1 for side, _, n in polls if side), polls[:20]
    wait_until(lambda: _sidebar_widgets(page), timeout_s=60, what="the sidebar after the graphs")


def test_a_first_compile_draws_its_graphs_in_the_frame_made_while_it_ran(fresh_server, store_dir, browser):  # noqa: F811
    """The frame is made when the compile starts (its page and scripts load meanwhile) and
    says so in each pane; the run after the compile sends the graphs to that very frame, not to
    a new one. The pasted code's editor too is made while it compiles, and kept."""
    from analysis.service.store import Store
    from sample_models._stack import shared_stack_source

    layers = 16  # a compile of a second or more, so the waiting frame is seen too
    cid = Store(os.path.join(store_dir, "store.sqlite")).put_code(shared_stack_source(layers))
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{fresh_server}/?code={cid}&backend=cpu")
    seen, editors = [], []

    def waiting_or_drawn():
        for f in _graph_frames(page):
            try:
                if f.evaluate("() => document.body.classList.contains('waiting')"):
                    seen.append(f.locator("#view-pre").inner_text())
                    editors.extend(e for e in page.frames if "ace" in (e.url or "") and not e.is_detached())
            except Exception:  # noqa: BLE001 - a frame swapped under us: look again
                pass
        return drawn_frame(page)

    frame = in_page(page, waiting_or_drawn, 300, "the graphs drawn", interval_s=0.05)
    waited, ready = frame.evaluate("() => [window.__xe_waited || null, window.__xe_ready || null]")
    # the frame that drew the graphs is the one that waited for them
    assert waited is not None and ready is not None and waited <= ready, (waited, ready)
    assert len(_graph_frames(page)) == 1
    assert frame.evaluate("() => document.body.classList.contains('waiting')") is False
    if seen:  # (seen while the compile ran, as a user sees it)
        assert "once XLA has compiled" in seen[0]
        assert editors and not editors[0].is_detached()  # the editor made then is the one shown
    # the layers the program has, in the graphs drawn there
    boxes = frame.evaluate("() => [...document.querySelectorAll('#view-pre g.node')].map(n => n.id)"
                           ".filter(i => i.startsWith('L:layer'))")
    assert len(boxes) == layers, boxes
    # and the sidebar, drawn while it compiled, still says what the link opened once the page's
    # rest is drawn (a run that left its widgets out would have lost their values)
    in_page(page, lambda: page.get_by_test_id("stExpander").count() > 0 and page.get_by_text("Ops → kernels").count(),
            120, "the page below the graphs")
    side = page.get_by_test_id("stSidebar")
    assert side.get_by_role("radio", name="Paste code").is_checked()
    assert side.get_by_role("radio", name="cpu", exact=True).is_checked()


def test_a_first_run_that_ends_without_graphs_still_draws_the_sidebar(fresh_server, browser):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(fresh_server + "/?model=softmax&backend=cpu&opt=xla_no_such_option_here=1")  # XLA refuses it
    main = page.get_by_test_id("stMain")
    wait_until(lambda: "xla_no_such_option_here" in main.inner_text(), timeout_s=300, what="the compile's error")
    wait_until(lambda: _sidebar_widgets(page), timeout_s=60, what="the sidebar's widgets beside the error")
    assert not _drawn(page)
    # the frame made while it compiled is gone: no graphs came for it
    in_page(page, lambda: not _graph_frames(page), 60, "the waiting frame gone")
    assert page.get_by_test_id("stException").count() == 0


# While a compile runs: whether the page says XLA is compiling, and what in it is animated
# without end then (a loop, as a spinner's; not a transition, which ends): each one's name and
# the element it moves
_LOOPS = """() => { const main = document.querySelector('[data-testid="stMain"]');
  if (!main) return [false, []];
  const moving = document.getAnimations().filter((a) => a.playState === 'running' && a.effect
      && a.effect.target && main.contains(a.effect.target)
      && a.effect.getComputedTiming().iterations === Infinity)
    .map((a) => (a.animationName || a.constructor.name) + ' on '
      + (a.effect.target.dataset.testid || a.effect.target.tagName));
  return [main.innerText.includes('Compiling with XLA'), moving]; }"""
_FRAME_LOOPS = """() => document.getAnimations().filter((a) => a.playState === 'running' && a.effect
    && a.effect.getComputedTiming().iterations === Infinity)
  .map((a) => (a.animationName || a.constructor.name) + ' in the frame of the graphs')"""


def test_nothing_on_the_page_moves_while_xla_compiles(fresh_server, store_dir, browser):  # noqa: F811
    """The box that says which phase a compile is in has no spinner: a loop is drawn for as long
    as the compile runs, by a browser that shares the machine's cores with it
    (docs/performance.md). Nor does the graphs' waiting frame move. (Streamlit's own skeleton
    while a component's frame loads is a loop too, for a moment: what runs through a second of
    the compile is what counts.)"""
    import time

    from analysis.service.store import Store
    from sample_models._stack import shared_stack_source

    cid = Store(os.path.join(store_dir, "store.sqlite")).put_code(shared_stack_source(32))
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{fresh_server}/?code={cid}&backend=cpu")
    seen: dict[str, list[float]] = {}  # each loop: when it was seen while XLA compiled
    compiling = []

    def look():
        try:
            says, loops = page.evaluate(_LOOPS)
            if says:
                now = time.monotonic()
                compiling.append(now)
                for f in _graph_frames(page):
                    try:
                        loops = loops + f.evaluate(_FRAME_LOOPS)
                    except Exception:  # noqa: BLE001 - a frame swapped under us: the page's loops still count
                        pass
                for name in loops:
                    seen.setdefault(name, []).append(now)
        except Exception:  # noqa: BLE001 - redrawn under us: look again
            pass
        return _drawn(page)

    wait_until(look, timeout_s=300, what="the graphs drawn", interval_s=0.05)
    assert compiling and compiling[-1] - compiling[0] >= 1.0, "the page said XLA was compiling for under a second"
    lasting = {name: round(ts[-1] - ts[0], 2) for name, ts in seen.items() if ts[-1] - ts[0] >= 1.0}
    assert not lasting, lasting
