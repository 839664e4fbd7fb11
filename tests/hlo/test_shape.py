"""analysis.hlo.shape: HLO shape strings -> Shape, sizes, layouts in words, errors."""

from __future__ import annotations


import pytest

from analysis.hlo.shape import ELEMENT_BITS, Layout, Shape, ShapeParseError, parse_shape


@pytest.mark.parametrize("text", [
    "f32[]", "f32[2,3]", "bf16[2,3]{1,0}", "s32[0]{0}", "pred[7]", "token[]",
    "f32[<=8,4]", "f32[<=8,4]{1,0}", "f32[?,4]", "(f32[2]{0}, (s32[], u8[0]{0}))", "()",
    "f32[8,256]{1,0:T(8,128)(2,1)S(1)}", "s4[16]{0:E(4)}", "f8e4m3fn[4,4]{0,1}",
])
def test_round_trip(text):
    assert str(parse_shape(text)) == text


def test_array_fields():
    s = parse_shape("bf16[64,256]{0,1}")
    assert (s.element_type, s.dimensions, s.rank, s.num_elements) == ("bf16", (64, 256), 2, 64 * 256)
    assert not s.is_tuple and s.dynamic == ()
    assert s.layout == Layout((0, 1))
    assert s.byte_size == 64 * 256 * 2


def test_scalar_and_empty():
    s = parse_shape("f32[]")
    assert s.rank == 0 and s.num_elements == 1 and s.byte_size == 4 and s.layout is None
    assert parse_shape("u8[0]{0}").byte_size == 0
    assert parse_shape("token[]").byte_size == 0


@pytest.mark.parametrize("etype,bits", sorted(ELEMENT_BITS.items()))
def test_byte_size_per_element_type(etype, bits):
    s = parse_shape(f"{etype}[3,5]")
    assert s.byte_size == (15 * bits + 7) // 8


def test_byte_size_honours_element_size_in_layout():
    assert parse_shape("s8[10]{0}").byte_size == 10
    assert parse_shape("s8[10]{0:E(4)}").byte_size == 5
    assert parse_shape("s4[3]{0:E(4)}").byte_size == 2  # rounds up to whole bytes


def test_tuple_leaves_and_size():
    s = parse_shape("(f32[2]{0}, (s32[], u8[3]{0}), (), bf16[4,4])")
    assert s.is_tuple and len(s.tuple_shapes) == 4
    assert [str(x) for x in s.leaves()] == ["f32[2]{0}", "s32[]", "u8[3]{0}", "bf16[4,4]"]
    assert s.byte_size == 8 + 4 + 3 + 32
    assert s.tuple_shapes[2].leaves() == []


def test_tuple_with_index_comments():
    # XLA prints /*index=5*/ inside long tuple shapes.
    text = "(f32[], f32[], f32[], f32[], f32[], /*index=5*/s32[2]{0})"
    s = parse_shape(text)
    assert len(s.tuple_shapes) == 6 and str(s.tuple_shapes[5]) == "s32[2]{0}"
    assert str(s) == text.replace("/*index=5*/", "")


def test_dynamic_dimensions():
    s = parse_shape("f32[<=8,4,?]")
    assert s.dimensions == (8, 4, -1)
    assert s.dynamic == (True, False, True)
    assert s.dims_text() == "f32[<=8,4,?]"


def test_layout_extensions():
    lay = parse_shape("f32[8,256]{1,0:T(8,128)(2,1)S(1)}").layout
    assert lay.minor_to_major == (1, 0)
    assert lay.tiles == ((8, 128), (2, 1))
    assert lay.memory_space == 1 and lay.element_size_bits is None
    assert lay.extensions == "T(8,128)(2,1)S(1)"
    lay = parse_shape("pred[128]{0:T(1024)(128)(4,1)E(8)}").layout
    assert lay.tiles == ((1024,), (128,), (4, 1)) and lay.element_size_bits == 8
    assert parse_shape("f32[4,4]{1,0:T(2,*)}").layout.tiles == ((2, -1),)


def test_describe_layout():
    assert "scalar" in parse_shape("f32[]").describe_layout()
    assert "no layout assigned" in parse_shape("f32[2,3]").describe_layout()
    row = parse_shape("f32[64,256]{1,0}").describe_layout()
    assert "dimension 1 (size 256) varies fastest" in row and "row-major (the default)" in row
    col = parse_shape("f32[64,256]{0,1}").describe_layout()
    assert "dimension 0 (size 64) varies fastest" in col and "NOT the default" in col
    tiled = parse_shape("f32[8,256]{1,0:T(8,128)(2,1)S(1)}").describe_layout()
    assert "tiled 8x128 then 2x1" in tiled and "memory space 1" in tiled
    tup = parse_shape("(f32[2]{0}, s32[])").describe_layout()
    assert tup.startswith("a tuple: ") and "scalar" in tup


def test_shape_is_hashable_value():
    assert parse_shape("f32[2]{0}") == parse_shape("f32[2]{0}")
    assert hash(parse_shape("(f32[2]{0}, s32[])")) == hash(parse_shape("(f32[2]{0},s32[])"))
    assert parse_shape("f32[2]{0}") != parse_shape("f32[2]")
    assert isinstance(parse_shape("f32[2]"), Shape)


@pytest.mark.parametrize("text,pos", [
    ("", 0),
    ("f32", 0),
    ("f32[2", 0),
    ("F32[2]", 0),
    ("f32[2,x]", 4),
    ("f32[-1]", 4),
    ("f32[2]{a}", 6),
    ("f32[2] junk", 6),
    ("(f32[2] s32[])", 8),
    ("(f32[2],", 8),
    ("(f32[2], /*index=1 s32[])", 9),
])
def test_errors(text, pos):
    with pytest.raises(ShapeParseError) as info:
        parse_shape(text)
    assert info.value.pos == pos
    assert info.value.text == text
    assert isinstance(info.value, ValueError)


def test_deep_nesting_is_an_error_not_a_crash():
    with pytest.raises(ShapeParseError, match="nested deeper"):
        parse_shape("(" * 5000 + "f32[]" + ")" * 5000)
    ok = "(" * 30 + "f32[]" + ")" * 30
    assert str(parse_shape(ok)) == ok


def test_error_message_is_short():
    with pytest.raises(ShapeParseError) as info:
        parse_shape("f32[2]" + "x" * 100_000)
    assert len(str(info.value)) < 200


def test_long_tuple():
    text = "(" + ", ".join(f"f32[{i},{i}]{{1,0}}" for i in range(20000)) + ")"
    s = parse_shape(text)
    assert len(s.leaves()) == 20000
