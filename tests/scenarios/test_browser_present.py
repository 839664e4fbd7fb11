"""Presentation mode on every page, at a projector's 1280x720 in a real browser: the smallest
text on screen is 14 px or more and nothing is cut or wrapped (tests/presentation.py reads both
from the page and its frames), and the graphs' keys work wherever the focus is."""

from __future__ import annotations

import pytest

from tests.polling import app_idle, wait_until
from tests.presentation import scan
from tests.scenarios.test_browser import _retry, browser, server  # noqa: F401 - fixtures
from tests.scenarios.test_browser_graph import _frame

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1280, "height": 720}


def _readable(page) -> None:
    assert page.get_by_test_id("stException").count() == 0  # the page ran (a traceback is big text too)
    got = _retry(page, lambda: scan(page))
    assert got["small"] == [], got["small"]  # every label on screen is 14 px or more
    assert got["cut"] == [], got["cut"]  # nothing cut short or broken over lines


def test_explorer_with_the_source_beside_the_graphs(server, browser):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/?model=softmax&backend=cpu&present=1")
    f = _frame(page)
    app_idle(page)
    f.locator("#srcB").click()
    f.wait_for_function("() => document.getElementById('source').classList.contains('shown')")
    _readable(page)
    # the source is 14 px or more and wraps its long lines instead of cutting them
    assert f.evaluate("() => parseFloat(getComputedStyle(document.getElementById('source')).fontSize)") >= 14
    assert f.evaluate("() => getComputedStyle(document.querySelector('#source div.ln')).whiteSpace") == "pre-wrap"
    # "◀ Kernel ▶" stays on one line
    top = "(id) => document.getElementById(id).getBoundingClientRect().top"
    assert f.evaluate(top, "prevK") == f.evaluate(top, "nextK")


def test_the_kernel_keys_work_with_the_focus_on_the_page(server, browser):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    # layernorm: several kernels on every XLA in range (jax 0.12.1 makes softmax one kernel)
    page.goto(server + "/?model=layernorm&backend=cpu")
    _frame(page)
    app_idle(page)
    page.locator("h3").first.click()  # the focus on the page, outside the graphs' frame
    page.keyboard.press("]")
    lit = "() => document.querySelectorAll('#view-post g.node.me').length"
    wait_until(lambda: _retry(page, lambda: _frame(page).evaluate(lit)), timeout_s=20,
               what="the biggest kernel selected by ] pressed on the page")
    name = "() => document.getElementById('details').dataset.name"
    first = _retry(page, lambda: _frame(page).evaluate(name))
    assert first
    app_idle(page)
    # typing "]" in a text field of the page types it, and steps nothing
    find = page.get_by_label("Find and select an op", exact=True).and_(page.locator("input"))
    find.click()
    page.keyboard.press("]")
    assert find.input_value() == "]"
    assert _retry(page, lambda: _frame(page).evaluate(name)) == first
    # [ from the page again: the previous kernel (the list wraps round: the smallest)
    page.locator("h3").first.click()
    page.keyboard.press("[")
    wait_until(lambda: _retry(page, lambda: _frame(page).evaluate(name)) != first, timeout_s=20,
               what="[ pressed on the page to step back")


def _page_readable(page, scrolls: int = 2) -> None:
    """The page's first screen and the screens below it (a wheel's worth at a time)."""
    _readable(page)
    for _ in range(scrolls):
        page.mouse.wheel(0, 600)
        # the scroll's repaint: two animation frames after the wheel, the page has drawn it
        page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
        _readable(page)


def test_compare_in_presentation(server, browser):  # noqa: F811
    from tests.scenarios.test_browser import _graph_frames

    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/Compare?present=1")
    _graph_frames(page, n=2)
    app_idle(page)
    assert not page.get_by_test_id("stSidebar").is_visible()
    page.get_by_test_id("stTable").first.wait_for()  # tables as HTML text, not a canvas
    _page_readable(page)


def test_pass_pipeline_in_presentation(server, browser):  # noqa: F811
    from tests.scenarios.test_browser import _graph_frames

    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/Pass_pipeline?present=1")
    _graph_frames(page, n=1)
    app_idle(page)
    assert not page.get_by_test_id("stSidebar").is_visible()
    _page_readable(page)


def test_shape_sweep_in_presentation(server, browser):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/Shape_sweep?present=1&lengths=100,200,300&buckets=256,512")
    # the page's heading, once the sweep is in (the sidebar's caption says "Shape specialization"
    # too, hidden in presentation mode)
    page.locator("h3", has_text="Shape specialization:").first.wait_for(timeout=300_000)
    app_idle(page)
    _page_readable(page)


