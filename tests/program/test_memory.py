"""Memory: XLA's buffer assignment and live ranges parsed (analysis.program.memory), the peak and what is
live at it, drawn (analysis.render.memory), in the CLI, a dump import and the lessons. Fixtures in
tests/fixtures/memory are real compiles (jax 0.10.2, CPU; see its README); the expected numbers
are read off those texts by hand, or come from the small texts written here."""

from __future__ import annotations

import io
import json
import os
import zipfile

import pytest

from analysis.program import memory as m
from analysis.bundle.core import Bundle, bundle_from_hlo
from analysis.errors import ExplorerError
from tests.paths import FIXTURES

FIX = os.path.join(FIXTURES, "memory")


def _read(name: str) -> str:
    with open(os.path.join(FIX, name), encoding="utf-8") as f:
        return f.read()


def fixture_bundle(model: str) -> Bundle:
    """The fixture's optimized module as a bundle, its memory read from the captured texts."""
    b = bundle_from_hlo(_read(f"{model}.cpu_after_optimizations.txt"), model)
    b.memory_analysis = json.loads(_read(f"{model}.memory_analysis.json"))
    b.memory = m.bundle_memory(b, _read(f"{model}.cpu_after_optimizations-buffer-assignment.txt"),
                               _read(f"{model}.cpu_after_optimizations-live-range.txt"))
    return b


# ----------------------------------------------------------------------------- parsing real texts


def test_mlp_allocations_and_values():
    allocs = m.parse_buffer_assignment(_read("mlp.cpu_after_optimizations-buffer-assignment.txt"))
    assert [a.index for a in allocs] == list(range(7))
    a0 = allocs[0]
    assert (a0.size, a0.kind, a0.parameter, a0.shape) == (524288, "parameter", 1, "f32[256,512]")
    assert [v.key for v in a0.values] == ["w1.1{}"]
    out = allocs[3]
    assert out.kind == "output" and out.maybe_live_out and out.size == 65536
    assert [v.instruction for v in out.values] == ["ynn_fusion", "broadcast_add_fusion"]
    temp = allocs[6]
    assert temp.kind == "temp" and temp.size == 262144
    assert [(v.instruction, v.offset, v.size) for v in temp.values] == [
        ("ynn_fusion.1", 0, 262144), ("broadcast_maximum_fusion", 0, 262144)]


def test_mlp_live_ranges_and_peak():
    lr = m.parse_live_range(_read("mlp.cpu_after_optimizations-live-range.txt"))
    assert lr.end == 9 and len(lr.schedule) == 9 and lr.schedule[7] == "ynn_fusion"
    assert lr.ranges["ynn_fusion.1{}"] == (5, 6) and lr.ranges["x.1{}"] == (0, 9)
    mem = fixture_bundle("mlp").memory
    # step 7: the five parameters (920064) + broadcast_maximum_fusion (262144) + ynn_fusion (65536)
    assert mem["peak"]["bytes"] == 920064 + 262144 + 65536 == 1247744
    assert (mem["peak"]["step"], mem["peak"]["instruction"]) == (7, "ynn_fusion")
    curve = {r["step"]: r["total"] for r in m.live_curve(mem)}
    # step 6: ynn_fusion.1 (5-6) and broadcast_maximum_fusion (6-7) share offset 0 of the temp
    # allocation: 262144 once, not twice
    assert curve[6] == 920064 + 262144
    # step 8: ynn_fusion and the output are the same slice of the output allocation
    assert curve[8] == 920064 + 65536


def test_mlp_buffers_at_the_peak_link_kernels_and_lines():
    b = fixture_bundle("mlp")
    rows = m.peak_buffers(b.memory)
    assert rows[0]["name"] == "w1.1{}" and {r["name"] for r in rows[1:3]} == {"w2.1{}", "broadcast_maximum_fusion{}"}
    bmf = next(r for r in rows if r["name"] == "broadcast_maximum_fusion{}")
    assert bmf["kernel"] == "broadcast_maximum_fusion" and bmf["kind"] == "temp"
    assert bmf["source"] == ["/work/main/sample_models/mlp.py", 14]
    assert rows[0]["kernel"] is None and rows[0]["op_name"] == "w1"  # a parameter: no kernel writes it
    assert sum(r["bytes"] for r in rows) == 1247744
    assert m.kernel_temp_bytes(b.memory) == {"ynn_fusion.1": 262144, "broadcast_maximum_fusion": 262144}


