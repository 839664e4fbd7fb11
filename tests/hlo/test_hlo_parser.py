"""analysis.hlo.parser on small HLO snippets written here, one per feature of the text format.

Every well-formed snippet is also handed to XLA's own parser (``jaxlib._hlo.hlo_module_from_text``)
when jaxlib is installed, so the snippets are known to be real HLO, and the instruction names,
opcodes and operands must agree with it. Malformed inputs must raise HloParseError with the right
line, quickly (pathological inputs included).
"""

from __future__ import annotations

import re

import pytest

from analysis.hlo import parser as hlo_mod
from analysis.hlo import HloParseError, parse_module

try:  # the oracle is optional: the parser itself never needs jax
    from jaxlib import _hlo
except ImportError:  # pragma: no cover
    _hlo = None


# HloOpcode enum names whose text spelling is not plain camelCase -> kebab-case
# (the same table as in test_hlo_oracle.py, where it is checked against XLA's print).
_OPCODE_EXCEPTIONS = {
    "kClz": "count-leading-zeros", "kCos": "cosine", "kSin": "sine", "kExp": "exponential",
    "kExpm1": "exponential-minus-one", "kLog1p": "log-plus-one", "kPopulationCount": "popcnt",
    "kOptimizationBarrier": "opt-barrier", "kTopK": "topk",
}


def _opcode_text(op) -> str:
    name = op.name
    return _OPCODE_EXCEPTIONS.get(name) or re.sub(r"(?<!^)(?=[A-Z])", "-", name[1:]).lower()


def _oracle(text: str) -> None:
    """Check ``text`` is valid HLO for XLA, and that our parse agrees with XLA's."""
    if _hlo is None:
        return
    ours = parse_module(text)
    theirs = _hlo.hlo_module_from_text(text)
    tc = {c.name: c for c in theirs.computations()}
    assert {c.name for c in ours.computations} == set(tc)
    for comp in ours.computations:
        their = {i.name: i for i in tc[comp.name].instructions()}
        assert set(comp.by_name) == set(their)
        for inst in comp.instructions:
            ti = their[inst.name]
            # (compare enums: XLA re-prints async-start wrapping an add as "add-start")
            assert inst.opcode == _opcode_text(ti.opcode), inst.name
            assert inst.operands == [o.name for o in ti.operands()]


def parse(text: str, oracle: bool = True):
    mod = parse_module(text)
    if oracle:
        _oracle(text)
    return mod


# ----------------------------------------------------------------------------- syntax


BASIC = """\
HloModule basic, entry_computation_layout={(f32[8,128]{1,0}, s32[])->(f32[8,128]{1,0}, (s32[], u8[0]{0}))}

ENTRY main {
  p0 = f32[8,128]{1,0} parameter(0)
  %p1 = s32[] parameter(1)
  neg = f32[8,128]{1,0} negate(f32[8,128]{1,0} p0)
  e = u8[0]{0} constant({})
  inner = (s32[], u8[0]{0}) tuple(s32[] %p1, u8[0]{0} e)
  ROOT t = (f32[8,128]{1,0}, (s32[], u8[0]{0})) tuple(neg, inner)
}
"""


def test_optional_sigil_and_operands_with_shapes():
    m = parse(BASIC)
    assert m.name == "basic"
    e = m.entry
    assert e.is_entry and e.name == "main"
    assert [i.name for i in e.instructions] == ["p0", "p1", "neg", "e", "inner", "t"]
    assert e.by_name["neg"].operands == ["p0"]
    assert e.by_name["inner"].operands == ["p1", "e"]
    assert e.root.name == "t" and e.root.is_root
    t = e.root.shape
    assert t.is_tuple and len(t.tuple_shapes) == 2 and t.tuple_shapes[1].is_tuple
    assert [str(s) for s in t.leaves()] == ["f32[8,128]{1,0}", "s32[]", "u8[0]{0}"]
    assert m.attributes["entry_computation_layout"].startswith("{(f32[8,128]{1,0}")
    assert e.by_name["e"].operands == []


def test_index_comments_in_operands_and_shapes():
    text = """\
HloModule idx

ENTRY main {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT t = (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[], f32[]) tuple(a, b, a, b, a, /*index=5*/b, a)
}
"""
    m = parse(text)
    root = m.entry.root
    assert root.operands == ["a", "b", "a", "b", "a", "b", "a"]
    assert len(root.shape.tuple_shapes) == 7


def test_tiled_and_memory_space_layouts():
    text = """\
HloModule tiled

ENTRY main {
  p = f32[8,256]{1,0:T(8,128)} parameter(0)
  ROOT c = f32[8,256]{1,0:T(8,128)(2,1)S(1)} copy(p)
}
"""
    m = parse(text)
    lay = m.entry.root.shape.layout
    assert lay.minor_to_major == (1, 0)
    assert lay.tiles == ((8, 128), (2, 1))
    assert lay.memory_space == 1
    assert str(m.entry.root.shape) == "f32[8,256]{1,0:T(8,128)(2,1)S(1)}"