def test_memory_in_presentation(server, browser):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/?model=softmax_layernorm&backend=cpu&present=1&view=memory")
    _frame(page)
    app_idle(page)
    chart = page.get_by_text("Live memory over the schedule").first
    chart.wait_for(timeout=60_000)
    # temporaries and what lives throughout in panels of their own
    page.get_by_text("temporaries (what fusion changes)").first.wait_for()
    page.get_by_text("parameters, constants and outputs (live throughout)").first.wait_for()
    chart.scroll_into_view_if_needed()
    _page_readable(page)


def test_the_editor_font_shows_underscores(server, browser):  # noqa: F811
    from tests.scenarios.test_browser import _ace_frame

    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server)
    _frame(page)
    app_idle(page)
    page.get_by_text("Paste code").click()
    ace = _ace_frame(page)
    ace.wait_for_selector(".ace_line")
    # Debian's DejaVu Sans Mono (there on every Debian machine), and a line box tall enough for
    # the underscore, which sits below the baseline (a 16 px line at 14 px clipped it)
    seen = []

    def measured():
        got = ace.evaluate(
            "() => { const e = document.querySelector('.ace_editor'), l = document.querySelector('.ace_line');"
            " const cs = getComputedStyle(e); return [cs.fontFamily, parseFloat(cs.fontSize),"
            " l.getBoundingClientRect().height]; }")
        seen[:] = got
        family, size, line = got
        return family.startswith('"DejaVu Sans Mono"') and line >= 1.4 * size

    try:
        wait_until(measured, timeout_s=20, what="the editor's font")
    except AssertionError:
        raise AssertionError(f"the editor's font and line box stayed {seen}") from None


def test_a_presentation_link_hands_its_settings_to_the_sidebar_drawn_after_the_graphs(server, browser):  # noqa: F811
    """Presentation mode hides the sidebar, and a session's first run there does not draw it:
    it comes with the run after the graphs. Leaving presentation shows it holding what the link
    named (model, backend, measuring off), not the defaults."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/?model=softmax&backend=cpu&measure=0&present=1")
    _frame(page)
    app_idle(page)
    page.get_by_text("Presentation", exact=True).click()
    side = page.get_by_test_id("stSidebar")
    wait_until(lambda: side.count() == 1 and side.is_visible(), timeout_s=30, what="the sidebar out of presentation")
    app_idle(page)
    from sample_models import DEFAULT_MODEL, gallery

    assert DEFAULT_MODEL != "softmax"
    assert gallery()["softmax"].title in side.inner_text()  # the caption of the gallery model chosen
    assert side.get_by_role("radio", name="cpu", exact=True).is_checked()
    assert not side.get_by_role("checkbox", name="Measure kernel timings").is_checked()
    assert page.get_by_test_id("stException").count() == 0


# a scope name from the user's code, in the op names the memory view's table lists (an e-mail
# address cannot be one: XLA's op_name ends at an "@"; tests/app/test_safe.py has that case)
HOSTILE_SCOPE = '''import jax
import jax.numpy as jnp


def model(x):
    with jax.named_scope("![x](beacon.png) [link](http://127.0.0.1:9/) **bold** www.example.com"):
        y = jnp.tanh(x @ x)
    return jnp.exp(y) + 1.0


def example_inputs():
    return (jnp.ones((64, 64), jnp.float32),)
'''


def test_a_presented_tables_names_from_the_code_are_text_not_markdown(server, browser):  # noqa: F811
    """In presentation mode a table is Streamlit's ``st.table``, which reads each cell as
    Markdown: a scope name from the user's code holding an image, a link or emphasis is shown
    as written, and nothing is fetched."""
    from analysis.service.store import default_store

    cid = default_store().put_code(HOSTILE_SCOPE)
    page = browser.new_page(viewport=VIEWPORT)
    fetched = []
    page.on("request", lambda r: fetched.append(r.url) if "beacon" in r.url else None)
    page.goto(server + f"/?code={cid}&backend=cpu&present=1&view=memory")
    _frame(page, 300)
    app_idle(page)
    table = page.locator("[data-testid='stTable']").filter(has_text="beacon").first
    table.wait_for(timeout=120_000)
    text = table.inner_text().replace("\u2060", "")  # (the word joiners that keep a URL text draw as nothing)
    assert "![x](beacon.png) [link](http://127.0.0.1:9/) **bold** www.example.com" in text
    assert table.locator("img, a, strong").evaluate_all("es => es.map(e => e.outerHTML)") == []
    assert fetched == []
