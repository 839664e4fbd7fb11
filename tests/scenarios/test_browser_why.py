"""Why not fused, on stage: a hand-written program whose log says XLA refused to fuse a reduce
into its broadcast. The decision reaches the graphs' payload (``edge_why``), and in a real
browser a click on the refused edge opens the panel beside the graphs with XLA's words, the
gloss and both ops; the op's details list the decision, and key ``w`` opens it again."""

from __future__ import annotations

import pytest

from analysis.bundle.core import bundle_from_hlo
from analysis.fusion.decisions import from_texts
from analysis.fusion.glossary import GLOSSES
from analysis.render.decisions import edge_why
from tests.polling import in_page
from tests.scenarios.test_browser import _upload, browser, server  # noqa: F401 - fixtures

PRE = """HloModule jit_model

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p.0 = f32[8,8]{1,0} parameter(0), metadata={op_name="x"}
  c.0 = f32[] constant(0)
  reduce_sum.0 = f32[8]{0} reduce(p.0, c.0), dimensions={1}, to_apply=add, metadata={op_name="jit(model)/reduce_sum"}
  bc.2 = f32[8,8]{1,0} broadcast(reduce_sum.0), dimensions={0}, metadata={op_name="jit(model)/broadcast"}
  ROOT mul.3 = f32[8,8]{1,0} multiply(bc.2, p.0), metadata={op_name="jit(model)/mul"}
}
"""

# the reduce stays a kernel of its own; the broadcast and the multiply are one loop fusion
POST = """HloModule jit_model, is_scheduled=true

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

fused_computation {
  q.0 = f32[8]{0} parameter(0)
  q.1 = f32[8,8]{1,0} parameter(1)
  bc.2 = f32[8,8]{1,0} broadcast(q.0), dimensions={0}, metadata={op_name="jit(model)/broadcast"}
  ROOT mul.3 = f32[8,8]{1,0} multiply(bc.2, q.1), metadata={op_name="jit(model)/mul"}
}

ENTRY main {
  p.0 = f32[8,8]{1,0} parameter(0), metadata={op_name="x"}
  c.0 = f32[] constant(0)
  reduce_sum.0 = f32[8]{0} reduce(p.0, c.0), dimensions={1}, to_apply=add, metadata={op_name="jit(model)/reduce_sum"}
  ROOT loop_fusion = f32[8,8]{1,0} fusion(reduce_sum.0, p.0), kind=kLoop, calls=fused_computation, metadata={op_name="jit(model)/mul"}
}
"""

# XLA:CPU's fusion log, in the form jax 0.10.2 prints it
LOG = """\
I1201 09:14:35.755961   20414 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module jit_model: simplification
I1201 09:14:35.755962   20414 hlo_pass_pipeline.cc:181]   HLO pass fusion
I1201 09:14:35.756079   20414 instruction_fusion.cc:649] Considering fusion of: %bc.2 = f32[8,8]{1,0} broadcast(%reduce_sum.0), dimensions={0} with operand reduce_sum.0
I1201 09:14:35.756090   20414 instruction_fusion.cc:687] not fusing operand %reduce_sum.0 = f32[8]{0} reduce(%p.0, %c.0), dimensions={1}, to_apply=%add because Fusion is not profitable.
"""
REASON = "Fusion is not profitable."


def _bundle():
    b = bundle_from_hlo(POST, name="why", before_text=PRE)
    b.fusion_decisions = from_texts(b.module("hlo_before"), b.module("hlo_after"), b.provenance, "cpu", LOG, [])
    return b


def test_the_refused_edge_carries_its_row_reason_and_gloss():
    why = edge_why(_bundle().fusion_decisions)
    assert why["edges"] == [["reduce_sum.0", "bc.2", 0, "not fused", "fusion", 0]]
    assert why["reasons"] == [[REASON, GLOSSES[REASON]]]
    assert edge_why(None) == {"edges": [], "reasons": []}
    # bad records (an index out of range) are skipped, not raised on
    assert edge_why({"records": [], "edges": [{"producer": "a", "consumer": "b", "records": [3]}]})["edges"] == []


def _why_frame(page, timeout_s: float = 120):
    """The graph frame of the uploaded program (not the gallery model the page opened with),
    once its refused edge is drawn."""
    def drawn():
        for f in page.frames:
            if "xla_graph" in (f.url or "") and not f.is_detached():
                try:
                    if f.locator("#view-pre g.edge.why").count() and f.locator("#view-pre g[id='op:bc.2']").count():
                        return f
                except Exception:  # noqa: BLE001 - a frame swapped by a rerun: look again
                    pass
        return None

    return in_page(page, drawn, timeout_s, "the refused edge to be drawn", interval_s=0.4)


@pytest.mark.browser
def test_a_click_on_the_refused_edge_shows_xlas_reason_and_the_gloss(server, browser, tmp_path):  # noqa: F811
    path = tmp_path / "why.bundle.json"
    path.write_text(_bundle().to_json())
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(server)
    page.get_by_text("Upload HLO / bundle").click()
    _upload(page, path)
    f = _why_frame(page)
    mark = f.locator("#view-pre g.edge.why text", has_text="✕")
    # the mark is at least as tall as the graph's node labels
    heights = f.evaluate("() => [...document.querySelectorAll('#view-pre g.node text')]"
                         ".map(t => t.getBoundingClientRect().height)")
    assert mark.bounding_box()["height"] >= max(heights) - 0.5
    mark.click()
    panel = f.locator("#details")
    panel.get_by_text(REASON).wait_for(timeout=10_000)
    text = panel.inner_text()
    assert "Why not fused" in text
    assert GLOSSES[REASON] in text
    assert "reduce_sum.0" in text and "bc.2" in text
    assert "Row #0" in text
    # the panel is beside the graphs, its reason in large type
    size = f.evaluate("() => parseFloat(getComputedStyle(document.querySelector('#details .words')).fontSize)")
    assert size >= 18
    pre, det = f.locator("#view-pre").bounding_box(), panel.bounding_box()
    assert det["x"] > pre["x"] + pre["width"] - 1 and det["y"] < pre["y"] + pre["height"]
    # the consumer's details list the decision; key w on it opens the panel again
    f.evaluate("() => document.querySelector(\"#view-pre g[id='op:bc.2']\").dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    f = _why_frame(page)
    f.locator("#details").get_by_text("not fused with reduce_sum.0").wait_for(timeout=10_000)
    assert REASON in f.locator("#details").inner_text()
    f.locator("#view-pre").click(position={"x": 3, "y": 3})  # focus in the frame, nothing selected by it
    f.evaluate("() => document.querySelector(\"#view-pre g[id='op:bc.2']\").dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    page.keyboard.press("w")
    f.locator("#details").get_by_text("Why not fused").wait_for(timeout=10_000)