def test_dynamic_dims_token_and_control_predecessors():
    text = """\
HloModule dyn

ENTRY main {
  p = f32[<=8,4]{1,0} parameter(0)
  tok = token[] after-all()
  n = f32[<=8,4]{1,0} negate(p)
  ROOT a = f32[<=8,4]{1,0} abs(p), control-predecessors={n, tok}
}
"""
    m = parse(text)
    p = m.entry.by_name["p"].shape
    assert p.dimensions == (8, 4) and p.dynamic == (True, False)
    assert m.entry.by_name["tok"].shape.element_type == "token"
    assert m.entry.by_name["tok"].operands == []
    assert m.entry.root.control_predecessors == ["n", "tok"]
    assert m.entry.root.operands == ["p"]


def test_constants_are_not_operands():
    text = """\
HloModule consts

ENTRY main {
  c1 = f32[2,3]{1,0} constant({ { 1, 2, 3 }, { 4, -inf, nan } })
  c2 = s32[4]{0} constant({1, 2, 3, 4})
  c3 = pred[] constant(true)
  c4 = (s32[], f32[]) constant((1, 2.5))
  c5 = f32[] constant(-0.5)
  i = s32[4]{0} iota(), iota_dimension=0
  ROOT a = s32[4]{0} add(c2, i)
}
"""
    m = parse(text)
    for name in ("c1", "c2", "c3", "c4", "c5", "i"):
        assert m.entry.by_name[name].operands == []
    assert m.entry.by_name["c1"].operand_text.startswith("{ { 1, 2, 3 }")
    assert m.entry.root.operands == ["c2", "i"]


def test_multiline_constant_literal():
    rows = ",\n".join("    { " + ", ".join(str(r * 8 + c) for c in range(8)) + " }" for r in range(8))
    text = f"""\
HloModule bigconst

ENTRY main {{
  p = f32[8,8]{{1,0}} parameter(0)
  c = f32[8,8]{{1,0}} constant({{
{rows}
  }})
  ROOT a = f32[8,8]{{1,0}} add(p, c)
}}
"""
    m = parse(text)
    assert m.entry.by_name["c"].operands == []
    assert m.entry.root.operands == ["p", "c"]
    assert m.entry.root.line == 3 + 3 + 8 + 1  # line numbers survive the multi-line literal


def test_sharding_and_frontend_attributes():
    text = """\
HloModule shard

ENTRY main {
  p = f32[8,4]{1,0} parameter(0), sharding={devices=[2,1]<=[2]}
  q = f32[8,4]{1,0} parameter(1), sharding={replicated}
  t = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(p, q), sharding={{devices=[2,1]<=[2]}, {maximal device=0}}
  ROOT a = f32[8,4]{1,0} add(p, q), frontend_attributes={_xla_compute_type="host", note="a,b=c {x}"}
}
"""
    m = parse(text)
    assert m.entry.by_name["p"].attributes["sharding"] == "{devices=[2,1]<=[2]}"
    assert m.entry.by_name["t"].attributes["sharding"].startswith("{{devices")
    assert m.entry.root.attributes["frontend_attributes"] == '{_xla_compute_type="host", note="a,b=c {x}"}'
    assert m.entry.root.operands == ["p", "q"]


def test_backend_config_multiline_json_and_int64_as_string():
    text = """\
HloModule bc

ENTRY main {
  p = f32[4]{0} parameter(0)
  ROOT c = f32[4]{0} custom-call(p), custom_call_target="my_target", backend_config={
    "cfg": {"block_m": "64", "list": [1, 2, {"deep": "}"}]},
    "flag": true
  }
}
"""
    m = parse(text)
    bc = m.entry.root.backend_config
    assert bc == {"cfg": {"block_m": "64", "list": [1, 2, {"deep": "}"}]}, "flag": True}
    assert isinstance(bc["cfg"]["block_m"], str)  # int64 fields print as strings
    assert m.entry.root.custom_call_target == "my_target"
    assert m.entry.root.line == 5


def test_backend_config_old_quoted_escaped_form():
    text = r"""HloModule old

ENTRY main {
  p = f32[4]{0} parameter(0)
  ROOT c = f32[4]{0} custom-call(p), custom_call_target="t", backend_config="{\"kind\":\"__triton_gemm\",\"block_m\":\"64\",\"s\":\"a\\\"b\"}"
}
"""
    m = parse(text)
    assert m.entry.root.backend_config == {"kind": "__triton_gemm", "block_m": "64", "s": 'a"b'}


