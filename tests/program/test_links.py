"""One definition of op counts and op <-> kernel links (analysis.program.links): the graph, the details,
Compare and the Pass pipeline say the same thing about every kernel of every gallery model."""

from __future__ import annotations

import re

import pytest

from analysis.studies import compare, passes
from analysis.program import links
from analysis.bundle.core import Bundle
from analysis.hlo import parse_module
from analysis.program.kernels import NO_KERNEL, kernels as find_kernels
from analysis.program.provenance import map_provenance
from analysis.render.details import node_details
from analysis.render.module_graphs import post_graph
from sample_models import gallery, recorded_bundle_path

PRE = """HloModule m

ENTRY main {
  x = f32[8,4]{1,0} parameter(0), metadata={op_name="x"}
  w = f32[4,4]{1,0} parameter(1), metadata={op_name="w"}
  d1 = f32[8,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/q/dot_general" source_file="m.py" source_line=3}
  d2 = f32[8,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/q/dot_general" source_file="m.py" source_line=4}
  e = f32[8,4]{1,0} exponential(d2), metadata={op_name="jit(f)/exp" source_file="m.py" source_line=5}
  ROOT a = f32[8,4]{1,0} add(d1, e), metadata={op_name="jit(f)/add" source_file="m.py" source_line=6}
}
"""

# d1 and d2 share an op_name but not a line: a kernel made from d1 does not do d2's work
POST = """HloModule m, is_scheduled=true

fused_exp_add {
  p0 = f32[8,4]{1,0} parameter(0)
  p1 = f32[8,4]{1,0} parameter(1)
  ex = f32[8,4]{1,0} exponential(p1), metadata={op_name="jit(f)/exp" source_file="m.py" source_line=5}
  ROOT ad = f32[8,4]{1,0} add(p0, ex), metadata={op_name="jit(f)/add" source_file="m.py" source_line=6}
}

ENTRY main {
  x = f32[8,4]{1,0} parameter(0)
  w = f32[4,4]{1,0} parameter(1)
  dot.1 = f32[8,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/q/dot_general" source_file="m.py" source_line=3}
  dot.2 = f32[8,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/q/dot_general" source_file="m.py" source_line=4}
  ROOT loop_fusion = f32[8,4]{1,0} fusion(dot.1, dot.2), kind=kLoop, calls=fused_exp_add
}
"""


def _pair():
    pre, post = parse_module(PRE), parse_module(POST)
    ks = find_kernels(post)
    return pre, post, ks, map_provenance(pre, post, ks)


def test_kernel_ops_are_by_instruction_not_by_op_name():
    pre, post, ks, prov = _pair()
    assert links.kernel_ops(prov, "dot.1") == ["d1"]
    assert links.kernel_ops(prov, "dot.2") == ["d2"]
    assert sorted(links.kernel_ops(prov, "loop_fusion")) == ["a", "e"]
    assert links.op_count(prov, "loop_fusion") == 2
    assert links.op_kernels(prov, "d2") == ["dot.2"]


def test_the_pass_pipeline_says_what_the_kernels_say():
    pre, post, ks, prov = _pair()
    ch = passes.pass_change(pre, post)
    # the pipeline as one pass: the new fusion took in exactly the ops the kernel does
    assert sorted(ch.fused["loop_fusion"]) == ["a", "e"]


def _bundles():
    out = []
    for name in gallery():
        path = recorded_bundle_path(name, "h200")
        if path is not None and path.exists():
            out.append(Bundle.load(str(path)))
    return out


BUNDLES = _bundles()


@pytest.mark.parametrize("b", BUNDLES, ids=[b.title for b in BUNDLES])
def test_graph_details_compare_and_passes_agree_on_every_gallery_model(b):
    prov = b.provenance
    assert prov is not None
    pre, post = b.module("hlo_before"), b.module("hlo_after")
    spec = post_graph(post, b.kernels, provenance=prov, collapse_all=True)
    labels = {n.id: n.label for n in spec.nodes.values()} | {c.id: c.label for c in spec.clusters.values()}
    details = node_details(b)
    table = {r["A kernel"]: r["A ops"] for r in compare.kernel_table(b, b)}
    ch = passes.pass_change(pre, post)
    survivors = {i.name for i in post.entry.instructions}
    # the pipeline lists the entry's instructions (a nested jit's ops are inside a call there)
    entry_ops = {i.name for i in pre.entry.instructions if i.opcode not in NO_KERNEL | {"parameter"}}
    checked = 0
    for k in b.kernels:
        n = links.op_count(prov, k)
        # Details
        d = details.get(f"k:{k.name}")
        if d is not None:
            assert d["n_ops"] == n and len(d["ops"]) == min(n, 60), k.name
        # Compare
        if k.name in table:
            assert table[k.name] == n, k.name
        # the graph's label of an emitter fusion
        label = labels.get(f"k:{k.name}") or labels.get(f"f:{k.name}") or ""
        m = re.search(r"fusion · (\d+) ops", label)
        if k.route == "emitter" and k.opcode == "fusion" and k.computation == post.entry.name:
            assert m and int(m.group(1)) == n, (k.name, label)
            checked += 1
        # the Pass pipeline, the whole pipeline taken as one pass
        if k.name in ch.fused:
            assert set(ch.fused[k.name]) == (set(links.kernel_ops(prov, k)) & entry_ops) - survivors, k.name
    assert checked or not any(k.route == "emitter" and k.opcode == "fusion" for k in b.kernels)


def test_compare_links_do_not_reach_kernels_that_share_no_op():
    pre, post, ks, prov = _pair()

    class B:  # the smallest Bundle-like: what links.related reads
        def __init__(self):
            self.provenance, self.kernels = prov, ks

        def module(self, stage):
            return pre if stage == "hlo_before" else post

    rel = compare.related(B(), B())
    assert rel["dot.1"] == ["dot.1"]  # not dot.2, though both are "jit(f)/q/dot_general"
    assert rel["loop_fusion"] == ["loop_fusion"]
