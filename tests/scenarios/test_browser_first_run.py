"""A session's first run draws the sidebar's heading only and its widgets with the run after
the graphs (their modules held the graphs back: docs/performance.md), except where no graphs
come soon: a compile to wait for, or none to show. A server of its own, with an empty store,
so that the first open of a link compiles."""

from __future__ import annotations

import pytest

from tests.polling import wait_until
from tests.scenarios.test_browser import browser, serve  # noqa: F401 - fixtures
from tests.scenarios.test_browser_graph import drawn_frame

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1280, "height": 720}


@pytest.fixture(scope="module")
def fresh_server(tmp_path_factory):
    yield from serve({"XLA_EXPLORER_DATA": str(tmp_path_factory.mktemp("store"))})


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


def test_a_first_run_that_ends_without_graphs_still_draws_the_sidebar(fresh_server, browser):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(fresh_server + "/?model=softmax&backend=cpu&opt=xla_no_such_option_here=1")  # XLA refuses it
    main = page.get_by_test_id("stMain")
    wait_until(lambda: "xla_no_such_option_here" in main.inner_text(), timeout_s=300, what="the compile's error")
    wait_until(lambda: _sidebar_widgets(page), timeout_s=60, what="the sidebar's widgets beside the error")
    assert not _drawn(page)
    assert page.get_by_test_id("stException").count() == 0