def test_backend_config_not_json_is_none():
    # XLA:CPU LAPACK calls carry MLIR-style attribute dicts, not JSON.
    text = """\
HloModule mlirbc

ENTRY main {
  p = f32[4,3]{1,0} parameter(0)
  ROOT c = f32[4,3]{1,0} custom-call(p), custom_call_target="lapack_x", backend_config={mode = 83 : ui8}
}
"""
    m = parse(text)
    assert m.entry.root.backend_config is None
    assert m.entry.root.attributes["backend_config"] == "{mode = 83 : ui8}"


def test_metadata_inline_source_form():
    text = """\
HloModule meta

ENTRY main {
  p = f32[4]{0} parameter(0), metadata={op_name="x"}
  ROOT n = f32[4]{0} negate(p), metadata={op_type="neg" op_name="jit(f)/neg \\"quoted\\"" source_file="/tmp/model.py" source_line=12 source_end_line=13 source_column=4 source_end_column=9}
}
"""
    m = parse(text)
    md = m.entry.root.metadata
    assert md.op_name == 'jit(f)/neg "quoted"' and md.op_type == "neg"
    assert (md.source.file, md.source.line, md.source.end_line) == ("/tmp/model.py", 12, 13)
    assert (md.source.column, md.source.end_column) == (4, 9)
    assert m.entry.by_name["p"].metadata.source is None
    assert m.entry.by_name["p"].metadata.op_name == "x"


STACK_FRAMES = """\
HloModule frames, entry_computation_layout={(f32[3]{0})->f32[3]{0}}

FileNames
1 "/tmp/sf.py"

FunctionNames
1 "<module>"
2 "f"
3 "g"
4 "h"

FileLocations
1 {file_name_id=1 function_name_id=1 line=11 end_line=11 column=4 end_column=33}
2 {file_name_id=1 function_name_id=2 line=8 end_line=8 column=8 end_column=12}
3 {file_name_id=1 function_name_id=3 line=4 end_line=4 column=11 end_column=21}
4 {file_name_id=1 function_name_id=2 line=9 end_line=9 column=8 end_column=12}
5 {file_name_id=1 function_name_id=4 line=6 end_line=6 column=11 end_column=21}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}
3 {file_location_id=3 parent_frame_id=3}
4 {file_location_id=4 parent_frame_id=2}
5 {file_location_id=5 parent_frame_id=5}


ENTRY main.1 {
  x.1 = f32[3]{0} parameter(0), metadata={op_name="x"}
  sin.1 = f32[3]{0} sine(x.1), metadata={op_name="jit(f)/sin" stack_frame_id=3}
  cos.1 = f32[3]{0} cosine(x.1), metadata={op_name="jit(f)/cos" stack_frame_id=5}
  ROOT mul.1 = f32[3]{0} multiply(sin.1, cos.1), metadata={op_name="jit(f)/mul" stack_frame_id=2}
}
"""


def test_metadata_stack_frame_tables_resolve_call_chain():
    # Written by jax 0.10 for: <module> (line 11) calls f; f calls g at line 8 and h at line 9.
    # XLA prints parent_frame_id as the parent's id + 1 (0 = no parent), so frame 1, the root,
    # "names itself"; frame 4 (f, line 9) has parent_frame_id=2, i.e. frame 1.
    m = parse(STACK_FRAMES)
    assert m.file_names == {1: "/tmp/sf.py"}
    assert m.function_names[4] == "h"
    assert m.file_locations[3]["line"] == 4 and m.stack_frames[4]["parent_frame_id"] == 2
    chain = lambda name: [(s.function, s.line) for s in m.entry.by_name[name].metadata.stack]  # noqa: E731
    assert chain("sin.1") == [("g", 4), ("f", 8), ("<module>", 11)]
    assert chain("cos.1") == [("h", 6), ("f", 9), ("<module>", 11)]
    assert chain("mul.1") == [("f", 8), ("<module>", 11)]
    src = m.entry.by_name["cos.1"].metadata.source
    assert (src.file, src.line, src.column, src.end_column, src.function) == ("/tmp/sf.py", 6, 11, 21, "h")
    assert chain("x.1") == []


def test_equal_metadata_is_resolved_once_per_module():
    """Two instructions with the same metadata text share one resolved Metadata (it is frozen);
    another module's equal text is resolved against its own stack frames."""
    text = STACK_FRAMES.replace('cos.1 = f32[3]{0} cosine(x.1), metadata={op_name="jit(f)/cos" stack_frame_id=5}',
                                'cos.1 = f32[3]{0} cosine(x.1), metadata={op_name="jit(f)/sin" stack_frame_id=3}')
    m = parse_module(text)
    sin, cos = m.entry.by_name["sin.1"].metadata, m.entry.by_name["cos.1"].metadata
    assert sin is cos and sin.op_name == "jit(f)/sin"
    assert [(s.function, s.line) for s in cos.stack] == [("g", 4), ("f", 8), ("<module>", 11)]
    other = parse_module(text)  # the same text again: its own module, its own frames
    assert other.entry.by_name["sin.1"].metadata is not sin and other.entry.by_name["sin.1"].metadata == sin


