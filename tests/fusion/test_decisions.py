"""Fusion decisions: parsing XLA's fusion log and fusion process dump, mapping them to the program,
and showing them (CLI, graph tooltips, report). The fixtures in tests/fixtures/decisions/ were
captured from real compiles here with jax 0.10.2 (README there); expected values are read off
those lines, not off this code's output."""

from __future__ import annotations

import json
import os

import pytest

from analysis.bundle.core import Bundle, analyze
from analysis.fusion.decisions import edge_notes, from_texts, op_lines
from analysis.fusion.gpu_dump import parse_fusion_dump
from analysis.fusion.glossary import GLOSSES, gloss
from analysis.fusion.log import CREATED, FUSED, NOT_FUSED, parse_instr, parse_log
from tests.paths import FIXTURES

FIX = os.path.join(FIXTURES, "decisions")


def _read(name: str) -> str:
    with open(os.path.join(FIX, name), encoding="utf-8") as f:
        return f.read()


def _bundle(model: str, tag: str, platform: str) -> Bundle:
    b = Bundle(source={"kind": "gallery", "name": model}, environment={"platform": platform},
               stages={"hlo_before": _read(f"{model}.{tag}.before.hlo"), "hlo_after": _read(f"{model}.{tag}.after.hlo")})
    return analyze(b)


def _decisions(model: str, tag: str = "cpu", platform: str = "cpu", dump: bool = False) -> dict:
    b = _bundle(model, tag, platform)
    dumps = [_read(f"{model}.{tag}.priority_fusion_dump.txt")] if dump else []
    return from_texts(b.module("hlo_before"), b.module("hlo_after"), b.provenance, platform,
                      _read(f"{model}.{tag}.log"), dumps, {"jax": "0.10.2"})


# --- parsing, on lines written here (copied from a real log: jax 0.10.2, XLA:CPU) -----------

CPU_LINES = """\
I1201 09:14:35.755961   20414 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module jit_model: simplification
I1201 09:14:35.755962   20414 hlo_pass_pipeline.cc:181]   HLO pass fusion
I1201 09:14:35.755963   20414 instruction_fusion.cc:649] Considering fusion of: %exp.0 = f32[8]{0} exponential(%sub.1), metadata={op_name="jit(f)/exp" stack_frame_id=2} with operand sub.1
I1201 09:14:35.756018   20414 cpu_instruction_fusion.cc:483] Fusing: consumer is elementwise or fusible.
I1201 09:14:35.756027   20414 instruction_fusion.cc:848] Fusing %sub.1 = f32[8]{0} subtract(%x.1, %b.1), metadata={op_name="jit(f)/sub" stack_frame_id=1} into %exp.0 = f32[8]{0} exponential(%sub.1), metadata={op_name="jit(f)/exp" stack_frame_id=2}
I1201 09:14:35.756071   20414 instruction_fusion.cc:855]        created new fusion: %subtract_exponential_fusion = f32[8]{0} fusion(%x.1, %b.1), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(f)/exp" stack_frame_id=2}
I1201 09:14:35.756079   20414 instruction_fusion.cc:649] Considering fusion of: %bc.2 = f32[8,8]{1,0} broadcast(%reduce_sum.0), dimensions={0} with operand reduce_sum.0
I1201 09:14:35.756090   20414 instruction_fusion.cc:687] not fusing operand %reduce_sum.0 = f32[8]{0} reduce(%p.0, %c.0), dimensions={1}, to_apply=%add because Fusion is not profitable.
I1201 09:14:35.756095   20414 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module scratch: fusion
I1201 09:14:35.756096   20414 instruction_fusion.cc:687] not fusing operand %y = f32[8]{0} exp(%x) because Fusion is not profitable.
"""


def test_parse_log_reads_fused_created_and_refused_with_pass_and_module():
    recs, facts = parse_log(CPU_LINES, "jit_model")
    assert facts["module"] == "jit_model" and facts["modules"] == {"jit_model": 2, "scratch": 1}
    fused, refused = recs
    assert (fused.decision, fused.producer, fused.consumer) == (FUSED, "sub.1", "exp.0")
    assert fused.reason == "Fusing: consumer is elementwise or fusible."
    assert fused.fusion == "subtract_exponential_fusion" and fused.pass_name == "fusion"
    assert (fused.producer_opcode, fused.producer_op_name, fused.producer_frame) == ("subtract", "jit(f)/sub", 1)
    assert (refused.decision, refused.producer, refused.consumer) == (NOT_FUSED, "reduce_sum.0", "bc.2")
    assert refused.reason == "Fusion is not profitable."


