"""End to end in a real browser: Debian's Chromium driven by Playwright against
``streamlit run`` started here on a free port."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.polling import app_idle, in_page, wait_until
from tests.paths import ROOT

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
OUT = os.path.join(ROOT, "test-output", "browser")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    yield from serve()


def serve(env: dict | None = None):
    """A ``streamlit run`` of the app on a free port, its address yielded until the caller is
    done; ``env``: more of its environment (e.g. its own data folder)."""
    if not os.path.exists(CHROMIUM):
        pytest.fail("chromium is not installed (the README's test command installs it)")
    port = _free_port()
    log = open(os.path.join(ROOT, "test-output", "streamlit.log") if os.makedirs(OUT, exist_ok=True) is None else os.devnull, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", os.path.join(ROOT, "app", "main.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(url), 60, "streamlit to start", interval_s=0.5)
    except AssertionError:
        proc.kill()
        raise
    yield url
    os.killpg(proc.pid, 9)
    proc.wait()


def _answers(url: str) -> bool:
    """Whether the Streamlit server at ``url`` answers its health check."""
    try:
        urllib.request.urlopen(url + "/_stcore/health", timeout=2)
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


class _Pane:
    """One drawn graph: the explorer's component holds two (``#pane-pre``, ``#pane-post``), the
    one-graph component of Compare and the Pass pipeline one (``#pane-pre``)."""

    def __init__(self, frame, scope: str):
        self.frame, self.scope = frame, scope

    def locator(self, sel: str):
        return self.frame.locator(f"{self.scope} {sel}")

    def wait_for_selector(self, sel: str, **kw):
        return self.frame.wait_for_selector(f"{self.scope} {sel}", **kw)

    def title(self) -> str:
        return self.frame.locator(f"{self.scope} h4").inner_text()


def _graph_frames(page, n=2, timeout=180_000):
    """The drawn graphs (``_Pane``s) once ``n`` show a laid-out SVG (Streamlit may replace the
    iframes while a run finishes, so retry until they hold still)."""
    from playwright.sync_api import Error

    drawn = [0]

    def panes():
        page.wait_for_function(
            "() => document.querySelectorAll(\"iframe[title='app.views.xla_graph']\").length >= 1",
            timeout=timeout)
        found = []
        for f in [f for f in page.frames if "xla_graph" in (f.url or "") and not f.is_detached()]:
            f.wait_for_selector("svg[data-ready='1']", timeout=30_000)
            for scope in ("#pane-pre", "#pane-post"):
                if f.locator(f"{scope} svg[data-ready='1']").count():
                    found.append(_Pane(f, scope))
        drawn[0] = len(found)
        return found if len(found) >= n else None

    return in_page(page, panes, timeout / 1000, lambda: f"{n} graphs drawn ({drawn[0]} were)", interval_s=0.5,
                   ignoring=(Error,))


def _graph(page, title: str):
    """The graph whose title starts with ``title`` ("before", "after", "A:", "B:"): the order of
    ``page.frames`` is not the order on screen once Streamlit has replaced a frame."""
    for p in _graph_frames(page):
        if p.title().startswith(title):
            return p
    from playwright.sync_api import Error

    raise Error(f"no graph titled {title!r} yet")  # _retry looks again


def _upload(page, path) -> None:
    """Choose a file in the sidebar's uploader, wait until it is uploaded and the run that hears
    of it is over (an Open button of an earlier upload would open that one), press Open."""
    with page.expect_response(lambda r: "/_stcore/upload_file/" in r.url and r.request.method == "PUT",
                              timeout=60_000):
        page.locator("input[type=file]").first.set_input_files(str(path))  # the model's box, not the trace's
    page.get_by_test_id("stSidebar").get_by_text(os.path.basename(str(path))).first.wait_for(timeout=60_000)
    app_idle(page)
    page.get_by_role("button", name="Open").click()


def _retry(page, fn, timeout_s: float = 60):
    """``fn()``, run again if Streamlit swapped a frame under it (a rerun replaces iframes)."""
    from playwright.sync_api import Error

    return in_page(page, lambda: (fn(),), timeout_s, "a run that no rerun interrupted", interval_s=0.5,
                   ignoring=(Error,))[0]


def test_transformer_block_select_fusion_details(server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(server)
    _graph_frames(page)
    # pick transformer_block in the gallery and compile
    page.get_by_role("combobox", name="Gallery model").click()
    page.get_by_role("option").filter(has_text="transformer_block").first.click()
    page.get_by_test_id("stSidebar").get_by_role("button", name="Compile", exact=True).click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('h3')].some(h => h.textContent.startsWith('transformer_block'))",
        timeout=180_000)
    frames = _graph_frames(page)
    assert len(frames) == 2
    nav = page.get_by_test_id("stSidebarNav").inner_text()
    for title in ("Explorer", "Pass pipeline", "Compare", "Shape sweep"):
        assert title in nav
    # the post graph is the transformer's: its parameters are there (the frame may still be
    # swapped by the run that replaces mlp's graphs, so look again until it holds)
    _retry(page, lambda: _graph(page, "after").wait_for_selector("g.node[id*='params__wqkv']", timeout=30_000),
           timeout_s=120)
    # both graphs really are Graphviz SVG with nodes
    assert _retry(page, lambda: _graph(page, "before").locator("g.node").count()) > 20
    assert _retry(page, lambda: _graph(page, "after").locator("g.node").count()) > 20
    # select a fusion: click an emitter fusion kernel node in the post-optimization graph (the
    # graphs are one component: selection happens in the browser, the server hears of it after)
    def graph():
        f = next(f for f in page.frames if "xla_graph" in (f.url or "") and not f.is_detached())
        f.wait_for_selector("#view-post svg[data-ready='1']", timeout=30_000)
        return f

    cluster_id = _retry(page, lambda: graph().evaluate(
        """() => [...document.querySelectorAll("#view-post g.cluster[id^='f:']")].find(
        g => (g.textContent || '').includes('kLoop fusion')).id"""))
    name = cluster_id.split(":", 1)[1]
    node_id = f"k:{name}"
    _retry(page, lambda: graph().locator(f"#view-post g.node[id='{node_id}']").dispatch_event("click"))
    # the details beside the graphs, at once
    assert _retry(page, lambda: graph().locator("#details h3").inner_text()).startswith(name)
    # and the server's panel below, after its round trip
    page.wait_for_function(
        "(n) => document.body.innerText.includes('Selected: ' + n) && /Absorbed \\d+ op/.test(document.body.innerText)",
        arg=name, timeout=60_000)
    body = page.locator("[data-testid='stMain']").first.inner_text()
    assert name in body
    # the details show the fused computation's ops and the user's source lines
    assert "fused computation" in body
    assert "Source (lines" in body
    os.makedirs(OUT, exist_ok=True)
    page.screenshot(path=os.path.join(OUT, "transformer_block_selected.png"))
    # the pre-optimization graph now highlights what the kernel absorbed
    assert _retry(page, lambda: graph().locator("#view-pre g.node.hl").count()) > 0