def test_stack_frames_as_written_when_no_frame_names_itself():
    # Tables where parent ids are plain ids (0 = none): read as written.
    text = STACK_FRAMES.replace("1 {file_location_id=1 parent_frame_id=1}", "1 {file_location_id=1 parent_frame_id=0}")
    for fid in (2, 3, 5):
        text = text.replace(f"{fid} {{file_location_id={fid} parent_frame_id={fid}}}",
                            f"{fid} {{file_location_id={fid} parent_frame_id={fid - 1}}}")
    m = parse_module(text)
    assert [s.function for s in m.entry.by_name["sin.1"].metadata.stack] == ["g", "f", "<module>"]


def test_stack_frame_cycle_terminates():
    text = STACK_FRAMES.replace("2 {file_location_id=2 parent_frame_id=2}", "2 {file_location_id=2 parent_frame_id=4}")
    m = parse_module(text)  # frame 2 -> 3 -> 2 -> ... must not loop forever
    assert len(m.entry.by_name["sin.1"].metadata.stack) <= len(m.stack_frames)


ASYNC = """\
HloModule async, is_scheduled=true

%wrapped_add (a: f32[4], b: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  ROOT %add = f32[4]{0} add(%a, %b)
}, execution_thread="parallel"

%sum (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %start = ((f32[4]{0}, f32[4]{0}), f32[4]{0}, s32[]) async-start(%p, %p), async_execution_thread="parallel", calls=%wrapped_add
  %done = f32[4]{0} async-done(%start), async_execution_thread="parallel", calls=%wrapped_add
  %ars = f32[4]{0} all-reduce-start(%done), replica_groups={}, to_apply=%sum
  %ard = f32[4]{0} all-reduce-done(%ars)
  %cs = (f32[4]{0}, f32[4]{0}, u32[]) copy-start(%ard)
  ROOT %cd = f32[4]{0} copy-done(%cs), control-predecessors={%done}
}
"""


def test_async_ops_and_execution_thread():
    m = parse(ASYNC)
    assert m.is_scheduled
    w = m.by_name["wrapped_add"]
    assert w.execution_thread == "parallel" and m.by_name["sum"].execution_thread is None
    e = m.entry
    assert [i.opcode for i in e.instructions] == [
        "parameter", "async-start", "async-done", "all-reduce-start", "all-reduce-done", "copy-start", "copy-done"]
    assert e.by_name["start"].called_computations == ["wrapped_add"]
    assert e.by_name["done"].called_computations == ["wrapped_add"]
    assert e.by_name["ars"].called_computations == ["sum"]
    assert e.by_name["cd"].control_predecessors == ["done"]
    assert [i.name for i in m.called_by()["wrapped_add"]] == ["start", "done"]
    assert e.by_name["start"].shape.tuple_shapes[0].is_tuple


CONTROL_FLOW = """\
HloModule control

%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %ten = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %ten), direction=LT
}

%body (s.1: (s32[], f32[4])) -> (s32[], f32[4]) {
  %s.1 = (s32[], f32[4]{0}) parameter(0)
  %i.1 = s32[] get-tuple-element(%s.1), index=0
  %v = f32[4]{0} get-tuple-element(%s.1), index=1
  %one = s32[] constant(1)
  %i.2 = s32[] add(%i.1, %one)
  %v.2 = f32[4]{0} sine(%v)
  ROOT %t = (s32[], f32[4]{0}) tuple(%i.2, %v.2)
}

%b0 (x0: f32[4]) -> f32[4] {
  %x0 = f32[4]{0} parameter(0)
  ROOT %r0 = f32[4]{0} negate(%x0)
}

%b1 (x1: f32[4]) -> f32[4] {
  %x1 = f32[4]{0} parameter(0)
  ROOT %r1 = f32[4]{0} abs(%x1)
}

ENTRY %main (p: f32[4], k: s32[], q: pred[]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %k = s32[] parameter(1)
  %q = pred[] parameter(2)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]{0}) tuple(%zero, %p)
  %w = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body
  %wv = f32[4]{0} get-tuple-element(%w), index=1
  %c = f32[4]{0} conditional(%k, %wv, %wv), branch_computations={%b0, %b1}
  ROOT %c2 = f32[4]{0} conditional(%q, %c, %c), true_computation=%b0, false_computation=%b1
}
"""


def test_while_and_conditional():
    m = parse(CONTROL_FLOW)
    e = m.entry
    assert e.by_name["w"].called_computations == ["cond", "body"]  # text order
    assert e.by_name["c"].called_computations == ["b0", "b1"]
    assert e.by_name["c"].operands == ["k", "wv", "wv"]
    assert e.by_name["c2"].called_computations == ["b0", "b1"]
    assert m.by_name["body"].root.name == "t"
    assert e.users()["wv"] == [e.by_name["c"]]