def test_parse_instr_handles_tuple_shapes_and_escaped_op_names():
    i = parse_instr('%fusion.3 = (f32[2]{0}, s32[]) fusion(%a, %b), kind=kLoop, metadata={op_name="params[\\\'w\\\']/x"}')
    assert (i.name, i.opcode, i.op_name) == ("fusion.3", "fusion", "params['w']/x")
    assert parse_instr("add.29").name == "add.29"


def test_library_rewriter_lines_start_grow_and_skip():
    text = """\
I1201 09:16:31.972842   21775 library_rewriter.cc:353] Starting a fusion with: %reduce_sum.39 = f32[128]{0} reduce(%square.3, %constant.19), dimensions={1}, to_apply=%region_5.6, metadata={op_name="jit(model)/ln2/reduce_sum" stack_frame_id=9}
I1201 09:16:31.972871   21775 library_rewriter.cc:243]   Up: Fusing with: %square.3 = f32[128,256]{1,0} multiply(%sub.39, %sub.39), metadata={op_name="jit(model)/ln2/square" stack_frame_id=27}
I1201 09:16:31.972886   21775 library_rewriter.cc:294]   Skipping unsupported instruction: %multiply.9 = f32[128]{0} multiply(%ynn_fusion.2, %broadcast.16), metadata={op_name="jit(model)/ln2/div" stack_frame_id=9}
"""
    start, up, skip = parse_log(text)[0]
    assert (start.decision, start.producer) == (CREATED, "reduce_sum.39")
    assert (up.decision, up.producer, up.consumer) == (FUSED, "square.3", "reduce_sum.39")
    assert (skip.decision, skip.reason) == (NOT_FUSED, "Skipping unsupported instruction")


def test_gpu_lines_priority_fusion_and_triton_gemm():
    text = """\
I1201 09:17:52.115110   23156 priority_fusion.cc:1331] Fusing %mul.8 = f32[128,256]{1,0} broadcast(%rsqrt.6), dimensions={0}, metadata={op_name="jit(model)/ln2/mul" stack_frame_id=31} into %mul.9 = f32[128,256]{1,0} multiply(%parameter_0.12, %mul.8), metadata={op_name="jit(model)/ln2/mul" stack_frame_id=31}
I1201 09:17:52.115111   23156 priority_fusion.cc:1000] Cannot fuse reduce_sum.29 with mul.9, because: fusion into output of a reduce fusion would create a loop fusion
I1201 09:17:52.115112   23156 gemm_fusion.cc:1270] %dot_general.8 = f32[4,128,64]{2,0,1} dot(%div.17, %bitcast.2), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(model)/attention/dot_general" stack_frame_id=22}
I1201 09:17:52.115113   23156 gemm_fusion.cc:239] Not fusing %div.17 = f32[4,128,128]{2,1,0} divide(%exp.1, %div.16), metadata={op_name="jit(model)/attention/div" stack_frame_id=6} to the output due to the decision: Not obviously profitable to fuse as input.
"""
    fused, cannot, gemm = parse_log(text)[0]
    assert (fused.pass_name, fused.producer, fused.consumer) == ("priority-fusion", "mul.8", "mul.9")
    assert (cannot.producer, cannot.consumer) == ("reduce_sum.29", "mul.9")
    assert cannot.reason == "fusion into output of a reduce fusion would create a loop fusion"
    assert (gemm.producer, gemm.consumer, gemm.decision) == ("div.17", "dot_general.8", NOT_FUSED)
    assert gemm.reason == "Not obviously profitable to fuse as input."