@pytest.mark.parametrize("model", ["mlp", "rnn_scan", "attention"])
def test_totals_agree_with_memory_analysis(model):
    b = fixture_bundle(model)
    ag = b.memory["agreement"]
    for k in ("argument", "output", "temp", "alias"):
        assert ag[k]["diff"] == 0, (k, ag[k])
    # XLA:CPU's peak_memory_in_bytes is arguments + outputs + constants (no temporaries)
    assert ag["peak"]["xla"] == ag["peak"]["persistent"]
    t = b.memory["totals"]
    # at the last step every parameter and result is live; a constant may be dead by then
    assert t["argument"] + t["output"] - t["alias"] <= b.memory["peak"]["bytes"] <= ag["peak"]["bound"]
    assert b.memory["peak"]["temp_peak_bytes"] <= b.memory["totals"]["temp"]


def test_attention_kinds():
    t = fixture_bundle("attention").memory["totals"]
    # read off the text: 3 params of 262144; outputs 2 x 262144 + a 16-byte tuple; 3 constants and
    # 12 thread-local scalars of 4 bytes; one preallocated temp of 3670016
    assert t["argument"] == 3 * 262144 and t["output"] == 2 * 262144 + 16
    assert (t["constant"], t["thread_local"], t["temp"]) == (12, 48, 3670016)


def test_loop_state_updated_in_place_counts_once():
    mem = fixture_bundle("rnn_scan").memory
    curve = {r["step"]: r["total"] for r in m.live_curve(mem)}
    params = 1048576 + 16384 + 65536 + 65536 + 512
    # step 31 (the dynamic-update-slice): the loop's stacked output arg_tuple.1{2} and its update
    # bitcast_dynamic-update-slice_fusion share offset 0 (1 MiB) of the temp allocation; with
    # add_tanh_fusion (16384), copy.4 and wrapped_add (4 each) and two live constants (8).
    # XLA's own live-range listing adds the shared MiB twice (3310096).
    assert curve[31] == params + 1048576 + 16384 + 4 + 4 + 8 == 3310096 - 1048576
    # the peak is earlier: at steps 29 and 30 the two matmul results (16384 each) are live with the
    # slice (dynamic-slice_bitcast_fusion at 29, add_tanh_fusion at 30) of the output allocation;
    # the first of equal steps is the peak
    assert (mem["peak"]["step"], mem["peak"]["bytes"]) == (29, params + 1048576 + 3 * 16384 + 4 + 4 + 8)
    assert curve[30] == curve[29]
    rows = m.peak_buffers(mem, 31)
    big = [r for r in rows if r["allocation"] == 16 and r["offset"] == 0]
    assert len(big) == 1 and big[0]["name"] == "bitcast_dynamic-update-slice_fusion{}"
    assert big[0]["aliases"] == ["arg_tuple.1{2}"]


# ----------------------------------------------------------------------------- edge cases, by hand

SMALL = """BufferAssignment:
allocation 0: size 64, parameter 0, shape |f32[16]| at ShapeIndex {}:
 value: <0 p @0> (size=64,offset=0): f32[16]{0}
allocation 1: size 100, preallocated-temp:
 value: <1 a @0> (size=40,offset=0): f32[10]{0}
 value: <2 b @0> (size=40,offset=40): f32[10]{0}
 value: <3 t @0> (size=20,offset=80): (f32[10], f32[10])
 value: <4 c @0> (size=60,offset=20): f32[15]{0}
allocation 2: size 8, thread-local:
 value: <5 r @0> (size=8,offset=0): f32[2]{0}
allocation 3: size 64, parameter 1, shape |f32[16]| at ShapeIndex {}, maybe-live-out:
 value: <6 q @0> (size=64,offset=0): f32[16]{0}
allocation 4: size 4, constant:
 value: <7 k @0> (size=4,offset=0): f32[]
"""
SMALL_LR = """HloLiveRange (max 4):
  InstructionSequence:
    0:p
    1:a
    2:b
    3:c
  BufferLiveRange:
    p{}:0-4
    q{}:0-4
    k{}:0-3
    a{}:1-2
    b{}:2-3
    c{}:3-4
    t{}:2-2
"""