# ----------------------------------------------------------------------------- GPU-style HLO

GPU = """\
HloModule gpu_style, is_scheduled=true

%gemm_fusion_dot_computation (parameter_0: f32[64,32], parameter_1: f32[32,16]) -> f32[64,16] {
  %parameter_0 = f32[64,32]{1,0} parameter(0)
  %parameter_1 = f32[32,16]{1,0} parameter(1)
  ROOT %dot.1 = f32[64,16]{1,0} dot(%parameter_0, %parameter_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fusion_lhs (p.0: f32[64,32]) -> f32[64,32] {
  ROOT %p.0 = f32[64,32]{1,0} parameter(0)
}

%fusion_rhs (p.1: f32[32,16]) -> f32[32,16] {
  ROOT %p.1 = f32[32,16]{1,0} parameter(0)
}

%nested_gemm_computation (n0: f32[64,32], n1: f32[32,16]) -> f32[64,16] {
  %n0 = f32[64,32]{1,0} parameter(0)
  %lhs = f32[64,32]{1,0} fusion(%n0), kind=kCustom, calls=%fusion_lhs, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["32","32"]}]}}}
  %n1 = f32[32,16]{1,0} parameter(1)
  %rhs = f32[32,16]{1,0} fusion(%n1), kind=kCustom, calls=%fusion_rhs, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["32","16"]}]}}}
  ROOT %dot.2 = f32[64,16]{1,0} dot(%lhs, %rhs), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_exp (e0: f32[64,16]) -> f32[64,16] {
  %e0 = f32[64,16]{1,0} parameter(0)
  ROOT %exp.0 = f32[64,16]{1,0} exponential(%e0)
}

%add_f32 (l: f32[], r: f32[]) -> f32[] {
  %l = f32[] parameter(0)
  %r = f32[] parameter(1)
  ROOT %sum = f32[] add(%l, %r)
}

%fused_reduce (r0: f32[64,16]) -> f32[64] {
  %r0 = f32[64,16]{1,0} parameter(0)
  %zero = f32[] constant(0)
  ROOT %red = f32[64]{0} reduce(%r0, %zero), dimensions={1}, to_apply=%add_f32
}

ENTRY %main (a: f32[64,32], b: f32[32,16], q: bf16[2,4,16,8], k: bf16[2,4,16,8], v: bf16[2,4,16,8]) -> (f32[64,16], f32[64], f32[64,16], bf16[2,4,16,8]) {
  %a = f32[64,32]{1,0} parameter(0)
  %b = f32[32,16]{1,0} parameter(1)
  %q = bf16[2,4,16,8]{3,2,1,0} parameter(2)
  %k = bf16[2,4,16,8]{3,2,1,0} parameter(3)
  %v = bf16[2,4,16,8]{3,2,1,0} parameter(4)
  %gemm_fusion_dot = f32[64,16]{1,0} fusion(%a, %b), kind=kCustom, calls=%gemm_fusion_dot_computation, backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"fusion_backend_config":{"kind":"__triton_gemm","triton_gemm_config":{"block_m":"64","block_n":"64","block_k":"32","split_k":"1","num_stages":"4","num_warps":"4","num_ctas":"1"}},"force_earliest_schedule":false}
  %cublas = (f32[64,16]{1,0}, s8[4194304]{0}) custom-call(%a, %b), custom_call_target="__cublas$gemm", backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"alpha_imag":0,"precision_config":{"operand_precision":["DEFAULT","DEFAULT"],"algorithm":"ALG_UNSET"},"epilogue":"DEFAULT","lhs_stride":"2048","rhs_stride":"512","grad_x":false,"grad_y":false,"damax_output":false},"force_earliest_schedule":false}
  %gemm = f32[64,16]{1,0} get-tuple-element(%cublas), index=0
  %nested = f32[64,16]{1,0} fusion(%a, %b), kind=kCustom, calls=%nested_gemm_computation, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["64","16"]}],"num_warps":"4","num_ctas":1,"num_stages":1}}}
  %loop_exp = f32[64,16]{1,0} fusion(%gemm), kind=kLoop, calls=%fused_exp
  %input_reduce = f32[64]{0} fusion(%loop_exp), kind=kInput, calls=%fused_reduce
  %fmha = (bf16[2,4,16,8]{3,2,1,0}, u8[0]{0}) custom-call(%q, %k, %v), custom_call_target="__cudnn$fmhaSoftmax", backend_config={"operation_queue_id":"0","cudnn_fmha_backend_config":{"algorithm":{"algo_id":"0","math_type":"TENSOR_OP_MATH","tuning_knobs":{"17":"1","24":"0"},"is_cudnn_frontend":true,"workspace_size":"0"},"fmha_scale":0.35355339,"intermediate_tensor_shape":{"element_type":"BF16","dimensions":["2","4","16","16"],"tuple_shapes":[],"layout":{"dim_level_types":[],"dim_unique":[],"dim_ordered":[],"minor_to_major":["3","2","1","0"],"tiles":[],"element_size_in_bits":"0","memory_space":"0","index_primitive_type":"PRIMITIVE_TYPE_INVALID","pointer_primitive_type":"PRIMITIVE_TYPE_INVALID","dynamic_shape_metadata_prefix_bytes":"0"},"is_dynamic_dimension":[false,false,false,false]},"is_flash_attention":true,"mask_type":"CAUSAL"}}
  %attn = bf16[2,4,16,8]{3,2,1,0} get-tuple-element(%fmha), index=0
  ROOT %out = (f32[64,16]{1,0}, f32[64]{0}, f32[64,16]{1,0}, bf16[2,4,16,8]{3,2,1,0}) tuple(%gemm_fusion_dot, %input_reduce, %nested, %attn)
}
"""