def test_fusion_process_dump_steps_and_module():
    text = _read("transformer_block.h200.priority_fusion_dump.txt")
    recs, module_text = parse_fusion_dump(text)
    # counted in the file: 28 `fusion {` steps, 47 `producer_ineligible {` steps
    assert sum(r.decision == FUSED for r in recs) == 28
    assert sum(r.decision == NOT_FUSED for r in recs) == 47
    first = next(r for r in recs if r.decision == FUSED)
    assert (first.fusion, first.producer, first.consumer) == ("fusion.18", "integer_pow.2.0", "integer_pow.3.0")
    assert any(r.reason == "not fusing because there are only bitcast users" and r.producer == "split.3.0"
               for r in recs)
    assert module_text.startswith("HloModule jit_model")


# --- mapped to the program (fixtures) --------------------------------------------------------

def test_mlp_cpu_dot_to_bias_add_edge_carries_xlas_reason():
    fd = _decisions("mlp")
    # the log (line 320) says: not fusing operand %ynn_fusion.1 (dense1's dot) into the bias add
    # because operand can not be duplicated
    notes = edge_notes(fd)
    assert notes[("dot_general.2", "add.11")].endswith("operand can not be duplicated")
    assert "not fused" in notes[("dot_general.2", "add.11")]
    assert fd["crossing_edges"] == 2 and fd["no_decision_logged"] == 0


def test_transformer_block_cpu_every_crossing_edge_accounted_for():
    fd = _decisions("transformer_block")
    assert fd["crossing_edges"] == fd["explained_edges"] + fd["no_decision_logged"]
    assert fd["crossing_edges"] > 0
    # line 587: not fusing operand %rsqrt.1 (jit(model)/ln2/rsqrt) because Fusion is not profitable.
    rs = [r for r in fd["records"] if r["producer"] == "rsqrt.1" and r["reason"] == "Fusion is not profitable."]
    assert rs and all(r["producer_pre"] and r["matched"] for r in rs)
    assert gloss(rs[0]["reason"]) == GLOSSES["Fusion is not profitable."]
    # unmatched records are counted, not guessed
    assert fd["unmatched"] == sum(1 for r in fd["records"] if not r["matched"])


def test_h200_log_and_dump_gemm_prologue_refusal():
    fd = _decisions("transformer_block", "h200", "gpu", dump=True)
    assert fd["source"] == "log+dump"
    # log line 501: Not fusing %div.17 (the softmax's divide) ... due to the decision: Not obviously
    # profitable to fuse as input. -- the Triton GEMM prologue refused
    r = next(r for r in fd["records"] if r["producer"] == "div.17" and r["pass_name"] == "triton-gemm-rewriter")
    assert r["reason"] == "Not obviously profitable to fuse as input." and r["decision"] == NOT_FUSED
    assert "div.17" in r["producer_pre"]
    assert fd["crossing_edges"] == fd["explained_edges"] + fd["no_decision_logged"]
    # the dump's ineligible producers come with their users in the module priority fusion saw
    dumped = [r for r in fd["records"] if r["source"] == "dump"]
    assert any(r["producer"] == "split.3.0" and "bitcast.16.0" in r["consumer"] for r in dumped)


def test_records_matched_as_the_log_is_read_give_the_decisions_made_after_it():
    # a compile matches the records to the module before optimization while XLA still
    # optimizes (RecordMatcher fed a growing list, the last record held back): the decisions
    # must be those made from the whole log at once
    from analysis.fusion.decisions import RecordMatcher
    from analysis.fusion.log import LOG_PREFIX, LogParser

    b = _bundle("transformer_block", "cpu", "cpu")
    pre, post = b.module("hlo_before"), b.module("hlo_after")
    whole = from_texts(pre, post, b.provenance, "cpu", _read("transformer_block.cpu.log"), [], {"jax": "0.10.2"})
    parser, matcher = LogParser(), RecordMatcher(pre)
    fed_midway = 0
    for n, line in enumerate(_read("transformer_block.cpu.log").splitlines(), 1):
        m = LOG_PREFIX.match(line)
        if m:
            parser.feed_message(m.group("file"), line[m.end():], n)
        records = parser.records_of(pre.name)
        if records is not None and n % 7 == 0:
            matcher.feed(records, complete=False)
            fed_midway = max(fed_midway, matcher.done)
    assert 0 < fed_midway < len(parser.records_of(pre.name))  # it was fed midway, not only at the end
    incremental = from_texts(pre, post, b.provenance, "cpu", None, [], {"jax": "0.10.2"}, parser, matcher)
    assert incremental == whole
    assert [list(r) for r in incremental["records"]] == [list(r) for r in whole["records"]]  # keys in one order


