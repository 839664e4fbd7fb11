"""The Code pane in a real browser (issue #36): a fusion of a real CPU compile selected in the
graph shows its LLVM IR; a click on a line linked to an HLO instruction lights that instruction
in the graphs; a link with view=code&node=NAME opens the pane on that kernel; a node= the
compile lacks is a one-line note; and the pane is readable on a projector."""

from __future__ import annotations

import os
import re

import pytest

from tests.polling import app_idle, wait_until
from tests.presentation import scan
from tests.scenarios.test_browser import OUT, _retry, browser, server  # noqa: F401 - fixtures
from tests.scenarios.test_browser_graph import _frame

pytestmark = pytest.mark.browser

MODEL = "softmax_layernorm"
SHOWN = "(k) => document.getElementById('code').dataset.kernel === k && document.querySelectorAll('#code div.cl').length > 0"


def _open_code(page):
    """The explorer's frame with the Code pane open and its code arrived."""
    f = _frame(page)
    app_idle(page)
    if not f.evaluate("() => document.getElementById('code').classList.contains('shown')"):
        f.locator("#codeB").click()
    f.wait_for_function("() => { const n = document.querySelector('#code .cnote');"
                        " return document.getElementById('code').classList.contains('shown')"
                        " && !(n && n.textContent.startsWith('Loading')); }", timeout=60_000)
    return f


def _kernels_with_code(f) -> list[str]:
    """The kernels the pane lists as having code (nothing selected), drawn in the graph."""
    return f.evaluate("""() => [...document.querySelectorAll('#code ul.clist a')].map(a => a.textContent)
        .filter(k => document.querySelector(`#view-post [id='k:${CSS.escape(k)}'], #view-post [id='f:${CSS.escape(k)}']`))""")