def test_gpu_cublas_gemm_custom_call():
    m = parse(GPU)
    c = m.entry.by_name["cublas"]
    assert c.custom_call_target == "__cublas$gemm"
    assert [str(s) for s in c.shape.tuple_shapes] == ["f32[64,16]{1,0}", "s8[4194304]{0}"]
    assert c.shape.tuple_shapes[1].byte_size == 4194304
    gbc = c.backend_config["gemm_backend_config"]
    assert gbc["dot_dimension_numbers"]["lhs_contracting_dimensions"] == ["1"]
    assert gbc["lhs_stride"] == "2048"


def test_gpu_triton_gemm_fusion():
    m = parse(GPU)
    f = m.entry.by_name["gemm_fusion_dot"]
    assert f.attributes["kind"] == "kCustom" and f.fusion_kind == "__triton_gemm"
    cfg = f.backend_config["fusion_backend_config"]["triton_gemm_config"]
    assert cfg == {"block_m": "64", "block_n": "64", "block_k": "32", "split_k": "1",
                   "num_stages": "4", "num_warps": "4", "num_ctas": "1"}
    assert f.called_computations == ["gemm_fusion_dot_computation"]


def test_gpu_nested_gemm_fusion():
    m = parse(GPU)
    outer = m.entry.by_name["nested"]
    assert outer.fusion_kind == "__triton_nested_gemm_fusion"
    tiles = outer.backend_config["fusion_backend_config"]["block_level_fusion_config"]["output_tiles"]
    assert tiles == [{"sizes": ["64", "16"]}]
    inner = m.by_name["nested_gemm_computation"]
    assert [i.fusion_kind for i in inner.instructions if i.opcode == "fusion"] == [
        "__triton_nested_gemm_fusion", "__triton_nested_gemm_fusion"]
    assert inner.by_name["lhs"].called_computations == ["fusion_lhs"]


def test_gpu_loop_input_fusions_and_fmha():
    m = parse(GPU)
    e = m.entry
    assert e.by_name["loop_exp"].fusion_kind == "kLoop"
    assert e.by_name["input_reduce"].fusion_kind == "kInput"
    assert e.by_name["gemm"].fusion_kind is None
    fmha = e.by_name["fmha"]
    assert fmha.custom_call_target == "__cudnn$fmhaSoftmax"
    assert fmha.operands == ["q", "k", "v"]
    cfg = fmha.backend_config["cudnn_fmha_backend_config"]
    assert cfg["intermediate_tensor_shape"]["layout"]["minor_to_major"] == ["3", "2", "1", "0"]
    assert e.root.operands == ["gemm_fusion_dot", "input_reduce", "nested", "attn"]


# ----------------------------------------------------------------------------- robustness


def test_windows_line_endings():
    m = parse_module(CONTROL_FLOW.replace("\n", "\r\n"))
    assert m.entry.by_name["c"].called_computations == ["b0", "b1"]
    assert parse_module(BASIC.replace("\n", "\r\n")).entry.root.name == "t"


def test_result_shape_with_layout_in_signature():
    text = """\
HloModule sig

ENTRY main (p: f32[4]{0}) -> f32[4]{0} {
  p = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(p)
}
"""
    m = parse(text)
    assert m.entry.root.name == "n" and m.entry.signature.endswith("f32[4]{0}")


def test_nesting_deeper_than_regexes_unroll():
    # The fast path unrolls bracket matching to a fixed depth; deeper values take the scanner.
    deep = "{" * 40 + '"x"' + "}" * 40
    text = f"""\
HloModule deep

ENTRY main {{
  p = f32[4]{{0}} parameter(0)
  ROOT n = f32[4]{{0}} custom-call(p), custom_call_target="t", backend_config={deep}, frontend_attributes={{a="1"}}
}}
"""
    m = parse_module(text)
    assert m.entry.root.attributes["backend_config"] == deep
    assert m.entry.root.attributes["frontend_attributes"] == '{a="1"}'
    assert m.entry.root.operands == ["p"]


