"""The legend for async ops: an ``X-start`` / ``X-done`` pair (XLA's sugar for async-start over a
computation wrapping one ``X``, for any ``X``) is ONE kernel, at the start, with the route of the
``X`` it runs; the ``-done`` (and ``-update``) launches nothing."""

from __future__ import annotations

import pytest

from analysis.hlo import async_sugar, parse_module
from analysis.program.kernels import classify, kernels

try:  # the oracle is optional
    from jaxlib import _hlo
except ImportError:  # pragma: no cover
    _hlo = None

ASYNC_SUGAR = """\
HloModule async_sugar, is_scheduled=true

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}

%fused_neg (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  ROOT %neg = f32[8]{0} negate(%x)
}

ENTRY %main (p: f32[8]) -> (f32[4], f32[8], f32[8], f32[8]) {
  %p = f32[8]{0} parameter(0)
  %rss = ((f32[8]{0}), f32[4]{0}) reduce-scatter-start(%p), replica_groups={{0,1}}, dimensions={0}, to_apply=%sum
  %rsd = f32[4]{0} reduce-scatter-done(%rss)
  %a2as = ((f32[8]{0}), f32[8]{0}) all-to-all-start(%p), replica_groups={{0,1}}, dimensions={0}
  %a2ad = f32[8]{0} all-to-all-done(%a2as)
  %ccs = ((f32[8]{0}), f32[8]{0}, s32[]) custom-call-start(%p), custom_call_target="__cublas$gemm"
  %ccd = f32[8]{0} custom-call-done(%ccs)
  %fs = ((f32[8]{0}), f32[8]{0}, s32[]) fusion-start(%p), kind=kLoop, calls=%fused_neg
  %fd = f32[8]{0} fusion-done(%fs)
  %ars = f32[8]{0} all-reduce-start(%fd), replica_groups={}, to_apply=%sum
  %ard = f32[8]{0} all-reduce-done(%ars)
  ROOT %t = (f32[4]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}) tuple(%rsd, %a2ad, %ccd, %ard)
}
"""


def test_snippet_is_real_hlo_and_xla_desugars_it():
    if _hlo is None:
        pytest.skip("no jaxlib")
    mod = _hlo.hlo_module_from_text(ASYNC_SUGAR)
    main = [c for c in mod.computations() if c.name == "main"][0]
    ops = {i.name: i.opcode.name for i in main.instructions()}
    # XLA turns each sugared pair into async-start/async-done (its wrapped op in a new computation)
    assert [ops[n] for n in ("rss", "rsd", "a2as", "ccs", "fs", "fd")] == [
        "kAsyncStart", "kAsyncDone", "kAsyncStart", "kAsyncStart", "kAsyncStart", "kAsyncDone"]
    wrapped = {i.name: i.async_wrapped_root().opcode.name for i in main.instructions() if ops[i.name] == "kAsyncStart"}
    assert wrapped == {"rss": "kReduceScatter", "a2as": "kAllToAll", "ccs": "kCustomCall", "fs": "kFusion"}
    # while the native async opcodes stay as they are
    assert ops["ars"] == "kAllReduceStart" and ops["ard"] == "kAllReduceDone"


def test_sugar_names_the_wrapped_op():
    assert async_sugar("reduce-scatter-start") == ("reduce-scatter", "start")
    assert async_sugar("custom-call-done") == ("custom-call", "done")
    assert async_sugar("call-update") == ("call", "update")
    for native in ("all-reduce-start", "all-gather-done", "copy-start", "async-start", "collective-permute-done"):
        assert async_sugar(native) is None
    assert async_sugar("add") is None and async_sugar("-start") is None


def test_start_done_pair_is_one_kernel_with_the_wrapped_route():
    ks = {k.name: k for k in kernels(parse_module(ASYNC_SUGAR), platform="gpu")}
    # one kernel per pair, at its start; no -done anywhere
    assert set(ks) == {"rss", "a2as", "ccs", "fs", "ars"}
    assert (ks["rss"].route, ks["a2as"].route, ks["ars"].route) == ("collective",) * 3
    assert (ks["ccs"].route, ks["ccs"].library, ks["ccs"].custom_call_target) == ("library", "cuBLAS", "__cublas$gemm")
    assert ks["fs"].route == "emitter" and ks["fs"].fusion_kind == "kLoop" and ks["fs"].fused_ops == ("neg",)
    # the kernel keeps the opcode as written
    assert ks["rss"].opcode == "reduce-scatter-start" and ks["fs"].opcode == "fusion-start"


def test_classify_an_async_start_directly():
    m = parse_module(ASYNC_SUGAR)
    by = m.entry.by_name
    assert classify(by["ccs"], "gpu", m) == ("library", "cuBLAS")
    assert classify(by["rss"], "gpu", m) == ("collective", None)


CALL_START = """\
HloModule call_start

%callee (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %e = f32[4]{0} exponential(%x)
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %cs = ((f32[4]{0}), f32[4]{0}, s32[]) call-start(%p), to_apply=%callee
  ROOT %cd = f32[4]{0} call-done(%cs)
}
"""


def test_call_start_is_control_and_its_work_is_walked():
    if _hlo is not None:
        _hlo.hlo_module_from_text(CALL_START)  # real HLO
    ks = kernels(parse_module(CALL_START), platform="gpu")
    assert [(k.name, k.route) for k in ks] == [("cs", "control"), ("e", "emitter")]
    assert ks[1].context.startswith("cs ")