def test_a_fusions_ir_and_a_click_on_a_line_lights_its_op(server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(server + f"/?model={MODEL}&backend=cpu")
    f = _open_code(page)
    fusions = [k for k in _kernels_with_code(f) if "fusion" in k]
    assert fusions, "the compile has emitted fusions with code"
    name = fusions[0]
    # select the fusion in the optimized graph: its code shows, at the first stage (LLVM IR)
    _retry(page, lambda: f.locator(f"#view-post [id='k:{name}']").dispatch_event("click"))
    f.wait_for_function(SHOWN, arg=name, timeout=20_000)
    assert f.locator("#cstage").input_value() == "llvm-ir"
    assert "LLVM IR" in f.locator("#cstage option").all_inner_texts()
    text = "\n".join(f.locator("#code div.cl").all_inner_texts())
    assert re.search(r"define\b.*@", text), "an LLVM function definition"
    facts = f.locator("#code ul.cfacts").inner_text()
    assert re.search(r"global loads \d+ · stores \d+", facts)
    # the kernel's function: its line tagged with the kernel's name
    assert f.locator("#code div.cl.linked", has_text="define").first.locator("span.op, span.otag").first.inner_text() == name
    # a line of arithmetic linked to an instruction the fusion's graph draws inside it (x:NAME)
    fused = f.evaluate("() => [...document.querySelectorAll(`#view-post g.node[id^='x:']`)].map(e => e.id.slice(2))")
    tags = f.evaluate("() => [...document.querySelectorAll('#code div.cl.linked')].map(r =>"
                      " [r.dataset.line, [...r.querySelectorAll('span.otag, span.op')].map(t => t.textContent)])")
    line_no, ops = next((n, ops) for n, ops in tags if any(o in fused for o in ops))
    op = next(o for o in ops if o in fused)
    line = f.locator(f"#code div.cl[data-line='{line_no}']")
    line.click()
    assert "on" in line.get_attribute("class")
    lit = wait_until(lambda: f.evaluate("() => [...document.querySelectorAll('#view-post g.me')].map(e => e.id)"),
                     timeout_s=10, what="the line's instruction lit in the graph")
    assert f"x:{op}" in lit  # the instruction itself, in the optimized graph
    assert f.locator(f"#view-post [id='k:{name}'].hl, #view-post [id='f:{name}'].hl").count() > 0  # its kernel
    # and the ops it stands for before optimization
    assert f.locator("#view-pre g.node.me").count() > 0
    os.makedirs(OUT, exist_ok=True)
    page.screenshot(path=os.path.join(OUT, "code_pane_1600.png"))
    # search in the code: plain text, the lines that have it
    f.locator("#cq").fill("define")
    assert f.locator("#code div.cl.found").count() >= 1
    # a library call (YNNPACK's fusions on XLA:CPU): what it calls, instead of code
    lib = f.evaluate("() => [...document.querySelectorAll(`#view-post g[id^='k:ynn_fusion']`)].map(e => e.id.slice(2))")[0]
    _retry(page, lambda: f.locator(f"#view-post [id='k:{lib}']").dispatch_event("click"))
    f.wait_for_function(SHOWN.replace(" && document.querySelectorAll('#code div.cl').length > 0", ""), arg=lib, timeout=20_000)
    words = f.locator("#code .cnote").inner_text()
    assert words.startswith("calls __ynn_fusion with {") and words.endswith("its code is YNNPACK's, not generated by XLA")
    assert f.locator("#code div.cl").count() == 0
    # the link below the graphs names the pane and the kernel
    wait_until(lambda: "view=code" in page.locator("[data-testid='stMain']").inner_text(), timeout_s=60,
               what="the link to name view=code")


def test_a_link_opens_the_pane_on_its_kernel_and_a_bad_node_is_a_note(server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(server + f"/?model={MODEL}&backend=cpu")
    name = [k for k in _kernels_with_code(_open_code(page)) if "fusion" in k][0]
    page.close()
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(server + f"/?model={MODEL}&backend=cpu&view=code&node={name}")
    f = _frame(page)
    f.wait_for_function(SHOWN, arg=name, timeout=60_000)
    assert f.evaluate("() => document.getElementById('codeB').classList.contains('on')")
    page.close()
    # a kernel this compile does not have: a one-line note, the pane open with nothing selected
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(server + f"/?model={MODEL}&backend=cpu&view=code&node=no_such_fusion.99")
    f = _open_code(page)
    page.get_by_text("has no instruction named 'no_such_fusion.99'").first.wait_for(timeout=30_000)
    assert page.get_by_test_id("stException").count() == 0
    assert f.evaluate("() => document.getElementById('code').dataset.kernel") == ""
    page.close()


def test_the_pane_in_presentation_at_1280x720(server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(server + f"/?model={MODEL}&backend=cpu&present=1")
    f = _open_code(page)
    name = [k for k in _kernels_with_code(f) if "fusion" in k][0]
    _retry(page, lambda: f.locator(f"#view-post [id='k:{name}']").dispatch_event("click"))
    f.wait_for_function(SHOWN, arg=name, timeout=20_000)
    app_idle(page)
    assert page.get_by_test_id("stException").count() == 0
    got = _retry(page, lambda: scan(page))
    assert got["small"] == [], got["small"]  # every label on screen is 14 px or more
    assert got["cut"] == [], got["cut"]
    # long lines wrap instead of running out of the pane
    assert f.evaluate("() => getComputedStyle(document.querySelector('#code div.cl')).whiteSpace") == "pre-wrap"
    os.makedirs(OUT, exist_ok=True)
    page.screenshot(path=os.path.join(OUT, "code_pane_present_1280.png"))


def test_no_payload_in_a_bundles_code_runs(server, browser, tmp_path):  # noqa: F811
    """A bundle whose code (texts, op names, stage names, a library call, the note) carries the
    red team's payload: the pane shows it as text, and nothing runs."""
    import json

    from analysis.codegen.kernel_code import code_json, make_code
    from tests.scenarios.test_xss import MARK, PAYLOAD, hostile_bundle

    d = hostile_bundle()  # every string of a recorded bundle poisoned (test_xss)
    for k in d["kernels"]:  # but the kernels' names, which the graphs draw from the HLO: the code is theirs
        k["name"] = k["name"].removesuffix(PAYLOAD)
    emitted, other = "broadcast_maximum_fusion", "ynn_fusion"
    ir = f"define void @f(ptr %0) {{\n  %1 = fadd float 1.0, 2.0 ; {PAYLOAD}\n  ret void\n}}\n"
    d["code"] = code_json(make_code(
        {emitted: {"stages": {"llvm-ir": ir, "triton-" + PAYLOAD: PAYLOAD},
                   "ops": {"llvm-ir": {2: [emitted, PAYLOAD]}}}},
        library={other: {"target": PAYLOAD, "library": PAYLOAD, "config": PAYLOAD}}, note=PAYLOAD))
    d["schema_version"] = 6
    path = tmp_path / "hostile-code.json"
    path.write_text(json.dumps(d))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    fired: list[str] = []
    page.on("console", lambda m: fired.append(m.text) if MARK in m.text else None)
    page.on("dialog", lambda dlg: (fired.append("dialog: " + dlg.message), dlg.dismiss()))
    page.goto(server + f"/?model={MODEL}&backend=cpu")
    _frame(page)
    app_idle(page)
    page.get_by_text("Upload HLO / bundle").click()
    from tests.scenarios.test_browser import _upload

    _upload(page, path)
    app_idle(page)
    wait_until(lambda: _retry(page, lambda: _frame(page).evaluate(
        "(k) => !!document.querySelector(`#view-post [id='k:${CSS.escape(k)}'], #view-post [id='f:${CSS.escape(k)}']`)", emitted)),
        timeout_s=60, what="the upload's graphs")
    f = _open_code(page)
    for name in (emitted, other):
        f.evaluate("(k) => document.querySelector(`#view-post [id='k:${CSS.escape(k)}'], #view-post [id='f:${CSS.escape(k)}']`)"
                   ".dispatchEvent(new MouseEvent('click', {bubbles: true}))", name)
        f.wait_for_function("(k) => document.getElementById('code').dataset.kernel === k", arg=name, timeout=20_000)
        if name == emitted:  # each stage shown, its picker's labels too
            for stage in f.locator("#cstage option").evaluate_all("os => os.map(o => o.value)"):
                f.locator("#cstage").select_option(stage)
        page.wait_for_function("() => [...document.querySelectorAll('iframe')].every(fr => {"
                               " try { return [...fr.contentDocument.images].every(i => i.complete); } catch (e) { return true; } })",
                               timeout=30_000)
    assert "<img src=x onerror" in f.locator("#code").inner_text()  # the library call's words, as text
    assert fired == [], f"a payload ran: {fired[:3]}"
    assert f.locator("#code img, #code script, #code iframe, #code svg").count() == 0
    page.close()


def test_an_h200_recording_opens_at_its_ptx_with_its_registers(server, browser):  # noqa: F811
    """A recorded H200 compile (no GPU here): the pane opens at PTX, where its loads and stores
    were counted, with ptxas's registers, scrolled to the kernel's .entry."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(server + "/?model=mlp&backend=h200&view=code&node=gemm_fusion_dot")
    f = _frame(page)
    f.wait_for_function(SHOWN, arg="gemm_fusion_dot", timeout=60_000)
    assert f.locator("#cstage").input_value() == "ptx"
    assert {"PTX", "SASS", "ptxas report"} <= set(f.locator("#cstage option").all_inner_texts())
    facts = f.locator("#code ul.cfacts").inner_text()
    assert re.search(r"global loads \d+ · stores \d+, in the PTX", facts) and re.search(r"registers: \d+", facts)
    # scrolled to the .entry line (the text starts with the module's header)
    f.wait_for_function("""() => { const body = document.querySelector('#code .cbody');
        const row = [...body.querySelectorAll('div.cl')].find(r => /\\.entry\\s+gemm_fusion_dot\\s*\\(/.test(r.textContent));
        const top = row.offsetTop - body.offsetTop;
        return body.scrollTop > 0 && top >= body.scrollTop && top < body.scrollTop + body.clientHeight; }""",
                        timeout=10_000)
    page.close()
