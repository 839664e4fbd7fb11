"""Models written with Flax (NNX and Linen), Equinox and Keras 3: the parameters become inputs of
the compiled program (never constants), errors are one line at the user's code, and the op names
each library emits give the layer tree (``analysis.layers``)."""

from __future__ import annotations

import json
import os

import pytest

from analysis.hlo import parse_module
from analysis.layers import layer_path, layer_tree

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURED = json.load(open(os.path.join(HERE, "fixtures", "layers", "op_names.json")))


# ----------------------------------------------------------------------------- layer paths (pure)

@pytest.mark.parametrize("op_name, path", [
    ("jit(nnx_program)/attn/q_proj/dot_general", ("attn", "q_proj")),  # Flax NNX (scopes from our split)
    ("jit(nnx_program)/attn/transpose;jit(nnx_program)/attn/transpose", ("attn",)),  # merged names
    ("jit(model)/Net/conv1/conv_general_dilated", ("Net", "conv1")),  # Flax Linen names its modules
    ("jit(keras_program)/hidden/dot_general", ("hidden",)),  # Keras names its layers
    ("jit(eqx_program)/eqx.nn.MLP/layers[0]/eqx.nn.Linear/dot_general",
     ("eqx.nn.MLP", "layers[0]", "eqx.nn.Linear")),
    ("jit(f)/transpose(jvp(jit(f)))/dense1/dot_general", ("dense1",)),  # a backward pass: wrappers dropped
    ("jit(f)/vmap()/jit(_where)/select_n", ()),
    ("add", ()),  # an op of a nested computation, named relative to its call
])
def test_layer_path_of_an_op_name(op_name, path):
    assert layer_path(op_name) == path


@pytest.mark.parametrize("model, layers", [
    ("decoder_nnx", {("attn",), ("attn", "q_proj"), ("attn", "k_proj"), ("attn", "v_proj"), ("attn", "o_proj"),
                     ("attn_norm",), ("mlp",), ("mlp", "gate"), ("mlp", "up"), ("mlp", "down"), ("mlp_norm",)}),
    ("cnn_linen", {("Net",), ("Net", "conv1"), ("Net", "conv2"), ("Net", "head")}),
    ("keras_mlp", {("hidden",), ("norm",), ("logits",)}),
])
def test_captured_op_names_give_the_model_layers(model, layers):
    """Op names captured from real compiles of each library (tests/fixtures/layers/op_names.json,
    with the versions that made them): the layers found are the model's own."""
    found = {layer_path(n) for n in CAPTURED["op_names"][model] if "/" in n}
    found = {p[:i] for p in found for i in range(1, len(p) + 1)}
    assert found == layers, sorted(found ^ layers)


TREE_HLO = """HloModule m
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %a = f32[4]{0} negate(%x), metadata={op_name="jit(f)/enc/l1/neg"}
  %b = f32[4]{0} exponential(%a), metadata={op_name="jit(f)/enc/l1/exp"}
  %c = f32[4]{0} tanh(%b), metadata={op_name="jit(f)/enc/l2/tanh"}
  %d = f32[4]{0} add(%c, %x), metadata={op_name="jit(f)/enc/add"}
  ROOT %e = f32[4]{0} sine(%d), metadata={op_name="jit(f)/sin"}
}
"""


def test_layer_tree_of_a_hand_written_module():
    root = layer_tree(parse_module(TREE_HLO))
    assert root.ops == ["e"]
    enc = root.children["enc"]
    assert enc.ops == ["d"] and list(enc.children) == ["l1", "l2"]
    assert enc.children["l1"].ops == ["a", "b"] and enc.children["l2"].ops == ["c"]
    assert sorted(enc.all_ops()) == ["a", "b", "c", "d"]
    assert root.find(("enc", "l2")).path == ("enc", "l2") and root.find(("nope",)) is None


# ----------------------------------------------------------------------------- compiles (JAX)

NNX_SRC = '''
import jax, jax.numpy as jnp
from flax import nnx

class Block(nnx.Module):
    def __init__(self, rngs):
        self.proj = nnx.Linear(16, 32, rngs=rngs)
        self.out = nnx.Linear(32, 8, rngs=rngs)
    def __call__(self, x):
        return self.out(jax.nn.relu(self.proj(x)))

model = Block(nnx.Rngs(0))

def example_inputs():
    return (jnp.ones((4, 16), jnp.float32),)
'''