def test_general_parser_agrees_with_fast_path():
    """The general parser must read every instruction exactly as the one-line regexes do."""
    for text in (GPU, ASYNC, CONTROL_FLOW, STACK_FRAMES, BASIC):
        fast, slow = parse_module(text), hlo_mod.parse_text(text, fast=False)
        assert [c.name for c in fast.computations] == [c.name for c in slow.computations]
        for a, b in zip(fast.instructions(), slow.instructions()):
            assert (a.is_root, a.name, a.shape_text, a.opcode, a.operands, a.operand_text, a.attributes, a.line) == (
                b.is_root, b.name, b.shape_text, b.opcode, b.operands, b.operand_text, b.attributes, b.line)


def test_instruction_text_reparses():
    m = parse_module(GPU)
    for comp in m.computations:
        for inst in comp.instructions:
            body = "\n".join("  " + i.text for i in comp.instructions)
    # re-print the whole module from Instruction.text and parse it again
    out = ["HloModule again", ""]
    for comp in m.computations:
        out.append(("ENTRY " if comp.is_entry else "") + "%" + comp.name + " {")
        out.extend("  " + i.text for i in comp.instructions)
        out.append("}")
        out.append("")
    m2 = parse_module("\n".join(out))
    assert [(i.name, i.opcode, i.operands, i.attributes) for i in m2.instructions()] == [
        (i.name, i.opcode, i.operands, i.attributes) for i in m.instructions()]
    assert body


# ----------------------------------------------------------------------------- malformed input

H = "HloModule m\n\nENTRY main {\n  p = f32[4]{0} parameter(0)\n"