def test_malformed_hlo_upload_shows_error_and_app_survives(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(server)
    _graph_frames(page)
    page.get_by_text("Upload HLO / bundle").click()
    bad = tmp_path / "broken.hlo"
    bad.write_text("HloModule m\n\nENTRY main {\n  a = f32[2]{0} parameter(0)\n  ROOT b = f32[2]{0} add(a, nope)\n}\n")
    _upload(page, bad)
    err = page.get_by_text("parse error at broken.hlo:5")
    err.wait_for(timeout=60_000)
    # the previous graphs are still there
    assert len(_graph_frames(page)) == 2
    page.screenshot(path=os.path.join(OUT, "bad_upload.png"))


def _ace_frame(page, timeout_s: float = 60):
    return in_page(page, lambda: next((f for f in page.frames if "streamlit_ace" in (f.url or "") and not f.is_detached()),
                                      None), timeout_s, "the code editor")


def test_pasted_code_error_is_marked_in_the_editor(server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(server)
    _graph_frames(page)
    page.get_by_text("Paste code").click()
    page.wait_for_function("() => [...document.querySelectorAll('iframe')].some(f => f.src.includes('streamlit_ace'))",
                           timeout=60_000)
    editor = _ace_frame(page)
    editor.wait_for_selector(".ace_content", timeout=60_000)
    editor.locator(".ace_content").click()
    page.keyboard.press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.type("y = = 2")
    page.keyboard.press("Escape")  # close the editor's completion popup
    # the editor has sent its text to the app: the page says the graphs are of other code now
    page.get_by_text("the editor's text has changed since this compile").first.wait_for(timeout=60_000)
    app_idle(page)
    page.get_by_test_id("stSidebar").get_by_role("button", name="Compile", exact=True).click()
    err = page.locator("[data-testid='stMain'] [data-testid='stAlert']").filter(has_text="syntax error at <pasted code>:")
    err.first.wait_for(timeout=120_000)
    text = err.first.inner_text()
    line = int(text.split("<pasted code>:")[1].split(":")[0])
    # the editor marks that line, and still holds what was typed
    def marked():  # the editor's frame may be redrawn by the run that shows the error
        editor = _ace_frame(page)
        editor.wait_for_selector(".ace_gutter-cell.ace_error", timeout=30_000)
        # what the editor holds (ace draws only the rows in view, so its drawn text is not all of it)
        return (editor.locator(".ace_gutter-cell.ace_error").first.inner_text().strip(),
                editor.evaluate("() => document.querySelector('.ace_editor').env.editor.getValue()"))

    gutter, content = _retry(page, marked)
    assert gutter == str(line)
    assert content.splitlines()[line - 1] == "y = = 2"
    # the graphs of the last good compile are still shown
    assert len(_graph_frames(page)) == 2
    page.screenshot(path=os.path.join(OUT, "pasted_code_error.png"))


def test_corrupted_bundle_uploads_are_reported(server, browser, tmp_path, gallery_bundle):
    import json

    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(server)
    _graph_frames(page)
    page.get_by_text("Upload HLO / bundle").click()
    good = gallery_bundle("softmax").to_json()
    # 1. a truncated file: a load error naming the file and where the JSON broke
    cut = tmp_path / "cut.bundle.json"
    cut.write_text(good[: len(good) // 2])
    _upload(page, cut)
    page.get_by_text("load error at cut.bundle.json").first.wait_for(timeout=60_000)
    # 2. valid JSON whose measurements are nonsense: refused when it is loaded (a bundle is
    # untrusted data), with one line naming the file and the field; the page keeps what it showed
    d = json.loads(good)
    d["timings"] = {"kernels": {"x": "not a row"}, "iterations": "many"}
    odd = tmp_path / "odd.bundle.json"
    odd.write_text(json.dumps(d))
    _upload(page, odd)
    page.get_by_text("load error at odd.bundle.json: malformed bundle: timings.kernels").first.wait_for(timeout=60_000)
    assert len(_graph_frames(page)) == 2  # the graphs shown before are still drawn


def test_h200_link_opens_the_gpu_compile_in_the_browser(server, browser):
    """A shared link naming the H200 target: both graphs, Triton and cuDNN kernels coloured as
    such, and the notice that this compile was made without the device."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(server + "/?model=attention&backend=h200")
    page.wait_for_function(
        "() => [...document.querySelectorAll('h3')].some(h => h.textContent.startsWith('attention'))",
        timeout=180_000)
    frames = _graph_frames(page)
    assert len(frames) == 2
    body = page.locator("[data-testid='stMain']").first.inner_text()
    assert "NVIDIA H200" in body and "no timings" in body
    post_svg = _retry(page, lambda: _graph(page, "after").locator("svg").inner_html())
    assert "__cudnn$fmha" in post_svg and "Triton · tile" in post_svg
    # the legend overlay names the routes present: library (cuDNN) and Triton
    legend = _retry(page, lambda: _graph(page, "after").locator(".legend").inner_text())
    assert "Triton" in legend and "Library call" in legend
    page.screenshot(path=os.path.join(OUT, "attention_h200.png"))


def test_compare_link_puts_the_cpu_next_to_the_h200(server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(server + "/Compare?mode=backends&model=mlp&a=cpu&b=h200")
    page.wait_for_function("() => document.body.innerText.includes('Kernels matched')", timeout=180_000)
    frames = _graph_frames(page)
    assert len(frames) == 2
    a_svg = _retry(page, lambda: _graph(page, "A:").locator("svg").inner_html())
    b_svg = _retry(page, lambda: _graph(page, "B:").locator("svg").inner_html())
    assert "YNNPACK" in a_svg and "Triton · tile" in b_svg
    assert page.url.endswith("/Compare?mode=backends&model=mlp&a=cpu&b=h200")
    page.screenshot(path=os.path.join(OUT, "compare_cpu_h200.png"))


def test_compare_link_puts_two_jax_releases_side_by_side(server, browser):
    """One model through the oldest and the newest jax release here (the runtimes scripts/dev.sh
    makes): both graphs, each side's jax named, and what changed between them."""
    from analysis.service import runtimes

    have = [r.jax for r in runtimes.available()]
    if len(have) < 2:
        pytest.skip("one jax runtime here (scripts/dev.sh test makes .venv/jax-0.10)")
    old, new = have[-1], have[0]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    # measured: each release timed in alternated runs (analysis.studies.compare.measured_alternately)
    page.goto(server + f"/Compare?mode=versions&model=mlp&a={old}&b={new}&measure=1")
    page.wait_for_function("() => document.body.innerText.includes('What changed from jax')", timeout=400_000)
    assert len(_graph_frames(page)) == 2
    body = page.locator("[data-testid='stMain']").first.inner_text()
    assert f"What changed from jax {old} to jax {new}" in body
    assert "Kernels matched by provenance:" in body
    # each side's step and call: its median and interquartile range over the alternated runs,
    # then a verdict only where the ranges part
    from analysis.studies.compare import ROUNDS

    t = r"\d[\d.]* (?:ns|µs|ms|s)"
    for what in ("Call, no profiler", "Step, traced"):
        line = next(ln for ln in body.splitlines() if ln.startswith(what))
        assert f"interquartile range of {ROUNDS} alternated runs' medians" in line
        assert re.search(rf"A {t} \(\d[\d.]*(?: \w+)?–{t}\) · B {t} \(\d[\d.]*(?: \w+)?–{t}\)", line), line
        assert re.search(r"B is faster|B is slower|no verdict: the spreads overlap", line), line
    a_svg = _retry(page, lambda: _graph(page, "A:").locator("svg").inner_html())
    b_svg = _retry(page, lambda: _graph(page, "B:").locator("svg").inner_html())
    assert "fusion" in a_svg and "fusion" in b_svg
    assert page.url.endswith(f"/Compare?mode=versions&model=mlp&a={old}&b={new}&measure=1")
    page.screenshot(path=os.path.join(OUT, "compare_jax_versions.png"))


def test_an_error_is_shown_once_whole_and_as_text(server, browser):
    """What the user's code raised, in one place, exactly as written: Markdown would make
    ``__dict__`` a bold "dict" and ``*x*`` italics; every line of it, not its first only."""
    from analysis.service.store import default_store

    src = ("import jax.numpy as jnp\n\ndef model(x):\n    return x\n\ndef example_inputs():\n"
           "    raise ValueError('no __dict__ here: n >= 3 is *wrong*\\nthe second line of the reason')\n")
    cid = default_store().put_code(src)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{server}/?code={cid}")
    alerts = page.locator("[data-testid='stAlert']").filter(has_text="inputs error at <pasted code>:7")
    alerts.first.wait_for(timeout=120_000)
    app_idle(page)  # the run that shows it is over: nothing else adds a second one
    assert alerts.count() == 1
    text = alerts.first.inner_text()
    assert "ValueError: no __dict__ here: n >= 3 is *wrong*" in text
    assert "the second line of the reason" in text
    # the code is still there to be fixed
    assert _ace_frame(page) is not None
    page.screenshot(path=os.path.join(OUT, "error_as_text.png"))


def test_a_dump_with_its_trace_shows_the_traces_timings(server, browser, tmp_path):
    """The user's own run (an XLA dump zipped and the .xplane.pb of a jax.profiler trace, made here
    by the test as a user would on their machine) uploaded together: the kernels get the trace's
    times."""
    from tests.inputs.test_traces import RUNS, _mlp, _trace_file, _users_run

    import jax

    k = jax.random.split(jax.random.PRNGKey(0), 3)
    dump_zip, _, trace_dir = _users_run(tmp_path, _mlp, jax.random.normal(k[0], (64, 128)),
                                        jax.random.normal(k[1], (128, 256)), jax.random.normal(k[2], (256, 32)))
    xplane = _trace_file(trace_dir, ".xplane.pb")  # the uploader takes the bare file
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(server)
    _graph_frames(page)
    page.get_by_text("Upload HLO / bundle").click()
    inputs = page.locator("input[type=file]")
    inputs.nth(1).wait_for(state="attached", timeout=60_000)  # the two uploaders (their inputs are hidden)
    for i, path in ((0, dump_zip), (1, xplane)):
        with page.expect_response(lambda r: "/_stcore/upload_file/" in r.url and r.request.method == "PUT",
                                  timeout=60_000):
            inputs.nth(i).set_input_files(path)
        page.get_by_test_id("stSidebar").get_by_text(os.path.basename(path)).first.wait_for(timeout=60_000)
        app_idle(page)
    page.get_by_role("button", name="Open").click()
    note = page.get_by_text("Timings from your trace")
    note.wait_for(timeout=120_000)
    text = note.inner_text()
    assert "xplane.pb" in text and "CPU" in text and f"{RUNS} executions" in text
    assert page.get_by_text("No roofline verdict").count() >= 1  # a CPU trace: no roofs, and why
    assert page.get_by_text("step (median)").count() >= 1
    page.screenshot(path=os.path.join(OUT, "trace_upload.png"))


def test_a_trace_alone_opens_the_module_it_ran(server, browser, tmp_path):
    """Only the user's jax.profiler trace (zipped), no dump: the page opens the module the trace
    spent the most time in, from the HLO it carries, with the trace's timings, and says the graph
    before optimization is not in a trace; the trace's other program of that function (a second
    shape) opens from the sidebar."""
    from tests.inputs.test_trace_hlo import three_program_trace
    from tests.inputs.test_traces import RUNS

    _, trace_zip, _ = three_program_trace(tmp_path)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(server)
    _graph_frames(page)
    page.get_by_text("Upload HLO / bundle").click()
    inputs = page.locator("input[type=file]")
    inputs.nth(1).wait_for(state="attached", timeout=60_000)
    with page.expect_response(lambda r: "/_stcore/upload_file/" in r.url and r.request.method == "PUT",
                              timeout=60_000):
        inputs.nth(1).set_input_files(trace_zip)  # the trace's box, the model's left empty
    page.get_by_test_id("stSidebar").get_by_text("trace.zip").first.wait_for(timeout=60_000)
    app_idle(page)
    page.get_by_role("button", name="Open").click()
    note = page.get_by_text("Timings from your trace")
    note.wait_for(timeout=120_000)
    assert f"{RUNS} executions" in note.inner_text()
    page.screenshot(path=os.path.join(OUT, "trace_alone.png"))
    panes = _graph_frames(page, n=1)  # the graph after optimization alone
    assert [p.title().split(" ")[0] for p in panes] == ["after"], [p.title() for p in panes]
    page.get_by_role("heading", name="jit__mlp").first.wait_for()
    assert panes[0].frame.get_by_text("A profiler trace carries only the module as it ran").count() == 1
    assert panes[0].frame.get_by_text("f32[512,128]").count() >= 1  # the big batch's program
    # the small batch's program of the same function, from the trace kept
    app_idle(page)
    box = page.get_by_role("combobox", name="Module in the trace")
    box.scroll_into_view_if_needed()
    box.click()
    page.get_by_role("option").filter(has_text="jit__mlp").nth(1).click()
    app_idle(page)
    page.get_by_role("button", name="Show this module").click()
    app_idle(page)
    _retry(page, lambda: _graph_frames(page, n=1)[0].frame.get_by_text("f32[8,128]").first.wait_for(timeout=60_000))
    assert page.get_by_role("button", name="Show this module").count() == 0  # it is the one shown
