"""The ways XLA's parser takes HLO text that XLA's printer does not write, one hand-written
snippet per feature (docs/hlo-grammar.md). Each valid snippet is also handed to XLA's own parser
(``jaxlib._hlo.hlo_module_from_text``) when jaxlib is installed: it must accept it, and agree with
us on computations, instruction names, opcodes and operands (XLA renames a duplicate name ``p``
to ``p.1``; names are unique module-wide for XLA, per computation for us)."""

from __future__ import annotations

import re

import pytest

from analysis.hlo import HloParseError, parse_module
from analysis.hlo import parser as hlo_parser

try:  # the oracle is optional: the parser itself never needs jax
    from jaxlib import _hlo
except ImportError:  # pragma: no cover
    _hlo = None

_OPCODE_EXCEPTIONS = {"kClz": "count-leading-zeros", "kCos": "cosine", "kSin": "sine", "kExp": "exponential"}


def _opcode_text(op) -> str:
    return _OPCODE_EXCEPTIONS.get(op.name) or re.sub(r"(?<!^)(?=[A-Z])", "-", op.name[1:]).lower()


def _base(name: str) -> str:
    return re.sub(r"\.\d+$", "", name)


def parse(text: str):
    """Our parse, checked against XLA's; and the general parser agrees with the fast path."""
    mod = parse_module(text)
    slow = hlo_parser.parse_text(text, fast=False)
    assert [(i.name, i.opcode, i.operands, i.shape_text, i.attributes) for i in mod.instructions()] == [
        (i.name, i.opcode, i.operands, i.shape_text, i.attributes) for i in slow.instructions()]
    if _hlo is not None:
        theirs = {c.name: c for c in _hlo.hlo_module_from_text(text).computations()}
        for comp in mod.computations:
            tc = theirs[comp.name]
            ti = list(tc.instructions())
            assert [_base(i.name) for i in comp.instructions] == [_base(t.name) for t in ti], comp.name
            rename = {i.name: t.name for i, t in zip(comp.instructions, ti)}
            for i, t in zip(comp.instructions, ti):
                if not i.opcode.endswith(("-start", "-done")):
                    assert i.opcode == _opcode_text(t.opcode), i.name
                assert [rename[o] for o in i.operands] == [o.name for o in t.operands()], i.name
    return mod


# ----------------------------------------------------------------------------- comments


def test_profiler_annotation_after_closing_brace_and_trailing_comment_after_attributes():
    # XLA's GPU profiler annotations print '} // name'; a '// ...' after attributes is a comment
    m = parse("""\
HloModule annotated

cond {
  c = (s32[]) parameter(0)
  i = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT  // 3 iterations
} // cond

body {
  b = (s32[]) parameter(0)
  j = s32[] get-tuple-element(b), index=0
  one = s32[] constant(1)
  k = s32[] add(j, one)
  ROOT t = (s32[]) tuple(k)
} // body

ENTRY main {
  z = s32[] constant(0)
  init = (s32[]) tuple(z)
  ROOT w = (s32[]) while(init), condition=cond, body=body  // 25
} // main
""")
    w = m.entry.root
    assert w.attributes["body"] == "body" and w.called_computations == ["cond", "body"]
    assert m.by_name["cond"].root.attributes["direction"] == "LT"


def test_comments_anywhere_and_lit_lines_before_the_header():
    m = parse("""\
// RUN: hlo-opt %s --passes=foo | FileCheck %s
// CHECK: ROOT
/* a block
   comment */
HloModule commented  // trailing

/* before a computation */ ENTRY main {
  // a whole-line comment
  p = f32[4] parameter(0)  /* after */
  q = f32[4] /* inside */ negate(/* operand */ p)
  ROOT r = f32[4] add(p, q)
}
""")
    assert m.name == "commented"
    assert [i.name for i in m.entry.instructions] == ["p", "q", "r"]
    assert m.entry.by_name["q"].operands == ["p"] and m.entry.root.operands == ["p", "q"]


# ----------------------------------------------------------------------------- wrapping


def test_instruction_and_signature_wrapped_over_lines():
    m = parse("""\
HloModule wrapped

ENTRY main (p0: f32[2,3],
            p1: f32[2,3])
    -> (f32[2,3],
        f32[2,3]) {
  p0 = f32[2,3] parameter(0)
  p1 = f32[2,3] parameter(1)
  sum = f32[2,3]
      add(p0,
          p1),
      metadata={op_name="sum"}
  ROOT t = (f32[2,3], f32[2,3])
      tuple(sum, p1)
}
""")
    sum_ = m.entry.by_name["sum"]
    assert sum_.operands == ["p0", "p1"] and sum_.line == 9 and sum_.metadata.op_name == "sum"
    assert m.entry.root.line == 13 and m.entry.root.operands == ["sum", "p1"]
    assert m.entry.signature.startswith("(p0: f32[2,3], p1: f32[2,3]) -> (")


