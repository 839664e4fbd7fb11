"""Provenance: every pre-optimization op mapped to the kernel(s) it ended up in."""

from __future__ import annotations

import pytest

from analysis.hlo import parse_module
from analysis.program.kernels import kernels
from analysis.program.provenance import Provenance, compute_ops, map_provenance
from sample_models import gallery

GALLERY = list(gallery())

NESTED_WHILE = '''\
import jax
import jax.numpy as jnp


@jax.jit
def norm(v):
    return v / jnp.sqrt(jnp.sum(v * v, axis=-1, keepdims=True) + 1e-6)


def model(x, w):
    def body(i, h):
        return jnp.tanh(norm(h @ w) + i)
    h = jax.lax.fori_loop(0, 3, body, x)
    return norm(h) * 2.0


def example_inputs():
    return (jnp.ones((16, 32)), jnp.ones((32, 32)) * 0.1)
'''


def _check_consistent(b):
    prov = b.provenance
    pre = b.module("hlo_before")
    kernel_names = {k.name for k in b.kernels}
    ops = {i.name for i in compute_ops(pre)}
    # Mapped and unmapped partition the compute ops.
    assert set(prov.pre_to_kernels) | set(prov.unmapped) == ops
    assert not set(prov.pre_to_kernels) & set(prov.unmapped)
    assert set(prov.how) == set(prov.pre_to_kernels)
    assert set(prov.how.values()) <= {"metadata", "op_name", "shape", "user", "operand", "epilogue"}
    # kernel_to_pre is exactly the inverse relation of pre_to_kernels.
    forward = {(p, k) for p, ks in prov.pre_to_kernels.items() for k in ks}
    backward = {(p, k) for k, ps in prov.kernel_to_pre.items() for p in ps}
    assert forward == backward
    assert all(ks for ks in prov.pre_to_kernels.values())
    assert set(prov.kernel_to_pre) <= kernel_names
    assert Provenance.from_dict(prov.to_dict()) == prov


@pytest.mark.parametrize("name", GALLERY)
def test_gallery_provenance(gallery_bundle, name):
    b = gallery_bundle(name)
    _check_consistent(b)
    assert b.provenance.mapped_fraction >= 0.9
    # Every kernel that does arithmetic came from some op of the program.
    for k in b.kernels:
        if k.route != "control" and k.flops:
            assert k.name in b.provenance.kernel_to_pre, k.name


def test_mlp_bias_add_and_relu_share_a_kernel(gallery_bundle):
    b = gallery_bundle("mlp")
    pre = b.module("hlo_before")
    prov = b.provenance
    # Ops under the dense1 scope: in the entry, or inside a nested jit (`jit(relu)`) called
    # from it, whose ops carry op_names relative to the call.
    under = [i for i in pre.entry.instructions if "dense1" in i.metadata.op_name]
    for call in [i for i in under if i.opcode == "call"]:
        for c in call.called_computations:
            under.extend(pre.by_name[c].instructions)
    mapped = {i.name for i in compute_ops(pre)}
    by_kind = {"add": [], "max": []}
    for inst in under:
        last = inst.metadata.op_name.rsplit("/", 1)[-1]
        if last in by_kind and inst.opcode in ("add", "maximum") and inst.name in mapped:
            by_kind[last].append(inst.name)
    assert by_kind["add"] and by_kind["max"]
    add_kernels = set().union(*(prov.pre_to_kernels[n] for n in by_kind["add"]))
    max_kernels = set().union(*(prov.pre_to_kernels[n] for n in by_kind["max"]))
    shared = add_kernels & max_kernels
    assert shared, (add_kernels, max_kernels)
    # ... and that kernel is a fusion of several ops, not the matmul's library call.
    assert any(b.kernel(k).is_multi_op_fusion for k in shared)


@pytest.fixture(scope="module")
def nested(source_bundle):
    return source_bundle(NESTED_WHILE, "nested_while")


def test_nested_jit_and_while(nested):
    b = nested
    _check_consistent(b)
    prov = b.provenance
    assert prov.mapped_fraction >= 0.9
    pre = b.module("hlo_before")
    ops = compute_ops(pre)
    # The while op itself maps to the while loop of the optimized module.
    whiles = [i for i in ops if i.opcode == "while"]
    assert len(whiles) == 1
    assert [b.kernel(k).opcode for k in prov.pre_to_kernels[whiles[0].name]] == ["while"]
    loop = next(k for k in b.kernels if k.opcode == "while")
    # Ops of the loop body end in kernels that run inside the loop body.
    body_ops = [i for i in ops if "/while/body/" in i.metadata.op_name and i.opcode == "add"]
    assert body_ops
    for inst in body_ops:
        assert all(b.kernel(k).context == f"{loop.name} body" for k in prov.pre_to_kernels[inst.name])
    # `norm` is a nested jit called twice (in the body and after the loop): its computation is
    # shared before optimization, inlined twice after. Its ops map to kernels at both places.
    sqrt = [i for i in ops if i.opcode == "sqrt"]
    assert len(sqrt) == 1, "the shared computation is counted once"
    contexts = {b.kernel(k).context for k in prov.pre_to_kernels[sqrt[0].name]}
    assert contexts == {"", f"{loop.name} body"}
    # No call instruction counts as an op: XLA inlines nested jits.
    assert not any(i.opcode == "call" for i in ops)


