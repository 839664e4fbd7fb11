"""The report's Code section (analysis.render.report_code): the selected kernel's generated
code, its stages, its lines linked to HLO instructions, in a real browser both ways (a code line
lights its instruction in the graph, an instruction picked in the graph marks its lines). The
hand-written case: a two-kernel module with a made-up IR text for one kernel; the live case:
the gallery's layernorm compiled on the CPU, its code read from XLA's dump."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import zlib

import pytest

from analysis.codegen.finish import code_of
from analysis.codegen import kernel_code
from analysis.bundle.core import bundle_from_hlo
from analysis.render.report import html_report
from tests.paths import ROOT

OUT = os.path.join(ROOT, "test-output", "report")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

POST = """HloModule m, is_scheduled=true

%fused (p0: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %exp.1 = f32[4]{0} exponential(%p0)
  ROOT %neg.2 = f32[4]{0} negate(%exp.1)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %fusion.0 = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused
  ROOT %copy.3 = f32[4]{0} copy(%fusion.0)
}
"""
HOSTILE = "; </script><img src=x onerror=alert(1)>"
IR = f"""define void @fusion.0(ptr %0) {{
  %exp.1 = call float @expf(float 1.0)
  %neg.2 = fneg float %exp.1
{HOSTILE}
  ret void
}}
"""


def _hand_written():
    b = bundle_from_hlo(POST, name="m")
    b.code = kernel_code.make_code({"fusion.0": {"stages": {"llvm-ir": IR}, "ops": {"llvm-ir": {2: ["exp.1"], 3: ["neg.2"]}}}})
    return b


def _code_data(page: str) -> dict:
    start = page.index("<script type='application/octet-stream' id='xe-code'>")
    text = page[page.index(">", start) + 1: page.index("</script>", start)]
    return json.loads(zlib.decompress(base64.b64decode(text)))


def test_the_section_carries_each_kernels_code_and_its_linked_lines():
    page = html_report(_hand_written())
    assert "<a href='#code'>Code</a>" in page
    data = _code_data(page)
    k = data["kernels"]["fusion.0"]
    assert data["texts"][k["stages"]["llvm-ir"]] == IR and list(k["stages"]) == ["llvm-ir"]
    assert k["ops"] == {"llvm-ir": {"2": ["exp.1"], "3": ["neg.2"]}}
    assert data["stages"] == {"llvm-ir": "LLVM IR"}
    assert "copy.3" not in data["kernels"]  # a kernel without generated code has no entry (and no option)
    assert "<option value='fusion.0'>fusion.0</option>" in page and "<option value='copy.3'>" not in page
    # the code is the program's text: only ever inside the deflated data, never markup
    markup = re.sub(r"<script\b[^>]*>.*?</script>", "", page, flags=re.S)
    assert "onerror" not in markup and "onerror" not in page.split("id='xe-code'>", 1)[1].split("</script>", 1)[0]


def test_kernels_sharing_a_text_carry_it_once_and_count_it_once(monkeypatch):
    """A stack's layers call one function per kernel: their texts are the same, sent once."""
    from analysis.render import report_code

    two = POST.replace("ROOT %copy.3 = f32[4]{0} copy(%fusion.0)",
                       "%fusion.1 = f32[4]{0} fusion(%fusion.0), kind=kLoop, calls=%fused\n"
                       "  ROOT %copy.3 = f32[4]{0} copy(%fusion.1)")
    b = bundle_from_hlo(two, name="m")
    b.code = kernel_code.make_code({"fusion.0": {"stages": {"llvm-ir": IR}}, "fusion.1": {"stages": {"llvm-ir": IR}}})
    # room for the text once (and a character): counted per kernel, the second would not fit
    monkeypatch.setattr(report_code, "MAX_REPORT_CODE_CHARS", len(IR) + 1)
    data = report_code.code_data(b)
    assert data["texts"] == [IR]
    assert [data["kernels"][n]["stages"] for n in ("fusion.0", "fusion.1")] == [{"llvm-ir": 0}, {"llvm-ir": 0}]
    assert not any(data["kernels"][n]["left_out"] for n in ("fusion.0", "fusion.1"))


def test_without_code_there_is_no_section():
    page = html_report(bundle_from_hlo(POST, name="m"))  # an HLO text: no code was read
    assert "id='xe-code'" not in page and "<a href='#code'>" not in page