def test_hand_worked_overlaps():
    mem = m.memory_from_texts(SMALL, SMALL_LR)
    curve = {r["step"]: r for r in m.live_curve(mem)}
    # step 2: a [0,40) + b [40,80) + t [80,100) = 100 temp bytes; p, q 64 each; k 4
    assert curve[2]["temp"] == 100 and curve[2]["total"] == 64 + 64 + 4 + 100
    # step 3: b [40,80) and c [20,80) overlap: [20,80) = 60 bytes, not 100
    assert curve[3]["temp"] == 60
    # the thread-local r never counts
    assert all(r["total"] == sum(r[k] for k in m.HEAP_KINDS) for r in curve.values())
    assert mem["peak"]["step"] == 2 and mem["peak"]["bytes"] == 232
    t = mem["totals"]
    # q is a parameter that is also live-out: an alias (donated), counted as argument and output
    assert (t["argument"], t["output"], t["alias"], t["temp"], t["thread_local"], t["constant"]) == \
        (128, 64, 64, 100, 8, 4)
    rows = m.peak_buffers(mem, 3)
    assert [(r["name"], r["bytes"]) for r in rows if r["kind"] == "temp"] == [("c{}", 60), ("b{}", 0)]


def test_bad_texts_are_one_line_errors():
    with pytest.raises(ExplorerError) as e:
        m.parse_buffer_assignment("hello", "x.txt")
    assert e.value.phase == "load"
    with pytest.raises(ExplorerError) as e:
        m.parse_buffer_assignment("allocation 0: size 4, constant:\n value: <garbage>\n", "x.txt")
    assert e.value.line == 2 and "value" in e.value.message
    with pytest.raises(ExplorerError):
        m.parse_live_range("no header here")
    b = bundle_from_hlo(_read("mlp.cpu_after_optimizations.txt"), "mlp")
    assert m.bundle_memory(b, "not a buffer assignment")["error"]


HLO = """HloModule small, is_scheduled=true

ENTRY %main (p: f32[16]) -> f32[16] {
  %p = f32[16]{0} parameter(0)
  %a = f32[16]{0} exponential(%p)
  %b = f32[16]{0} negate(%a)
  ROOT %c = f32[16]{0} add(%b, %p)
}
"""
HLO_BA = """BufferAssignment:
allocation 0: size 64, parameter 0, shape |f32[16]| at ShapeIndex {}:
 value: <0 p @0> (size=64,offset=0): f32[16]{0}
allocation 1: size 64, output shape is |f32[16]|, maybe-live-out:
 value: <3 c @0> (size=64,offset=0): f32[16]{0}
allocation 2: size 128, preallocated-temp:
 value: <1 a @0> (size=64,offset=0): f32[16]{0}
 value: <2 b @0> (size=64,offset=64): f32[16]{0}
"""


def test_live_ranges_from_the_schedule_without_a_live_range_file():
    b = bundle_from_hlo(HLO, "small")
    mem = m.memory_from_texts(HLO_BA, None, b.module("hlo_after"), b.kernels)
    assert mem["live_ranges"] == "schedule" and mem["schedule"] == ["p", "a", "b", "c"]
    by = {v["name"]: (v["start"], v["end"]) for v in mem["values"]}
    assert by == {"p{}": (0, 4), "a{}": (1, 2), "b{}": (2, 3), "c{}": (3, 4)}
    assert mem["peak"]["bytes"] == 64 + 128 and mem["peak"]["step"] == 2
    assert {v["name"]: v["kernel"] for v in mem["values"]}["a{}"] == "a"


def test_compare_finds_intermediates_only_the_unfused_compile_writes():
    def mem(values, end=9):
        return {"end": end, "values": values, "peak": {"bytes": 1, "temp_peak_bytes": 1}, "totals": {"temp": 1}}

    def val(name, op, shape, size, kind="temp", e=3):
        return {"name": name, "instruction": name, "kernel": name, "op_name": op, "shape": shape, "size": size,
                "kind": kind, "end": e, "phi": False, "id": size, "source": None}

    fused = mem([val("fusion", "jit(f)/exp", "f32[8]", 32)])
    unfused = mem([val("exp", "jit(f)/exp", "f32[8]", 32), val("sub", "jit(f)/sub", "f32[8]", 32),
                   val("out", "jit(f)/add", "f32[8]", 32, kind="output", e=9)])
    c = m.compare_memory(fused, unfused)
    assert [v["name"] for v in c["only_unfused"]] == ["sub"]  # the live-out result is no intermediate
    assert (c["only_unfused_count"], c["only_unfused_bytes"]) == (1, 32)