def test_every_reason_in_the_fixtures_has_a_gloss():
    for model, tag, plat, dump in (("mlp", "cpu", "cpu", False), ("layernorm", "cpu", "cpu", False),
                                   ("transformer_block", "cpu", "cpu", False),
                                   ("transformer_block", "h200", "gpu", True)):
        fd = _decisions(model, tag, plat, dump)
        missing = [r for r in fd["reasons"] if not gloss(r)]
        assert not missing, (model, tag, missing)


def test_op_lines_say_fused_with_and_not_fused_with():
    fd = _decisions("mlp")
    lines = op_lines(fd, "add.11")
    assert any(ln.startswith("not fused with ") and "operand can not be duplicated" in ln for ln in lines)
    assert any(ln.startswith("fused with ") for ln in lines)


# --- shown -----------------------------------------------------------------------------------

def test_pre_graph_marks_refused_edges_with_the_reason_in_the_tooltip():
    from analysis.render.module_graphs import pre_graph

    b = _bundle("mlp", "cpu", "cpu")
    b.fusion_decisions = _decisions("mlp")
    g = pre_graph(b.module("hlo_before"), edge_notes=edge_notes(b.fusion_decisions))
    noted = [e for e in g.edges if e.note]
    assert noted and all("operand can not be duplicated" in e.note for e in noted)
    dot = g.to_dot()
    assert 'tooltip="fusion: not fused' in dot and 'headlabel="✕"' in dot


def test_report_section_escapes_and_cli_why(tmp_path, capsys):
    from analysis import cli
    from analysis.render.decisions import html_section

    b = _bundle("mlp", "cpu", "cpu")
    fd = _decisions("mlp")
    next(r for r in fd["records"] if r["decision"] == NOT_FUSED)["reason"] = "<script>x</script>"
    b.fusion_decisions = fd
    html = html_section(fd)
    assert "<script>x" not in html and "&lt;script&gt;" in html
    path = tmp_path / "mlp.json"
    b.fusion_decisions = _decisions("mlp")
    b.save(str(path))
    assert Bundle.load(str(path)).fusion_decisions == json.loads(json.dumps(b.fusion_decisions))
    assert cli.main(["why", str(path), "--op", "add.11"]) == 0
    out = capsys.readouterr().out
    assert "dot_general.2 -> add.11" in out and "operand can not be duplicated" in out


def test_table_rows_filter_count_and_build_only_the_first_limit():
    from analysis.render.decisions import rows

    recs = [{"pass_name": "fusion", "decision": NOT_FUSED if i % 2 else FUSED, "producer": f"p{i}",
             "consumer": f"c{i}", "reason": "r" if i % 3 == 0 else "s", "producer_pre": [f"a{i}"],
             "consumer_pre": [f"b{i}"], "producer_kernels": ["k2", "k1"], "consumer_kernels": ["k1"],
             "matched": True, "how": {"producer": "name", "consumer": "name"}} for i in range(7)]
    fd = {"records": recs}
    # refused: records 1, 3, 5; of those reason "r": record 3 only (i % 3 == 0)
    shown, n = rows(fd, NOT_FUSED)
    assert n == 3 and [r["#"] for r in shown] == [1, 3, 5]
    shown, n = rows(fd, NOT_FUSED, "r")
    assert n == 1 and [r["#"] for r in shown] == [3]
    shown, n = rows(fd, limit=2)
    assert n == 7 and [r["#"] for r in shown] == [0, 1]
    assert shown[1]["pre-optimization ops"] == "a1, ->, b1" and shown[1]["kernels"] == "k1, k2"
    assert shown[1]["how"] == "name / name" and shown[1]["matched"] == "yes"
    assert rows(None) == ([], 0)


# --- captured from a real compile, in this process -------------------------------------------