def test_the_report_holds_at_most_its_share_of_code(monkeypatch):
    from analysis.render import report_code

    monkeypatch.setattr(report_code, "MAX_REPORT_CODE_CHARS", 10)
    k = report_code.code_data(_hand_written())["kernels"]["fusion.0"]
    assert k["left_out"] and k["stages"] == {} and "loads" in k["facts"]  # its facts stay


def test_a_full_report_does_not_make_the_code_of_the_kernels_past_it(monkeypatch, gallery_bundle):
    pytest.importorskip("jax")
    from analysis.render import report_code

    from analysis.bundle.core import Bundle

    b = Bundle.from_json(gallery_bundle("softmax_layernorm").to_json())  # its own: no kernel finished yet
    names = kernel_code.kernel_names(b)
    first = code_of(b, names[0])
    monkeypatch.setattr(report_code, "MAX_REPORT_CODE_CHARS", sum(len(t) for t in first.stages.values()))
    kernels = report_code.code_data(b)["kernels"]
    assert not kernels[names[0]]["left_out"] and all(kernels[n]["left_out"] for n in names[1:])
    # the kernels past the budget were never disassembled (a CPU kernel's code is made on asking)
    assert not any(f"code:{n}" in b.cache.values for n in names[1:])
    loads, stores = kernel_code.loads_stores(b, names[1])
    assert kernels[names[1]]["facts"].startswith(f"{loads} loads, {stores} stores")


@pytest.mark.browser
def test_a_code_line_lights_its_op_and_an_op_marks_its_lines(gallery_bundle):
    pytest.importorskip("jax")
    if not os.path.exists(CHROMIUM):
        pytest.fail("chromium is not installed (the README's test command installs it)")
    from playwright.sync_api import sync_playwright

    b = gallery_bundle("layernorm")  # loop fusions on every XLA in range (jax 0.12.1 makes softmax one YNNPACK call)
    assert kernel_code.has_code(b) and kernel_code.kernel_names(b)
    page_html = html_report(b)
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "code.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page_html)
    # a kernel drawn open (its fused ops are nodes) whose IR links a line to one of them
    drawn = set(re.findall(r'id="post-x:([^"]+)"', page_html))
    name, stage, line, op = next((n, "llvm-ir", ln, o) for n in kernel_code.kernel_names(b)
                                 for ln, ops in sorted(code_of(b, n).ops.get("llvm-ir", {}).items())
                                 for o in ops if o in drawn)
    kc = code_of(b, name)
    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto("file://" + path)
            page.wait_for_selector("body[data-code='ready']", timeout=30_000)
            # the kernel clicked in the graph: its code in the pane (the app's, code_pane.js), every
            # line, the linked ones marked
            page.locator(f"#graph-post [id='post-k:{name}']").dispatch_event("click", {"bubbles": True})
            assert page.input_value("#xe-code-kernel") == name and page.input_value("#xe-code-pane #cstage") == stage
            assert page.locator("#xe-code-pane div.cl").count() == len(kc.stages[stage].split("\n"))
            assert page.locator("#xe-code-pane div.cl.linked").count() == len(kc.ops[stage])
            # a linked line clicked: its instruction lit in the graph
            page.locator(f"#xe-code-pane div.cl[data-line='{line}']").click()
            assert page.locator(f"#graph-post [id='post-x:{op}'].xe-hl").count() == 1
            # that instruction picked in the graph: the code marks exactly its lines
            page.locator(f"#graph-post [id='post-x:{op}']").dispatch_event("click", {"bubbles": True})
            marked = page.locator("#xe-code-pane div.cl.lit").evaluate_all("rs => rs.map(r => +r.dataset.line)")
            assert marked == kc.lines_of(stage, op)
            page.locator("#code").scroll_into_view_if_needed()
            page.screenshot(path=os.path.join(OUT, "code-1280.png"))
            # the search (plain text, any case) marks the lines holding the text
            page.fill("#xe-code-pane #cq", "define")
            want = sum(1 for ln in kc.stages[stage].split("\n") if "define" in ln.lower())
            assert page.locator("#xe-code-pane div.cl.found").count() == want > 0
        finally:
            browser.close()
    assert errors == [], errors