def test_error_in_a_wrapped_instruction_says_the_line_goes_on():
    text = "HloModule m\n\nENTRY main {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] add(p,\n      p ]\n}\n"
    with pytest.raises(HloParseError) as info:
        parse_module(text)
    err = info.value
    assert (err.line, err.column) == (5, len("  ROOT n = f32[4] add") + 1)  # the '(' left open
    assert "')' was expected" in err.message and "goes on" in err.message and "line 6" in err.message
    with pytest.raises(HloParseError) as info:
        parse_module("HloModule m\n\nENTRY main {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4]\n    add(p, p),"
                     "\n    foo\n}\n")
    err = info.value
    assert err.line == 7 and "key=value" in err.message and "starts on line 5" in err.message


def test_nesting_deeper_than_four_levels_in_header_and_signature():
    deep = "(((((f32[2]{0})))))"  # tuples nested five deep
    m = parse(f"""\
HloModule deep, entry_computation_layout={{({deep})->{deep}}}

ENTRY main (p: {deep}) -> {deep} {{
  ROOT p = {deep} parameter(0)
}}
""")
    assert m.attributes["entry_computation_layout"] == "{(" + deep + ")->" + deep + "}"
    assert m.entry.root.shape.tuple_shapes[0].tuple_shapes[0].is_tuple


# ----------------------------------------------------------------------------- shapes


def test_spaces_inside_shapes_and_layouts_and_no_space_before_the_opcode():
    m = parse("""\
HloModule spaces

ENTRY main {
  p = f32[2, 3] {1, 0} parameter(0)
  t = ( f32[2, 3]{1, 0}, s32[ ] ) tuple(p, c)
  c = s32[] constant(1)
  ROOT n = f32[2,3]{1,0}negate(f32[2, 3]{1,0} p)
}
""".replace("  t = ( f32[2, 3]{1, 0}, s32[ ] ) tuple(p, c)\n  c = s32[] constant(1)\n",
            "  c = s32[] constant(1)\n  t = ( f32[2, 3]{1, 0}, s32[ ] ) tuple(p, c)\n"))
    by = m.entry.by_name
    assert str(by["p"].shape) == "f32[2,3]{1,0}" and by["p"].shape.layout.minor_to_major == (1, 0)
    assert str(by["t"].shape) == "(f32[2,3]{1,0}, s32[])"
    assert m.entry.root.opcode == "negate" and m.entry.root.operands == ["p"]


def test_buffer_shapes():
    m = parse("""\
HloModule buffers

ENTRY main {
  p = (b(f32[16]), f32[16]) parameter(0)
  ROOT g = b(f32[16]) get-tuple-element(p), index=0
}
""")
    g = m.entry.root.shape
    assert g.buffer and g.dimensions == (16,) and str(g) == "b(f32[16])" and g.byte_size == 64


# ----------------------------------------------------------------------------- inline forms


def test_inline_called_computations():
    m = parse("""\
HloModule inline_calls

ENTRY main {
  p = f32[4] parameter(0)
  ROOT f = f32[4] fusion(p), kind=kLoop, calls={
    x = f32[4] parameter(0)
    ROOT e = f32[4] exponential(x)
  }
}
""")
    f = m.entry.root
    (callee,) = f.called_computations
    assert callee == "_"  # XLA's name for it
    assert [i.opcode for i in m.by_name[callee].instructions] == ["parameter", "exponential"]
    assert m.entry.is_entry and not m.by_name[callee].is_entry


def test_operands_written_as_inline_instructions_are_not_dropped():
    m = parse("""\
HloModule inline_operands

ENTRY main {
  ROOT r = f32[2,4] add(f32[2,4] negate(f32[2,4] parameter(0)),
                        f32[2,4] parameter(1))
}
""")
    insts = m.entry.instructions
    # XLA's names and order: the inline ones before their user, innermost first
    assert [(i.name, i.opcode) for i in insts] == [
        ("parameter.anon", "parameter"), ("negate.anon", "negate"), ("parameter.anon.1", "parameter"),
        ("r", "add")]
    assert insts[1].operands == ["parameter.anon"] and str(insts[1].shape) == "f32[2,4]"
    assert m.entry.root.operands == ["negate.anon", "parameter.anon.1"]
    # an inline instruction takes no attributes (XLA reads ', dimensions=...' as the next operand)
    with pytest.raises(HloParseError):
        parse_module("ENTRY main {\n  ROOT r = f32[2,4] add(f32[2,4] broadcast(f32[2] parameter(0)), "
                     "dimensions={0}, f32[2,4] parameter(1))\n}\n")


# ----------------------------------------------------------------------------- module structure


def test_no_header_and_no_entry_keyword():
    m = parse("""\
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

main {
  x = f32[8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add
}
""")
    assert m.entry.name == "main" and m.entry.is_entry and not m.by_name["add"].is_entry
    assert m.name == "module_main"


