"""Loading and compiling user code (analysis.compile): each failure is an ExplorerError with the
phase it happened in and, where the user's code is at fault, the line in that code."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from analysis.errors import ExplorerError  # noqa: E402
from analysis.compile.backend import select_device  # noqa: E402
from analysis.compile.load import load_source  # noqa: E402
from analysis.compile.stages import compile_model  # noqa: E402
from analysis.options import parse_options  # noqa: E402

INPUTS = "\ndef example_inputs():\n    return (jnp.ones((3, 4)), jnp.ones((5, 6)))\n"


def fails(phase, fn, *args, **kw) -> ExplorerError:
    with pytest.raises(ExplorerError) as ei:
        fn(*args, **kw)
    e = ei.value
    assert e.phase == phase, e.one_line()
    assert "\n" not in e.one_line()
    return e


def line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


def test_syntax_error():
    src = "import jax\n\ndef model(x):\n    return (x +\n"
    e = fails("syntax", load_source, src, "user.py")
    assert e.file == "user.py" and e.line is not None and 4 <= e.line <= 5


def test_null_bytes_are_a_syntax_error():
    fails("syntax", load_source, "x = 1\x00\n", "user.py")


def test_import_errors():
    e = fails("import", load_source, "import jax\nimport no_such_module_xyz\n", "user.py")
    assert e.line == 2 and "no_such_module_xyz" in e.message
    e = fails("import", load_source, "x = 1\ny = 1 / 0\n", "user.py")
    assert e.line == 2 and "ZeroDivisionError" in e.message
    e = fails("import", load_source, "import sys\nsys.exit(3)\n", "user.py")  # not the test run's exit
    fails("import", load_source, "x = 1\n", "user.py")  # no model
    fails("import", load_source, "def model(x): return x\n", "user.py")  # no example_inputs


def test_input_errors():
    src = "import jax.numpy as jnp\ndef model(x): return x\ndef example_inputs():\n    return {'a': 1} + 1\n"
    e = fails("inputs", load_source, src, "user.py")
    assert e.line == 4
    src = "def model(x): return x\ndef example_inputs():\n    return ('not an array',)\n"
    e = fails("inputs", load_source, src, "user.py")
    # none of the file's frames raised it: the line that defines example_inputs
    assert e.line == 2 and "got str" in e.message


def test_an_error_jax_raises_with_no_user_frame_is_at_the_line_that_binds_model():
    """``model`` is a library function bound with ``partial``: JAX's refusal has none of the file's
    frames on its stack, and the line is the one binding ``model``."""
    src = ("import functools\nimport jax.numpy as jnp\n\nmodel = functools.partial(jnp.reshape, shape=(7,))\n"
           "\n\ndef example_inputs():\n    return (jnp.ones((2, 3)),)\n")
    e = fails("trace", compile_model, load_source(src, "/tmp/bound.py", "bound"), "cpu")
    assert e.line == 4 and "reshape" in (e.excerpt or "") and "size 6" in e.message


def test_a_keras_variable_handed_to_jit_is_at_the_line_that_binds_model():
    """A program written for a JAX that converted a Keras Variable by itself (``__jax_array__``):
    JAX 0.12 refuses it while tracing, from inside JAX only; the one line names where ``model`` is."""
    pytest.importorskip("keras")
    import jax

    if tuple(int(p) for p in jax.__version__.split(".")[:2]) < (0, 12):
        pytest.skip("this JAX still converts the Variable itself")
    src = ("import functools\n\nimport jax.numpy as jnp\nimport keras\n\n"
           "net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8)])\n"
           "model = functools.partial(jnp.matmul, net.trainable_variables[0])\n\n\n"
           "def example_inputs():\n    return (jnp.ones((8, 2)),)\n")
    e = fails("trace", compile_model, load_source(src, "/tmp/drift.py", "drift"), "cpu")
    assert e.line == 7 and "__jax_array__" in e.message


def test_the_line_a_name_is_bound_at():
    from analysis.compile.user_errors import defined_at

    src = ("import jax\n\n\n@jax.jit\ndef model(x):\n    return x\n\n\nclass example_inputs:\n    pass\n\n\n"
           "model = jax.jit(lambda x: x)\n")
    assert defined_at(src, "model") == 13  # the last binding is what python FILE leaves
    assert defined_at(src, "example_inputs") == 9
    assert defined_at(src.replace("model = jax", "other = jax"), "model") == 4  # a decorated def: its decorator
    assert defined_at(src, "absent") is None
    assert defined_at("def model(:\n", "model") is None and defined_at(None, "model") is None


def test_trace_error_points_at_the_users_line():
    src = ("import jax.numpy as jnp\n\n\ndef model(x, w):\n    y = x * 2\n    z = y @ w\n    return z\n"
           + INPUTS)
    loaded = load_source(src, "/tmp/user_model.py", "user_model")
    e = fails("trace", compile_model, loaded, "cpu")
    assert e.file == "/tmp/user_model.py"
    assert e.line == line_of(src, "y @ w")
    assert "y @ w" in (e.excerpt or "")


def test_trace_error_in_a_helper_points_at_the_innermost_user_line():
    src = ("import jax.numpy as jnp\n\ndef helper(a, b):\n    return jnp.dot(a, b)\n\n"
           "def model(x, w):\n    return helper(x, w)\n" + INPUTS)
    e = fails("trace", compile_model, load_source(src, "m.py", "m"), "cpu")
    assert e.line == line_of(src, "jnp.dot(a, b)")


def test_gpu_backend_on_a_cpu_machine():
    import jax

    if any(d.platform != "cpu" for d in jax.devices()):
        pytest.skip("this machine has an accelerator")
    fails("options", select_device, "gpu")
    src = "import jax.numpy as jnp\ndef model(x): return x + 1\ndef example_inputs(): return (jnp.ones(3),)\n"
    fails("options", compile_model, load_source(src, "m.py", "m"), "gpu")
    fails("options", select_device, "tpu-ish")


def test_parse_options():
    assert parse_options(["a=true", "b=False", "c=12", "d=-3", "e=fusion,cpu", "f=x=y"]) == {
        "a": True, "b": False, "c": 12, "d": -3, "e": "fusion,cpu", "f": "x=y"}
    fails("options", parse_options, ["novalue"])
    fails("options", parse_options, ["=1"])


def test_compiled_bundle_records_what_was_asked(gallery_bundle):
    b = gallery_bundle("mlp")
    assert b.options == {"backend": "cpu", "compiler_options": {}}
    assert b.source["kind"] == "gallery" and "def model" in b.source["code"]
    assert [i["shape"] for i in b.source["inputs"]] == [[128, 256], [256, 512], [512], [512, 128], [128]]
    assert set(b.phase_seconds) == {"trace", "lower", "compile", "analyze"}
    assert b.environment["backend"] == "cpu" and b.environment["jax"]


STACKED = '''
import jax
import jax.numpy as jnp


def model(x, w):
    with jax.named_scope("outer"):
        y = jnp.tanh(x @ w)
    return jnp.sum(y * 2.0, axis=0)


def example_inputs():
    return (jnp.ones((8, 16)), jnp.ones((16, 4)))
'''


def test_the_hlo_before_optimization_is_the_module_xla_started_from():
    """It is read from XLA's own dump (``before_optimizations``), not converted a second time:
    JAX's conversion of the same lowering is the oracle. Same instructions in the same order,
    the same op names, the source lines kept, the text parsed beside the compile."""
    import jax

    from analysis.hlo import parse_module

    loaded = load_source(STACKED, "m.py", "m")
    b = compile_model(loaded, "cpu").bundle
    lowered = jax.jit(loaded.model).trace(*loaded.inputs).lower()
    oracle = parse_module(lowered.as_text(dialect="hlo", debug_info=True))
    mine = b.module("hlo_before")
    assert b.cache.parses["hlo_before"][0] is b.stages["hlo_before"]
    assert [(i.name, i.opcode) for i in mine.entry.instructions] == \
        [(i.name, i.opcode) for i in oracle.entry.instructions]
    assert [i.metadata.op_name for i in mine.entry.instructions] == \
        [i.metadata.op_name for i in oracle.entry.instructions]
    tanh = next(i for i in mine.entry.instructions if i.opcode == "tanh")
    assert tanh.metadata.op_name.endswith("outer/tanh")
    assert tanh.metadata.source.line == line_of(STACKED, "jnp.tanh(x @ w)")


def test_without_a_dump_the_hlo_before_optimization_is_converted_here(tmp_path):
    from analysis.compile import stages

    assert stages.before_optimizations(str(tmp_path)) is None
    (tmp_path / "module_0001.jit_other.before_optimizations.txt").write_text("HloModule jit_other\n")
    (tmp_path / "module_0002.jit_m.before_optimizations.txt").write_text("HloModule jit_m\n")
    assert stages.before_optimizations(str(tmp_path), "HloModule jit_m, is_scheduled=true") == "HloModule jit_m\n"
    loaded = load_source(STACKED, "m.py", "m")
    c = stages.compile_loaded(loaded, "cpu", {}, None, "code", None, {})  # no xla_dump_to: JAX converts it
    assert c.bundle.stages["hlo_before"].startswith("HloModule jit_model")
    assert any(i.opcode == "tanh" for i in c.bundle.module("hlo_before").entry.instructions)