def test_in_process_compile_captures_the_fusion_log():
    pytest.importorskip("jax")
    from analysis.compile.stages import analyze_model

    b = analyze_model("mlp").bundle
    fd = b.fusion_decisions
    assert fd and fd["platform"] == "cpu" and fd["log_lines"] > 0
    assert fd["records"] and fd["crossing_edges"] == fd["explained_edges"] + fd["no_decision_logged"]
    # after the compile the verbose levels are back: a second compile logs nothing to stderr


# --- in a real browser -----------------------------------------------------------------------

@pytest.mark.browser
def test_browser_hover_a_refused_edge_reads_xlas_reason(server, browser, gallery_bundle):
    from tests.polling import in_page
    from tests.scenarios.test_browser import _graph_frames

    # what this XLA printed when it kept the first dot (a YNNPACK fusion) out of the bias add's
    # fusion: jax 0.12.0 "operand can not be duplicated", 0.12.1 "Producer is not loop-fusible."
    refused = {r["reason"] for r in gallery_bundle("mlp").fusion_decisions["records"]
               if r["decision"] == "not fused" and r["how"]["producer"] == "library"}
    assert refused

    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(server + "/?model=mlp")
    _graph_frames(page)

    def frame():
        return next(f for f in page.frames if "xla_graph" in (f.url or "") and not f.is_detached())

    # mlp on the CPU: the log says the dot (a YNNPACK fusion) was not fused into the bias add;
    # that edge is drawn red with XLA's reason as its tooltip
    def hover_and_read():
        edge = frame().locator("#view-pre g.edge", has=frame().locator("a[*|title*='not fused']")).first
        marker = edge.locator("text", has_text="✕").first  # the marker at the edge's head
        marker.hover(timeout=10_000)
        # the pointer is on it, so its tooltip shows; a rerun that swapped the frame (or a redraw
        # that moved the marker) between the hover and this read counts as not yet: hover again
        if not marker.evaluate("e => e.matches(':hover')"):
            return None
        return marker.evaluate("e => e.closest('g.edge').querySelector('a').getAttribute('xlink:title')")

    from playwright.sync_api import Error
    title = in_page(page, hover_and_read, 120, "the pointer resting on a refused edge's marker",
                    interval_s=0.5, ignoring=(Error,))
    assert title.startswith("fusion: not fused — ") and title.removeprefix("fusion: not fused — ") in refused


from tests.scenarios.test_browser import browser, server  # noqa: E402,F401 - the browser tests' fixtures


def test_a_zipped_dump_with_a_fusion_process_dump_carries_its_decisions():
    """An XLA dump folder (zipped) from a GPU machine, as XLA names its files: the priority fusion
    pass's process dump beside the module becomes the bundle's fusion decisions."""
    import io
    import zipfile

    from analysis.inputs.dump import bundles_from_dump_zip

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("dump/module_0007.jit_model.before_optimizations.txt", _read("transformer_block.h200.before.hlo"))
        z.writestr("dump/module_0007.jit_model.sm_9.0_gpu_after_optimizations.txt",
                   _read("transformer_block.h200.after.hlo"))
        z.writestr("dump/module_0007.jit_model.priority_fusion_dump.txt",
                   _read("transformer_block.h200.priority_fusion_dump.txt"))
    (b,) = bundles_from_dump_zip(buf.getvalue(), "h200-dump.zip")
    fd = b.fusion_decisions
    assert b.platform == "gpu" and fd is not None and fd["source"] == "dump"
    assert fd["records"] and all(r["pass_name"] == "priority-fusion" for r in fd["records"])
    assert {r["decision"] for r in fd["records"]} and fd["crossing_edges"] > 0
    # without the process dump the same zip has none
    buf2 = io.BytesIO()
    with zipfile.ZipFile(buf2, "w") as z:
        z.writestr("dump/module_0007.jit_model.sm_9.0_gpu_after_optimizations.txt",
                   _read("transformer_block.h200.after.hlo"))
    assert bundles_from_dump_zip(buf2.getvalue(), "plain.zip")[0].fusion_decisions is None


# --- inside a loop: XLA names the ops of a body it cloned afresh ------------------------------