MALFORMED = {
    "empty": ("", 1, "HloModule"),
    "whitespace_only": ("\n\n   \n", 4, "HloModule"),
    "no_computations": ("HloModule m\n\n", 3, "no computations"),
    "unclosed_computation": (H + "  ROOT n = f32[4]{0} negate(p)\n", 6, "not closed"),
    "undefined_operand": (H + "  ROOT n = f32[4]{0} add(p, nothere)\n}\n", 5, "'nothere'"),
    "unknown_called_computation": (H + "  ROOT n = f32[4]{0} call(p), to_apply=%nowhere\n}\n", 5, "'nowhere'"),
    "bad_dimension": (H + "  ROOT n = f32[4,x]{1,0} negate(p)\n}\n", 5, "bad shape"),
    # The array-shape scan accepts any of [0-9,<=?] between the brackets; '=32' (a damaged '<=32')
    # must still be refused at parse time, not later when .shape is read.
    "bad_dynamic_dimension": (H + "  ROOT n = f32[4,=32]{1,0} negate(p)\n}\n", 5, "bad shape"),
    "bad_tuple_shape": (H + "  ROOT n = (f32[4]{0}, f32[4,x]) tuple(p, p)\n}\n", 5, "bad shape"),
    "garbage_line": (H + "  this is not HLO\n}\n", 5, "expected an instruction"),
    "missing_opcode": (H + "  ROOT n = f32[4]{0}\n}\n", 5, "opcode"),
    "duplicate_instruction": (H + "  p = f32[4]{0} negate(p)\n}\n", 5, "duplicate instruction name 'p'"),
    "duplicate_computation": ("HloModule m\n\nc {\n  a = f32[] parameter(0)\n}\n\nc {\n  b = f32[] parameter(0)\n}\n",
                              7, "duplicate computation"),
    "truncated_mid_instruction": (H + "  ROOT n = f32[4]{0} add(p, ", 5, "not closed"),
    "truncated_mid_attribute": (H + '  ROOT n = f32[4]{0} custom-call(p), backend_config={"a": [1, 2', 5, "not closed"),
    "unterminated_string": (H + '  ROOT n = f32[4]{0} custom-call(p), custom_call_target="abc\n}\n', 5, "string"),
    "mismatched_brackets": (H + "  ROOT n = f32[4]{0} negate(p), foo={a=(1]}\n}\n", 5, "not closed"),
    "text_after_instruction": (H + "  ROOT n = f32[4]{0} negate(p) junk\n}\n", 5, "unexpected text"),
    "text_after_close": (H + "  ROOT n = f32[4]{0} negate(p)\n} junk\n", 6, "after '}'"),
    "bad_computation_header": ("HloModule m\n\nENTRY main ( {\n}\n", 3, "computation header"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_raises_with_line(case):
    text, line, fragment = MALFORMED[case]
    with pytest.raises(HloParseError) as info:
        parse_module(text)
    err = info.value
    assert err.line == line, str(err)
    assert fragment in err.message, str(err)
    assert err.column >= 1
    assert str(err).startswith(f"line {line}, column {err.column}: ")
    if _hlo is not None and case not in ("duplicate_computation",):
        # XLA rejects these too (so we are not stricter than the compiler). Where we are stricter:
        # XLA accepts two computations with one name (it renames one); we refuse it, since names
        # identify computations.
        with pytest.raises(Exception):
            _hlo.hlo_module_from_text(text)


def test_error_column_and_snippet():
    with pytest.raises(HloParseError) as info:
        parse_module(H + "  ROOT n = f32[4,x]{1,0} negate(p)\n}\n")
    err = info.value
    assert err.snippet == "  ROOT n = f32[4,x]{1,0} negate(p)"
    assert err.column == len("  ROOT n = ") + 1


def test_error_is_typed_and_one_line():
    with pytest.raises(HloParseError) as info:
        parse_module(H + "  ROOT n = f32[4]{0} negate(p), x=" + "y" * 5000 + "(\n}\n")
    assert "\n" not in str(info.value) and len(str(info.value)) < 400
    assert isinstance(info.value, ValueError)
    with pytest.raises(TypeError):
        parse_module(b"HloModule m")


PATHOLOGICAL = {
    "10k_open_parens_operands": H + "  ROOT x = f32[4]{0} add(" + "(" * 10000 + "\n}\n",
    "10k_open_parens_attr": H + "  ROOT x = f32[4]{0} negate(p), foo=" + "(" * 10000 + "\n}\n",
    "10k_open_parens_shape": H + "  ROOT x = " + "(" * 10000 + "f32[4] negate(p)\n}\n",
    "10k_open_braces_no_close": H + "  ROOT x = f32[4]{0} negate(p), foo=" + "{" * 10000,
    "10k_nested_tuple_shape": H + "  ROOT x = " + "(" * 10000 + "f32[]" + ")" * 10000 + " tuple()\n}\n",
    "1MB_attribute_line": H + "  ROOT x = f32[4]{0} negate(p), foo=" + "a" * 1_000_000 + "(\n}\n",
    "1MB_name": H + "  " + "a" * 1_000_000 + "\n}\n",
    "1MB_name_then_eq": H + "  " + "a" * 1_000_000 + " = \n}\n",
    "1MB_open_comments": H + "  ROOT x = f32[4]{0} negate(p" + " /* x" * 200_000 + "\n}\n",
    "1MB_comment_openers_in_value": H + "  ROOT x = f32[4]{0} negate(p), foo={" + "/* " * 300_000 + "\n}\n",
    "1MB_escapes_in_string": H + '  ROOT x = f32[4]{0} negate(p), foo="' + "\\\\a" * 300_000 + "\n}\n",
    "1MB_commas_in_operands": H + "  ROOT x = f32[4]{0} add(" + "p," * 500_000 + "\n}\n",
    "100k_shapes": H + "  ROOT x = " + "f32[4]" * 100_000 + "\n}\n",
    "10k_open_parens_comp_header": "HloModule m\n\nENTRY main (" + "(" * 10000 + "\n",
    "100k_params_unclosed_header": "HloModule m\n\nENTRY main (" + "a: f32[], " * 100_000 + "\n",
    "10k_braces_header": "HloModule m, a=" + "{" * 10000 + "\n",
    "many_unclosed_lines": H + "  x = f32[4]{0} negate(p, {\n" * 20_000,
}


@pytest.mark.parametrize("case", sorted(PATHOLOGICAL))
def test_pathological_input_is_a_parse_error(case):
    text = PATHOLOGICAL[case]
    # (Linear-time regexes keep this quick; its speed is benchmarks/parse_speed.py's business.)
    with pytest.raises(HloParseError) as info:
        parse_module(text)
    assert info.value.line >= 1 and len(str(info.value)) < 400


def test_large_valid_module():
    body = "".join(f"  a{i} = f32[4]{{0}} add(a{i - 1}, a{i - 1}), metadata={{op_name=\"x\"}}\n"
                   for i in range(1, 20001))
    text = "HloModule big\n\nENTRY main {\n  a0 = f32[4]{0} parameter(0)\n" + body + "}\n"
    m = parse_module(text)
    assert len(m.entry.instructions) == 20001 and m.entry.root.name == "a20000"
    assert m.entry.root.line == 4 + 20000
    assert re.fullmatch(r"a\d+", m.entry.instructions[-1].operands[0])


def test_c_style_escapes_in_strings_are_decoded():
    # XLA prints metadata strings with C escapes: \' for a quote (pytree paths), octal UTF-8 bytes
    text = (
        'HloModule m\n\nENTRY main {\n'
        '  p = f32[2]{0} parameter(0), metadata={op_name="params[\\\'w1\\\']"}\n'
        '  ROOT n = f32[2]{0} negate(p), metadata={op_name="caf\\303\\251/neg" source_file="a\\\\b.py" source_line=3}\n'
        '}\n')
    m = parse_module(text)
    assert m.entry.by_name["p"].metadata.op_name == "params['w1']"
    n = m.entry.by_name["n"].metadata
    assert n.op_name == "café/neg"
    assert n.source.file == "a\\b.py" and n.source.line == 3