def test_more_than_one_entry_or_root_is_an_error():
    with pytest.raises(HloParseError, match="more than one ENTRY"):
        parse_module("ENTRY a {\n  ROOT p = f32[] parameter(0)\n}\nENTRY b {\n  ROOT q = f32[] parameter(0)\n}\n")
    with pytest.raises(HloParseError, match="more than one ROOT") as info:
        parse_module("ENTRY a {\n  ROOT p = f32[] parameter(0)\n  ROOT q = f32[] negate(p)\n}\n")
    assert info.value.line == 3


def test_async_sugar_keeps_its_opcode_and_names_the_wrapped_op():
    m = parse("""\
HloModule sugar

ENTRY main {
  p = f32[8] parameter(0)
  s = ((f32[8]), f32[8], s32[]) custom-call-start(p), custom_call_target="foo"
  ROOT d = f32[8] custom-call-done(s)
}
""")
    s, d = m.entry.by_name["s"], m.entry.root
    assert (s.opcode, d.opcode) == ("custom-call-start", "custom-call-done")
    assert s.async_wrapped == "custom-call" and s.custom_call_target == "foo"


def test_trailing_comma_in_operands():
    m = parse("ENTRY main {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] add(p, p ,)\n}\n")
    assert m.entry.root.operands == ["p", "p"]


def test_literal_attribute_with_a_space():
    m = parse("""\
HloModule lit

ENTRY main {
  c = s32[2] constant({1, 2})
  ROOT cc = s32[2] custom-call(c), custom_call_target="t", literal=s32[2]{0} {3, 4}, api_version=API_VERSION_ORIGINAL
}
""")
    assert m.entry.root.attributes["literal"] == "s32[2]{0} {3, 4}"
    assert m.entry.root.attributes["api_version"] == "API_VERSION_ORIGINAL"


# ----------------------------------------------------------------------------- shapes XLA infers


def test_missing_shapes_are_inferred_for_common_opcodes():
    m = parse("""\
HloModule infer

ENTRY main {
  a = f32[2,3]{1,0} parameter(0)
  b = f32[2,3]{1,0} parameter(1)
  s = add(a, b)
  c = compare(a, s), direction=LT
  t = tuple(s, c)
  g = get-tuple-element(t), index=1
  tr = transpose(a), dimensions={1,0}
  w = f32[3,4]{1,0} parameter(2)
  ROOT d = dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
""")
    by = m.entry.by_name
    assert str(by["s"].shape) == "f32[2,3]{1,0}"
    assert str(by["c"].shape) == "pred[2,3]{1,0}" and str(by["g"].shape) == "pred[2,3]{1,0}"
    assert str(by["t"].shape) == "(f32[2,3]{1,0}, pred[2,3]{1,0})"
    assert by["tr"].shape.dimensions == (3, 2) and by["d"].shape.dimensions == (2, 4)


def test_missing_shape_not_inferred_is_a_clear_error():
    text = "HloModule m\n\nENTRY main {\n  a = f32[2] parameter(0)\n  ROOT c = concatenate(a, a), dimensions={0}\n}\n"
    if _hlo is not None:
        _hlo.hlo_module_from_text(text)  # XLA infers it
    with pytest.raises(HloParseError) as info:
        parse_module(text)
    err = info.value
    assert err.line == 5 and err.column == len("  ROOT c = ") + 1
    assert "has no shape" in err.message and "'concatenate'" in err.message and "write the shape" in err.message


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("text,line,column,expected", [
    ("ENTRY main {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p), foo\n}\n", 3, 30, "key=value"),
    ("ENTRY main {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p ,, p)\n}\n", 3, 29, "operand name"),
    ("ENTRY main {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4 negate(p)\n}\n", 3, 15, "']' expected"),
    ("ENTRY main (p: f32[4]) f32[4] {\n  ROOT p = f32[4] parameter(0)\n}\n", 1, 24, "'->'"),
    ("ENTRY main {\n  ROOT p = f32[4] parameter(0) /* open\n}\n", 2, 32, "unterminated /* comment"),
])
def test_errors_name_line_column_and_what_was_expected(text, line, column, expected):
    with pytest.raises(HloParseError) as info:
        parse_module(text)
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    assert expected in err.message
    if _hlo is not None:
        with pytest.raises(Exception):
            _hlo.hlo_module_from_text(text)


def test_mesh_replica_groups_with_their_axes():
    """XLA:GPU prints a collective's mesh replica groups as a mesh, a space, then the axes (as in
    a real two-GPU compile for an H200 target)."""
    text = """HloModule m, is_scheduled=true
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %e (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  %ars = f32[8]{0} all-reduce-start(%p), channel_id=1, replica_groups=mesh['axis_0'=1,'axis_1'=2] {'axis_1'}, use_global_device_ids=true, to_apply=%add
  ROOT %ard = f32[8]{0} all-reduce-done(%ars)
}
"""
    m = parse_module(text)
    ars = m.entry.by_name["ars"]
    assert ars.attributes["replica_groups"] == "mesh['axis_0'=1,'axis_1'=2] {'axis_1'}"
    assert ars.attributes["use_global_device_ids"] == "true" and ars.operands == ["p"]
