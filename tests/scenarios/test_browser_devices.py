"""The Devices view in a real browser (Debian's Chromium through Playwright, the app started by
``tests/scenarios/test_browser.py``'s fixture): the data-parallel step compiled on its 8 devices (in the
job's worker), its arrays and the gradients' all-reduce listed; picking the all-reduce selects
it, and the ops it came from light up in the graph before optimization."""

from __future__ import annotations

import os

import pytest

from tests.polling import app_idle, wait_until
from tests.scenarios.test_browser import OUT, _ace_frame, _retry, browser, server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser


def test_the_devices_view_of_the_data_parallel_step_and_its_all_reduce(server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(server + "/?model=dp_train_step")
    page.wait_for_function(
        "() => [...document.querySelectorAll('h3')].some(h => h.textContent.startsWith('dp_train_step'))",
        timeout=240_000)
    app_idle(page, 180)
    page.get_by_role("tab", name="Devices").click()
    wait_until(lambda: page.get_by_text("Which block each device holds").count() > 0, 60, "the Devices view")
    app_idle(page, 60)
    main = page.get_by_test_id("stMain")
    assert "8 devices · mesh data = 8" in main.inner_text()
    # the sidebar's Devices box still names the file's own count after the page reran (a None
    # option went to the browser as no selection: "Choose an option")
    devices = page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").filter(has_text="Devices")
    assert devices.locator("input").input_value() == "as the file says (8)"
    # the grids (canvas tables) and the collectives' table: the last one lists the all-reduce
    tables = page.get_by_test_id("stDataFrame")
    table = tables.last
    table.scroll_into_view_if_needed()
    box = table.bounding_box()
    assert box["height"] < 120  # one collective: a header and one row
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # the first row's selection box
    page.wait_for_function("() => /Selected: all-reduce[.\\d]*/.test(document.body.innerText)", timeout=60_000)
    # (the tables are drawn on a canvas: their words are read where the page has them as text)
    assert "each device sends and receives about 70.9 KiB: an estimate" in main.inner_text()
    os.makedirs(OUT, exist_ok=True)
    page.screenshot(path=os.path.join(OUT, "devices_all_reduce.png"))

    def lit():
        f = next(f for f in page.frames if "xla_graph" in (f.url or "") and not f.is_detached())
        return f.locator("#view-pre g.node.hl").count()

    assert _retry(page, lit) > 0  # the gradient's ops it sums

    def post_text():
        f = next(f for f in page.frames if "xla_graph" in (f.url or "") and not f.is_detached())
        return f.locator("#view-post").inner_text()

    assert "sum over devices 0-7" in _retry(page, post_text)  # the kernel's own label in the graph



def test_code_that_sets_its_device_count_names_it_in_the_sidebar(server, browser):  # noqa: F811
    """Typing ``DEVICES = 4`` into the pasted code: the sidebar's Devices box reads the file's own
    count, 4 (a None option went to the browser as no selection, "Choose an option", once the
    option's words changed with the code), and Compile runs the program on 4 devices."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(server)
    page.wait_for_function("() => [...document.querySelectorAll('iframe')].some(f => f.src.includes('xla_graph'))",
                           timeout=240_000)
    page.get_by_text("Paste code").click()
    page.wait_for_function("() => [...document.querySelectorAll('iframe')].some(f => f.src.includes('streamlit_ace'))",
                           timeout=60_000)
    devices = page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").filter(has_text="Devices")
    wait_until(lambda: devices.locator("input").input_value() == "as the file says (1)", 60, "the file's one device")
    editor = _ace_frame(page)
    editor.wait_for_selector(".ace_content", timeout=60_000)
    editor.locator(".ace_content").click()
    page.keyboard.press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.type("DEVICES = 4")
    page.keyboard.press("Escape")  # close the editor's completion popup
    page.get_by_text("the editor's text has changed since this compile").first.wait_for(timeout=60_000)
    app_idle(page)
    page.get_by_test_id("stSidebar").get_by_role("button", name="Compile", exact=True).click()
    main = page.get_by_test_id("stMain")
    wait_until(lambda: "cpu × 4" in main.inner_text(), 240, "the pasted program compiled on its 4 devices")
    app_idle(page, 60)
    assert devices.locator("input").input_value() == "as the file says (4)"