# ----------------------------------------------------------------------------- views of it


def test_render_text_html_and_graph_colour():
    from analysis.render import memory as rm
    from analysis.render.module_graphs import post_graph

    b = fixture_bundle("mlp")
    text = rm.memory_text(b)
    assert "peak 1.2 MiB live at step 7 (ynn_fusion)" in text and "broadcast_maximum_fusion" in text
    assert "match compiled.memory_analysis() to the byte" in text
    b.memory["values"][0]["name"] = "<img src=x onerror=alert(1)>"
    html = rm.memory_section_html(b)
    assert "<img src=x" not in html and "&lt;img src=x" in html
    g = post_graph(b.module("hlo_after"), b.kernels, temp_bytes=m.kernel_temp_bytes(b.memory))
    dot = g.to_dot()
    node = next(line for line in dot.splitlines() if line.strip().startswith('"k:broadcast_maximum_fusion"'))
    assert "writes 262,144 B of temporaries" in node
    plain = post_graph(b.module("hlo_after"), b.kernels).to_dot()
    assert g.color_by == "memory" and dot != plain
    fig = rm.peak_figure(b.memory)
    assert "broadcast_maximum_fusion" in list(fig.data[0].customdata)


def test_memory_text_without_a_buffer_assignment():
    from analysis.render import memory as rm

    b = bundle_from_hlo(HLO, "small")
    assert "No buffer assignment" in rm.memory_text(b)


def test_dump_zip_with_buffer_assignment():
    from analysis.inputs.dump import bundles_from_dump_zip

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for suffix in ("cpu_after_optimizations.txt", "cpu_after_optimizations-buffer-assignment.txt",
                       "cpu_after_optimizations-live-range.txt"):
            z.writestr(f"dump/module_0028.jit_model.{suffix}", _read(f"mlp.{suffix}"))
    (b,) = bundles_from_dump_zip(buf.getvalue(), "mlp.zip")
    assert b.memory["peak"]["bytes"] == 1247744
    assert b.memory["files"] == ["module_0028.jit_model.cpu_after_optimizations-buffer-assignment.txt",
                                 "module_0028.jit_model.cpu_after_optimizations-live-range.txt"]
    assert Bundle.from_json(b.to_json()).memory["peak"] == b.memory["peak"]