# The program: a while loop whose body adds c to x five times on one line of a Python loop (five
# ops alike: opcode add, op_name jit(f)/while/body/add, f32[8]), then takes exp; the entry has an
# add of its own named add.2.
LOOP_PRE = """\
HloModule jit_f

body.1 {
  p.1 = (f32[8], f32[8]) parameter(0)
  x.2 = f32[8] get-tuple-element(p.1), index=0
  c.3 = f32[8] get-tuple-element(p.1), index=1
  add.10 = f32[8] add(x.2, c.3), metadata={op_name="jit(f)/while/body/add"}
  add.11 = f32[8] add(add.10, c.3), metadata={op_name="jit(f)/while/body/add"}
  add.12 = f32[8] add(add.11, c.3), metadata={op_name="jit(f)/while/body/add"}
  add.13 = f32[8] add(add.12, c.3), metadata={op_name="jit(f)/while/body/add"}
  add.14 = f32[8] add(add.13, c.3), metadata={op_name="jit(f)/while/body/add"}
  exp.15 = f32[8] exponential(add.14), metadata={op_name="jit(f)/while/body/exp"}
  ROOT t.16 = (f32[8], f32[8]) tuple(exp.15, c.3)
}

cond.2 {
  p.4 = (f32[8], f32[8]) parameter(0)
  ROOT k.5 = pred[] constant(false)
}

ENTRY main.3 {
  a.1 = f32[8] parameter(0)
  add.2 = f32[8] add(a.1, a.1), metadata={op_name="jit(f)/add"}
  t.3 = (f32[8], f32[8]) tuple(add.2, a.1)
  w.4 = (f32[8], f32[8]) while(t.3), condition=cond.2, body=body.1
  ROOT g.5 = f32[8] get-tuple-element(w.4), index=0
}
"""

_P = "I1201 09:14:35.755961   20414 "


def _body(name: str, operand: str) -> str:
    return f'%{name} = f32[8]{{0}} add(%{operand}, %get-tuple-element.7), metadata={{op_name="jit(f)/while/body/add"}}'


_EXP = '%exponential.6 = f32[8]{0} exponential(%add.5), metadata={op_name="jit(f)/while/body/exp"}'
_FUSION = ('%add_exp_fusion = f32[8]{0} fusion(%add.3, %get-tuple-element.7), kind=kLoop, calls=%fused_computation, '
           'metadata={op_name="jit(f)/while/body/exp"}')
# XLA's lines about the cloned body: its adds named add.1 ... add.5 in the body's order (add.2
# is the second add of the body, not the entry's add.2), the consumers visited last op first,
# and one refusal logged twice as XLA comes back to the fusion
LOOP_LOG = "\n".join(_P + line for line in [
    "hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module jit_f: fusion",
    "hlo_pass_pipeline.cc:181]   HLO pass fusion",
    f"instruction_fusion.cc:649] Considering fusion of: {_EXP} with operand add.5",
    "cpu_instruction_fusion.cc:483] Fusing: consumer is elementwise or fusible.",
    f"instruction_fusion.cc:848] Fusing {_body('add.5', 'add.4')} into {_EXP}",
    "instruction_fusion.cc:855]        created new fusion: " + _FUSION.replace("add.3", "add.4"),
    f"instruction_fusion.cc:649] Considering fusion of: {_FUSION.replace('add.3', 'add.4')} with operand add.4",
    "cpu_instruction_fusion.cc:483] Fusing: consumer is a fusion node.",
    f"instruction_fusion.cc:848] Fusing {_body('add.4', 'add.3')} into {_FUSION.replace('add.3', 'add.4')}",
    f"instruction_fusion.cc:649] Considering fusion of: {_FUSION} with operand add.3",
    f"instruction_fusion.cc:687] not fusing operand {_body('add.3', 'add.2')} because Fusion is not profitable.",
    f"instruction_fusion.cc:649] Considering fusion of: {_body('add.3', 'add.2')} with operand add.2",
    f"instruction_fusion.cc:687] not fusing operand {_body('add.2', 'add.1')} because Fusion is not profitable.",
    f"instruction_fusion.cc:649] Considering fusion of: {_FUSION} with operand add.3",
    f"instruction_fusion.cc:687] not fusing operand {_body('add.3', 'add.2')} because Fusion is not profitable.",
]) + "\n"


