"""analysis.pipeline: a compile's HLO texts parsed and analyzed once each, whenever they arrive,
and put onto any bundle of those very texts. Hand-written modules; expected kernels from them."""

from __future__ import annotations

import pytest

from analysis.bundle.core import Bundle
from analysis.hlo import HloParseError
from analysis.pipeline import Pipeline

PRE = """HloModule m
ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  %a = f32[8]{0} add(%p, %p), metadata={op_name="jit(f)/add"}
  ROOT %n = f32[8]{0} negate(%a), metadata={op_name="jit(f)/neg"}
}
"""
POST = """HloModule m, is_scheduled=true

%fused (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %a = f32[8]{0} add(%x, %x), metadata={op_name="jit(f)/add"}
  ROOT %n = f32[8]{0} negate(%a), metadata={op_name="jit(f)/neg"}
}

ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %f = f32[8]{0} fusion(%p), kind=kLoop, calls=%fused, backend_config={"a":1,"b":[2,3]}
}
"""
# the same module as XLA:CPU's compiled text prints it: a backend_config's fields in another order
POST_COMPILED = POST.replace('{"a":1,"b":[2,3]}', '{"b":[2,3],"a":1}')
POST_OTHER = POST.replace("negate(%a)", "abs(%a)")


def _fed(*pairs) -> Pipeline:
    pipe = Pipeline()
    for stage, text in pairs:
        pipe.offer(stage, text)
    return pipe


def test_a_text_is_parsed_once_and_the_same_module_printed_otherwise_keeps_its_parse():
    pipe = _fed(("hlo_before", PRE), ("hlo_after", POST))
    module = pipe.parse("hlo_after")[1]
    pipe.offer("hlo_after", POST)
    assert pipe.parse("hlo_after")[1] is module
    pipe.offer("hlo_after", POST_COMPILED)
    assert pipe.parse("hlo_after") == (POST_COMPILED, module)  # the compiled text, the dump's parse
    pipe.offer("hlo_after", POST_OTHER)
    assert pipe.parse("hlo_after")[1] is not module
    assert pipe.parse("hlo_after")[1].by_name["fused"].by_name["n"].opcode == "abs"


def test_a_text_that_does_not_parse_leaves_the_stage_as_it_was():
    pipe = _fed(("hlo_after", POST))
    module = pipe.parse("hlo_after")[1]
    with pytest.raises(HloParseError):
        pipe.offer("hlo_after", "HloModule broken\nENTRY %m {")
    assert pipe.parse("hlo_after") == (POST, module)
    assert Pipeline().parse("hlo_before") is None


def test_the_analysis_is_made_once_both_texts_are_in_and_again_only_when_a_parse_changed():
    pipe = _fed(("hlo_after", POST))
    assert pipe.analysis() is None  # the text before optimization is not in yet
    pipe.offer("hlo_before", PRE)
    made = pipe.analysis()
    kernels, provenance, metrics = made
    assert [k.name for k in kernels] == ["f"]  # one loop fusion of the add and the negate
    assert sorted(provenance.kernel_to_pre["f"]) == ["a", "n"]
    assert metrics["compute_ops_before"] == 2 and metrics["kernels_after"] == 1
    assert pipe.analysis() is made
    pipe.offer("hlo_after", POST_COMPILED)
    assert pipe.analysis() is made  # the same parse: the same analysis
    pipe.offer("hlo_after", POST_OTHER)
    assert pipe.analysis() is not made