def test_cli_memory_reads_a_bundle(tmp_path, capsys):
    from analysis.cli import main

    path = tmp_path / "mlp.json"
    fixture_bundle("mlp").save(str(path))
    assert main(["memory", str(path), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "peak 1.2 MiB" in out and "top 3" in out and "w1.1{}" in out


# ----------------------------------------------------------------------------- real compiles


def _names():
    from sample_models import gallery

    return list(gallery())


@pytest.mark.parametrize("name", _names())
def test_every_gallery_model_agrees_with_memory_analysis(gallery_bundle, name):
    b = gallery_bundle(name)
    if b.memory is None:
        pytest.skip("a recorded bundle from before buffer assignments were kept")
    assert b.memory["live_ranges"] == "xla"
    ag = b.memory["agreement"]
    assert all(ag[k]["diff"] == 0 for k in ("argument", "output", "temp", "alias")), ag
    assert ag["peak"]["xla"] == ag["peak"]["persistent"]
    p = b.memory["peak"]
    t = b.memory["totals"]
    assert t["argument"] + t["output"] - t["alias"] <= p["bytes"] <= ag["peak"]["bound"]
    assert p["temp_peak_bytes"] <= b.memory["totals"]["temp"]


def test_attention_lesson_with_the_fusion_off_compile():
    pytest.importorskip("jax")
    from analysis.compile.fusion_off import compare_fusion
    from analysis.compile.stages import analyze_model
    from sample_models.lessons import lesson

    c = analyze_model("attention", "cpu")
    compare_fusion(c, measure_it=False)
    cmp = c.bundle.fusion_comparison["memory"]
    assert cmp["unfused"]["peak_bytes"] > cmp["default"]["peak_bytes"]
    les = lesson(c.bundle)
    s_claims = [x for x in les.checks if "score matrix S" in x.claim or "S-sized" in x.claim]
    assert len(s_claims) == 2 and all(x.holds for x in s_claims)
    # S = [heads, seq, seq] f32 = 4 * 256 * 256 * 4 bytes
    assert "f32[1,4,256,256], 1.0 MiB" in les.text


# ----------------------------------------------------------------------------- in a real browser


from tests.scenarios.test_browser import browser, server  # noqa: E402,F401 - the shared app and Chromium fixtures


@pytest.mark.browser
def test_browser_memory_view_peak_and_click_selects_kernel(server, browser, gallery_bundle):
    """Open the memory view of attention, read the peak, click the biggest buffer's bar: its
    kernel becomes the selection (the graph and the details follow it)."""
    from tests.polling import settled

    url = server
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(url + "/?model=attention&backend=cpu")
        page.get_by_role("tab", name="Memory").wait_for(timeout=240_000)
        page.get_by_role("tab", name="Memory").click()
        panel = page.get_by_role("tabpanel").filter(has_text="peak live memory")
        panel.locator("[data-testid='stMetricValue']").first.wait_for(timeout=120_000)
        peak = panel.locator("[data-testid='stMetricValue']").first.inner_text()
        # the peak of this very compile (jax 0.10.2: 768 KiB inputs + 256 KiB of the output + 3.5 MiB
        # temporaries + 8 B = 4.5 MiB; another XLA assigns buffers a little differently)
        from analysis.render.format import human_bytes

        assert peak == human_bytes(gallery_bundle("attention").memory["peak"]["bytes"])
        chart = panel.locator(".js-plotly-plot").nth(1)
        chart.scroll_into_view_if_needed()
        bar = chart.locator("g.trace.bars path").last  # the top bar: the biggest buffer
        bar.wait_for(timeout=60_000)
        settled(bar.bounding_box, what="the chart to be drawn in place")  # Plotly's drawing is over
        bar.click(force=True)
        # the kernel of the biggest buffer live at the peak: the peak table's first row (which one
        # it is depends on the XLA: jax 0.12.0's ynn_fusion.5, another release numbers them anew)
        from analysis.render.memory import peak_rows

        top = peak_rows(gallery_bundle("attention").memory)[0]["kernel"]
        assert top
        page.wait_for_function("t => document.body.innerText.includes('Selected: ' + t)", arg=top, timeout=60_000)
    finally:
        page.close()


def _recorded_h200():
    from sample_models import RECORDED_DIR

    folder = os.path.join(str(RECORDED_DIR), "h200")
    return sorted(f for f in os.listdir(folder) if f.endswith(".bundle.json")) if os.path.isdir(folder) else []


@pytest.mark.parametrize("name", _recorded_h200())
def test_recorded_h200_compiles_agree_with_memory_analysis(name):
    """XLA:GPU for an H200 (recorded without the GPU): totals to the byte; XLA's peak is the
    whole-program allocations plus the most temporaries live at once, within 72 bytes (small
    scalars and a 16-byte output tuple table that it places differently)."""
    from analysis.program.memory import agreement
    from sample_models import RECORDED_DIR

    b = Bundle.load(os.path.join(str(RECORDED_DIR), "h200", name))
    if not b.memory or b.memory.get("error"):
        pytest.skip("recorded before buffer assignments were kept")
    ag = agreement(b.memory, b.memory_analysis)
    assert all(ag[k]["diff"] == 0 for k in ("argument", "output", "temp", "alias")), ag
    # a sharded program's async collectives hold their operands and results in start tuples
    # (tables of 8 bytes a pointer), more small buffers XLA places differently: 8 bytes more each
    post = b.module("hlo_after")
    tables = sum(len(i.shape.tuple_shapes) + sum(len(t.tuple_shapes or ()) for t in i.shape.tuple_shapes)
                 for i in post.instructions() if i.opcode.endswith("-start") and i.shape.is_tuple)
    assert abs(ag["peak"]["xla"] - ag["peak"]["persistent_plus_temp_peak"]) <= 72 + 8 * tables, ag["peak"]
    assert b.memory["peak"]["temp_peak_bytes"] <= b.memory["totals"]["temp"]