EQX_SRC = '''
import equinox as eqx, jax, jax.numpy as jnp
model = eqx.nn.MLP(in_size=16, out_size=8, width_size=32, depth=1, key=jax.random.key(0))
def example_inputs():
    return (jnp.ones((16,), jnp.float32),)
'''

KERAS_SRC = '''
import jax.numpy as jnp, keras
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu", name="proj"),
                          keras.layers.Dense(8, name="out")])
def example_inputs():
    return (jnp.ones((4, 16), jnp.float32),)
'''

def _need(dist: str) -> None:
    """Skip where the library is not installed (checked without importing it: Keras must first be
    told its backend, which loading the model does)."""
    import importlib.util

    if importlib.util.find_spec("jax") is None or importlib.util.find_spec(dist) is None:
        pytest.skip(f"{dist} (or jax) is not installed here")


# (source, library, parameter arrays: two dense layers' kernels and biases)
LIBRARIES = {"flax.nnx": (NNX_SRC, "flax"), "equinox": (EQX_SRC, "equinox"), "keras": (KERAS_SRC, "keras")}


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_parameters_are_inputs_of_the_program(library, source_bundle):
    src, dist = LIBRARIES[library]
    _need(dist)
    b = source_bundle(src, library.replace(".", "_"))
    assert b.source["library"] == library and b.source["parameters"] == 4
    pre = b.module("hlo_before")
    params = [i for i in pre.entry.instructions if i.opcode == "parameter"]
    assert len(params) == 4 + 1  # the two layers' weights and biases, and the input
    # the weights are parameters of the program: no constant as large as a weight is left
    big = [i for i in pre.instructions() if i.opcode == "constant" and i.shape.num_elements >= 16 * 32]
    assert big == []
    assert b.kernels and b.metrics["kernels_after"] >= 2


def test_nnx_layers_become_name_scopes(source_bundle):
    _need("flax")
    b = source_bundle(NNX_SRC, "flax_nnx")
    layers = {layer_path(i.metadata.op_name) for i in b.module("hlo_before").instructions() if i.metadata.op_name}
    assert {("proj",), ("out",)} <= layers


def test_an_error_inside_a_module_names_the_users_line():
    _need("flax")
    from analysis.compile.load import load_source
    from analysis.compile.stages import compile_model
    from analysis.errors import ExplorerError

    src = NNX_SRC.replace("return self.out(jax.nn.relu(self.proj(x)))", "return self.out(x)  # 16 != 32")
    with pytest.raises(ExplorerError) as info:
        compile_model(load_source(src, "<nnx>", "nnx"), "cpu")
    e = info.value
    assert e.phase == "trace" and e.file == "<nnx>"
    assert e.line == src.splitlines().index("        return self.out(x)  # 16 != 32") + 1


def test_gallery_library_models_compile_with_their_parameters_as_inputs(gallery_bundle):
    _need("flax")
    for name, n_params in (("decoder_nnx", 9), ("keras_mlp", 6)):
        b = gallery_bundle(name)
        assert b.source.get("library") in ("flax.nnx", "keras") and b.source["parameters"] == n_params
        params = [i for i in b.module("hlo_before").entry.instructions if i.opcode == "parameter"]
        assert len(params) == n_params + 1


@pytest.mark.sandbox
@pytest.mark.parametrize("library", list(LIBRARIES))
def test_pasted_library_code_compiles_in_the_sandbox(library):
    """As a student pastes it in the app: in the bubblewrap worker, which can import the library."""
    src, dist = LIBRARIES[library]
    _need(dist)
    from analysis.service import sandbox
    from analysis.service.job import Job
    from analysis.service.worker import run_job

    isolated, why = sandbox.sandbox_status()
    if not isolated:
        pytest.skip(f"bubblewrap cannot run here: {why}")
    ran = run_job(Job(source=src, name="pasted"))
    assert ran.isolated and ran.bundle.source["library"] == library and ran.bundle.kernels


def test_cli_prints_the_layer_tree(capsys):
    _need("flax")
    from analysis.cli import main

    assert main(["layers", "decoder_nnx", "--backend", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [ln.strip().split(":")[0] for ln in lines]
    assert names[0] == "(model)" and {"attn", "q_proj", "attn_norm", "mlp", "gate", "mlp_norm"} <= set(names)
    attn = next(ln for ln in lines if ln.strip().startswith("attn:"))
    assert "ops ->" in attn and "kernels" in attn