def _loop_decisions(log: str = LOOP_LOG) -> dict:
    from analysis.hlo import parse_module

    return from_texts(parse_module(LOOP_PRE), None, None, "cpu", log, [])


def test_decisions_in_a_loop_body_are_matched_to_the_bodys_ops_though_xla_renamed_them():
    fd = _loop_decisions()
    got = [(r["decision"], r["producer"], r["consumer"], r["producer_pre"], r["consumer_pre"])
           for r in fd["records"]]
    assert got == [
        (FUSED, "add.5", "exponential.6", ["add.14"], ["exp.15"]),  # the fifth add, into exp
        (FUSED, "add.4", "add_exp_fusion", ["add.13"], ["add.14", "exp.15"]),
        (NOT_FUSED, "add.3", "add_exp_fusion", ["add.12"], ["add.13", "add.14", "exp.15"]),
        # the body's second add: not the entry's add.2, which has the same name
        (NOT_FUSED, "add.2", "add.3", ["add.11"], ["add.12"]),
    ]  # the refusal of add.3 logged twice is one line
    assert fd["unmatched"] == 0
    assert all(r["matched"] for r in fd["records"])


def test_ops_alike_with_nothing_around_them_matched_go_by_the_order_xla_named_them():
    # only refusals of consumers outside the log's view: no neighbour says which add each is,
    # their names' order does (add.1 ... add.5 -> the body's adds in program order)
    lines = [_P + "hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module jit_f: fusion"]
    for k in (4, 2):
        lines.append(_P + f"instruction_fusion.cc:649] Considering fusion of: {_body(f'add.{k + 1}', f'add.{k}')}"
                          f" with operand add.{k}")
    for k in (1, 3, 5):
        lines.append(_P + f"instruction_fusion.cc:649] Considering fusion of: {_body(f'add.{k}', 'x')} with operand x")
    for k in (4, 2):
        lines.append(_P + f"instruction_fusion.cc:649] Considering fusion of: {_body(f'add.{k + 1}', f'add.{k}')}"
                          f" with operand add.{k}")
        lines.append(_P + f"instruction_fusion.cc:687] not fusing operand {_body(f'add.{k}', f'add.{k - 1}')}"
                          " because Fusion is not profitable.")
    fd = _loop_decisions("\n".join(lines) + "\n")
    assert [(r["producer"], r["producer_pre"], r["consumer"], r["consumer_pre"]) for r in fd["records"]] == [
        ("add.4", ["add.13"], "add.5", ["add.14"]), ("add.2", ["add.11"], "add.3", ["add.12"])]


def test_loop_decisions_matched_as_the_log_is_read_are_those_of_the_whole_log():
    from analysis.fusion.decisions import RecordMatcher
    from analysis.fusion.log import LogParser
    from analysis.hlo import parse_module

    pre = parse_module(LOOP_PRE)
    parser = LogParser()
    matcher = RecordMatcher(pre, known=parser.instructions(pre.name))
    for n, line in enumerate(LOOP_LOG.splitlines(), 1):
        parser.feed(line, n)
        records = parser.records_of(pre.name)
        if records is not None:
            matcher.feed(records, complete=False)  # told apart with part of the log: matched again
    assert matcher.provisional
    incremental = from_texts(pre, None, None, "cpu", None, [], None, parser, matcher)
    assert incremental == _loop_decisions()


def test_parse_instr_reads_the_shape_and_operand_names():
    i = parse_instr('%r.1 = f32[4]{0} reduce(f32[4,8]{1,0} %p.0, f32[] %c.0), dimensions={1}, to_apply=%add')
    assert (i.shape, i.operands) == ("f32[4]{0}", ("p.0", "c.0"))
    t = parse_instr('%t = (f32[2]{0}, s32[]) tuple(%a, %b.7), metadata={op_name="x"}')
    assert (t.shape, t.operands, t.op_name) == ("(f32[2]{0}, s32[])", ("a", "b.7"), "x")
    assert parse_instr("%k = f32[] constant(0.25)").operands == ()  # a literal, not an operand
    assert parse_instr("%o = f32[] add(%a, %b").operands == ()  # a list never closed: none read