def test_ops_without_metadata_inherit_from_their_users():
    pre = parse_module('''HloModule m
ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %c = f32[] constant(1)
  %b = f32[4]{0} broadcast(%c), dimensions={}
  %a = f32[4]{0} add(%p, %b), metadata={op_name="jit(f)/add" source_file="f.py" source_line=3}
  ROOT %e = f32[4]{0} exponential(%a), metadata={op_name="jit(f)/exp" source_file="f.py" source_line=4}
}
''')
    post = parse_module('''HloModule m, is_scheduled=true
%fc (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %c.1 = f32[] constant(1)
  %b.1 = f32[4]{0} broadcast(%c.1), dimensions={}
  %a.1 = f32[4]{0} add(%x, %b.1), metadata={op_name="jit(f)/add" source_file="f.py" source_line=3}
  ROOT %e.1 = f32[4]{0} exponential(%a.1), metadata={op_name="jit(f)/exp" source_file="f.py" source_line=4}
}
ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %fusion = f32[4]{0} fusion(%p), kind=kLoop, calls=%fc
}
''')
    prov = map_provenance(pre, post, kernels(post))
    assert prov.pre_to_kernels == {"a": ["fusion"], "e": ["fusion"], "b": ["fusion"]}
    assert prov.how == {"a": "metadata", "e": "metadata", "b": "user"}
    assert prov.kernel_to_pre == {"fusion": ["a", "e", "b"]}
    assert prov.unmapped == [] and prov.mapped_fraction == 1.0


def test_unmatched_ops_are_reported_unmapped():
    pre = parse_module('''HloModule m
ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p), metadata={op_name="jit(f)/neg"}
}
''')
    post = parse_module('''HloModule m, is_scheduled=true
ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %s = f32[4]{0} sine(%p), metadata={op_name="jit(f)/sin"}
}
''')
    prov = map_provenance(pre, post, kernels(post))
    assert prov.unmapped == ["n"] and prov.mapped_fraction == 0.0
    assert prov.kernel_to_pre == {}


def test_an_activation_in_a_nested_jit_rides_with_the_library_call_that_produces_its_input():
    """cuDNN folds a convolution's bias add and ReLU into one call that keeps only the convolution's
    metadata; the ReLU (``jax.nn.relu``, a nested jit) is seen through its call: its operand is the
    bias add, which the call computes."""
    from analysis.hlo import parse_module
    from analysis.program.kernels import kernels
    from analysis.program.provenance import map_provenance

    pre = parse_module('''HloModule m
%relu (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %zero = f32[] constant(0)
  %zb = f32[8]{0} broadcast(%zero), dimensions={}, metadata={op_name="max"}
  ROOT %max = f32[8]{0} maximum(%x, %zb), metadata={op_name="max"}
}
ENTRY %main (a: f32[8], b: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  %b = f32[8]{0} parameter(1)
  %add = f32[8]{0} add(%a, %b), metadata={op_name="jit(f)/Net/conv1/add"}
  %r = f32[8]{0} call(%add), to_apply=%relu, metadata={op_name="jit(f)/Net/jit(relu)"}
  ROOT %n = f32[8]{0} negate(%r), metadata={op_name="jit(f)/Net/neg"}
}
''')
    post = parse_module('''HloModule m, is_scheduled=true
ENTRY %main (a: f32[8], b: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  %b = f32[8]{0} parameter(1)
  %conv = (f32[8]{0}, u8[0]{0}) custom-call(%a, %b), custom_call_target="__cudnn$convBiasActivationForward", metadata={op_name="jit(f)/Net/conv1/add"}
  %g = f32[8]{0} get-tuple-element(%conv), index=0
  ROOT %n = f32[8]{0} negate(%g), metadata={op_name="jit(f)/Net/neg"}
}
''')
    ks = kernels(post, "gpu")
    prov = map_provenance(pre, post, ks)
    assert prov.pre_to_kernels["add"] == ["conv"] and prov.pre_to_kernels["n"] == ["n"]
    # the ReLU's maximum reads the bias add through the call: it is the library call's epilogue
    # (a convBiasActivationForward call adds a bias: it has one)
    assert prov.pre_to_kernels["max"] == ["conv"] and prov.how["max"] == "epilogue"
    assert prov.unmapped == []
