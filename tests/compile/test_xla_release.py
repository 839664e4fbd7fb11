"""The dump options of ``analysis.compile.xla_release`` on the installed jax: a loop's module
dumped by XLA is the one ``compiled.as_text()`` prints, and each CPU kernel's LLVM IR is
written. Both parse, with XLA's own parser as the oracle."""

import os

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from analysis.compile.xla_release import DUMP_OPTIONS  # noqa: E402
from analysis.hlo import parse_module  # noqa: E402
from analysis.pipeline import same_module_text  # noqa: E402


def _loop(x):
    def body(carry, row):
        return carry * 2.0 + row, jnp.tanh(carry)
    return jax.lax.scan(body, x[0], x)


def _compile(tmp_path, **extra):
    lowered = jax.jit(_loop).lower(jnp.ones((8, 16), jnp.float32))
    compiled = lowered.compile(compiler_options={"xla_dump_to": str(tmp_path), **DUMP_OPTIONS, **extra})
    return compiled, sorted(os.listdir(tmp_path))


def _after(tmp_path, names):
    (name,) = [n for n in names if n.endswith("cpu_after_optimizations.txt")]
    return (tmp_path / name).read_text()


def test_a_loop_s_dumped_module_is_the_one_as_text_prints(tmp_path):
    # (up to the order of a backend_config's JSON fields, which the pipeline allows for)
    compiled, names = _compile(tmp_path)
    dumped = _after(tmp_path, names)
    assert same_module_text(parse_module(dumped), dumped, compiled.as_text())


def test_each_emitted_cpu_kernel_s_llvm_ir_is_dumped(tmp_path):
    _, names = _compile(tmp_path)
    objects = [n for n in names if n.endswith(".o")]
    before = [n for n in names if n.endswith(".ir-no-opt.ll")]
    after = [n for n in names if n.endswith(".ir-with-opt.ll")]
    assert objects, names  # the loop's body and condition are XLA's own kernels
    assert len(before) == len(after) == len(objects), names


def test_the_short_tuple_element_form_xla_dumps_parses_as_xla_parses_it(tmp_path):
    xla_hlo = pytest.importorskip("jaxlib._hlo")
    if "xla_dump_compact_gte" not in DUMP_OPTIONS:
        pytest.skip("this XLA release has no short form of get-tuple-element")
    # what a user's own dump holds (XLA's default): '%t#1' operands, no get-tuple-element lines
    _, names = _compile(tmp_path, xla_dump_compact_gte=True)
    text = _after(tmp_path, names)
    assert "#1" in text
    ours = parse_module(text)
    theirs = xla_hlo.hlo_module_from_text(text)
    for comp in theirs.computations():
        want = [(i.name, str(i.opcode).rsplit(".k", 1)[-1].lower(), [o.name for o in i.operands()])
                for i in comp.instructions()]
        got = [(i.name, i.opcode.replace("-", ""), i.operands)
               for i in ours.by_name[comp.name].instructions]
        assert sorted(got) == sorted(want), comp.name