def test_a_bundle_of_the_same_texts_takes_the_parses_and_the_analysis():
    pipe = _fed(("hlo_before", PRE), ("hlo_after", POST_COMPILED))
    made = pipe.analysis()
    b = pipe.onto(Bundle(stages={"hlo_before": PRE, "hlo_after": POST_COMPILED}, metrics={"shape_sweep": {"n": 3}}))
    assert b.module("hlo_after") is pipe.parse("hlo_after")[1] and b.module("hlo_before") is pipe.parse("hlo_before")[1]
    assert b.kernels is made[0] and b.provenance is made[1]
    assert b.metrics == {**made[2], "shape_sweep": {"n": 3}} and b.metrics is not made[2]  # its own dict, kept its own
    # another text after optimization: its own parse and analysis, the same text before kept
    o = pipe.onto(Bundle(stages={"hlo_before": PRE, "hlo_after": POST_OTHER}))
    assert o.module("hlo_before") is pipe.parse("hlo_before")[1] and o.kernels is not made[0]
    assert o.module("hlo_after").by_name["fused"].by_name["n"].opcode == "abs"
    # another platform than the analysis was made for: made again for it
    g = pipe.onto(Bundle(stages={"hlo_before": PRE, "hlo_after": POST_COMPILED}, environment={"platform": "gpu"}))
    assert g.kernels is not made[0] and [k.name for k in g.kernels] == ["f"]
    # nothing offered: the bundle analyzes itself
    alone = Pipeline().onto(Bundle(stages={"hlo_before": PRE, "hlo_after": POST}))
    assert [k.name for k in alone.kernels] == ["f"]


def test_what_was_derived_ahead_counts_where_it_was_made_of_the_bundles_own_objects():
    pipe = _fed(("hlo_before", PRE), ("hlo_after", POST))
    draft = pipe.onto(Bundle(stages={"hlo_before": PRE, "hlo_after": POST}))
    draft.derived("index", (draft.module("hlo_after"), draft.kernels), lambda: "made ahead")
    pipe.keep(draft)
    b = pipe.onto(Bundle(stages={"hlo_before": PRE, "hlo_after": POST}))
    assert b.derived("index", (b.module("hlo_after"), b.kernels), lambda: "made again") == "made ahead"
    o = pipe.onto(Bundle(stages={"hlo_before": PRE, "hlo_after": POST_OTHER}))
    assert o.derived("index", (o.module("hlo_after"), o.kernels), lambda: "made again") == "made again"


LAYERED_PRE = """HloModule m
ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  %a = f32[8]{0} add(%p, %p), metadata={op_name="jit(f)/block0/add"}
  %b = f32[8]{0} multiply(%a, %a), metadata={op_name="jit(f)/block1/mul"}
  ROOT %n = f32[8]{0} negate(%b), metadata={op_name="jit(f)/block1/neg"}
}
"""


def test_what_the_module_before_optimization_alone_decides_is_made_ahead_and_used_as_made():
    from analysis.program.layers import layer_tree
    from analysis.program.provenance import map_provenance
    from analysis.program.kernels import kernels as find_kernels
    from analysis.hlo import parse_module

    pipe = _fed(("hlo_before", LAYERED_PRE))
    pipe.prepare_before()  # beside XLA's optimization: the tree and the op indexes
    pre = pipe.parse("hlo_before")[1]
    tree = layer_tree(pre)
    assert list(tree.children) == ["block0", "block1"] and tree.children["block1"].ops == ["b", "n"]
    tree.children["block0"].kernels.append("k")  # a caller fills its own copy
    tree.children["block0"].ops.append("x")
    again = layer_tree(pre)
    assert again.children["block0"].kernels == [] and again.children["block0"].ops == ["a"]
    # the provenance made on the prepared module is the one made from scratch: the fusion
    # holds the add and the multiply (by metadata); the negate, left alone, is its own kernel
    post = parse_module(LAYERED_POST)
    for module in (pre, parse_module(LAYERED_PRE)):
        prov = map_provenance(module, post, find_kernels(post, "cpu"))
        assert {k: sorted(v) for k, v in prov.kernel_to_pre.items()} == {"f": ["a", "b"], "n": ["n"]}


LAYERED_POST = """HloModule m, is_scheduled=true

%fused (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %a = f32[8]{0} add(%x, %x), metadata={op_name="jit(f)/block0/add"}
  ROOT %b = f32[8]{0} multiply(%a, %a), metadata={op_name="jit(f)/block1/mul"}
}

ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  %f = f32[8]{0} fusion(%p), kind=kLoop, calls=%fused
  ROOT %n = f32[8]{0} negate(%f), metadata={op_name="jit(f)/block1/neg"}
}
"""
