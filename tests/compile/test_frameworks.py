"""Models written with Flax (NNX and Linen), Equinox and Keras 3: the parameters become inputs of
the compiled program (never constants), errors are one line at the user's code, and the op names
each library emits give the layer tree (``analysis.program.layers``)."""

from __future__ import annotations

import json
import os
import sys

import pytest

from analysis.hlo import parse_module
from analysis.program.layers import layer_path, layer_tree
from tests.paths import FIXTURES

# an optimizer's update is named where Python reports its functions' calls (3.12+)
NAMED_UPDATES = pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python 3.11 has no sys.monitoring: the "
                                   "update stays unnamed (frameworks.optimizer_scopes)")
CAPTURED = json.load(open(os.path.join(FIXTURES, "layers", "op_names.json")))


# ----------------------------------------------------------------------------- layer paths (pure)

@pytest.mark.parametrize("op_name, path", [
    ("jit(nnx_program)/attn/q_proj/dot_general", ("attn", "q_proj")),  # Flax NNX (scopes from our split)
    ("jit(nnx_program)/attn/transpose;jit(nnx_program)/attn/transpose", ("attn",)),  # merged names
    ("jit(model)/Net/conv1/conv_general_dilated", ("Net", "conv1")),  # Flax Linen names its modules
    ("jit(keras_program)/hidden/dot_general", ("hidden",)),  # Keras names its layers
    # Equinox's own class scopes inside the attribute names the split gives: the attributes stay
    ("jit(eqx_program)/eqx.nn.MLP/layers[0]/eqx.nn.Linear/dot_general", ("eqx.nn.MLP", "layers[0]")),
    ("jit(eqx_program)/cell/eqx.nn.GRUCell/tanh", ("cell",)),
    # an einsum's spec and a module scoping its call under its own name again are not layers
    ("jit(model)/LM/Block_0/SelfAttention_0/SelfAttention_0/...qhd,...khd->...hqk/dot_general",
     ("LM", "Block_0", "SelfAttention_0")),
    # a scanned stack of layers: the loop's scopes are where the op ran, not layers
    ("jit(nnx_program)/while/body/closed_call/blocks/linear/dot_general", ("blocks", "linear")),
    ("jit(nnx_program)/while/cond/lt", ()),
    # jax 0.12 evaluates a scan's body under eval_jaxpr
    ("jit(model)/rnn/while/body/eval_jaxpr/tanh", ("rnn",)),
    ("jit(f)/drop/jit(_threefry_fold_in)/RngStream.__call__/while/body/closed_call/xor", ("drop",)),
    ("jit(f)/cond/branch_1_fun/gate/mul", ("gate",)),  # lax.cond's branches
    ("jit(f)/body/cond/add", ("body", "cond")),  # a user's own scopes that only look like JAX's
    ("jit(f)/transpose(jvp(jit(f)))/dense1/dot_general", ("dense1",)),  # a backward pass: wrappers dropped
    ("jit(f)/vmap()/jit(_where)/select_n", ()),
    ("add", ()),  # an op of a nested computation, named relative to its call
    # PyTorch through torchax: the modules' names, then the op torch dispatched (no layer, nor below it)
    ("jit(Net)/blocks.0/torch::linear/...a,ba->...b/dot_general", ("blocks.0",)),
    ("jit(Encoder)/layers.1/attn/aten::_safe_softmax/aten::softmax.int/exp", ("layers.1", "attn")),
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


# A scan over a stack of two layers, as JAX lowers ``lax.scan``/``nnx.scan``: the loop's body
# indexes the stacked weight (its own ops) and runs the layer ``block`` (entered inside the
# body), whose ``dense`` sub-layer holds the dot. The counter runs from 1 to 4: 3 iterations.
LOOP_HLO = """HloModule m
%cond (p: (s32[], f32[4], f32[3,4])) -> pred[] {
  %p = (s32[], f32[4], f32[3,4]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(%i, %n), direction=LT, metadata={op_name="jit(f)/while/cond/lt"}
}
%body (p: (s32[], f32[4], f32[3,4])) -> (s32[], f32[4], f32[3,4]) {
  %p = (s32[], f32[4], f32[3,4]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %h = f32[4] get-tuple-element(%p), index=1
  %ws = f32[3,4] get-tuple-element(%p), index=2
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one), metadata={op_name="jit(f)/while/body/add"}
  %z = s32[] constant(0)
  %w = f32[1,4] dynamic-slice(%ws, %i, %z), dynamic_slice_sizes={1,4}, metadata={op_name="jit(f)/while/body/dynamic_slice"}
  %wr = f32[4] reshape(%w), metadata={op_name="jit(f)/while/body/reshape"}
  %m = f32[4] multiply(%h, %wr), metadata={op_name="jit(f)/while/body/block/dense/mul"}
  %t = f32[4] tanh(%m), metadata={op_name="jit(f)/while/body/block/tanh"}
  ROOT %out = (s32[], f32[4], f32[3,4]) tuple(%next, %t, %ws)
}
ENTRY %main (x: f32[4], ws: f32[3,4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %ws = f32[3,4] parameter(1)
  %start = s32[] constant(1)
  %init = (s32[], f32[4], f32[3,4]) tuple(%start, %x, %ws)
  %loop = (s32[], f32[4], f32[3,4]) while(%init), condition=%cond, body=%body, metadata={op_name="jit(f)/while"}
  %h = f32[4] get-tuple-element(%loop), index=1
  ROOT %y = f32[4] sine(%h), metadata={op_name="jit(f)/head/sin"}
}
"""


def test_a_scanned_layer_is_one_layer_with_its_repeat_count():
    from analysis.program.provenance import op_count

    pre = parse_module(LOOP_HLO)
    root = layer_tree(pre)
    assert list(root.children) == ["block", "head"]  # no "while", "body" or "cond" layers
    block = root.children["block"]
    assert block.repeats == 3 and root.children["head"].repeats is None
    assert block.children["dense"].ops == ["m"] and block.children["dense"].repeats is None
    # the loop's own ops (its while, counter and indexing of the stacked weight) are the
    # repeated layer's; the loop's condition too
    assert sorted(block.ops) == sorted(["t", "loop", "next", "w", "wr", "lt"])
    assert root.ops == []
    # every op of the program is in the tree exactly once
    assert len(root.all_ops()) == op_count(pre) == 8  # lt, next, w, wr, m, t, loop and y


def test_a_loop_whose_count_is_not_read_is_marked_without_one():
    from analysis.program.layers import trip_count

    text = LOOP_HLO.replace("%start = s32[] constant(1)", "%start = s32[] negate(%x0)").replace(
        "%x = f32[4] parameter(0)", "%x = f32[4] parameter(0)\n  %x0 = s32[] constant(2)")
    pre = parse_module(text)
    assert trip_count(pre, pre.entry.by_name["loop"]) is None
    assert layer_tree(pre).children["block"].repeats == 0
    assert trip_count(parse_module(LOOP_HLO), parse_module(LOOP_HLO).entry.by_name["loop"]) == 3


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
    assert names[0] == "(program)" and {"attn", "q_proj", "attn_norm", "mlp", "gate", "mlp_norm"} <= set(names)
    attn = next(ln for ln in lines if ln.strip().startswith("attn:"))
    assert "ops ->" in attn and "kernels" in attn


NNX_STATE_SRC = '''
import jax, jax.numpy as jnp
from flax import nnx

class Encoder(nnx.Module):
    def __init__(self, rngs):
        self.proj = nnx.Linear(8, 4, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)
        self.bn = nnx.BatchNorm(4, rngs=rngs)          # training mode: updates its statistics
        self.kl_loss = nnx.Variable(jnp.zeros(()))

    def __call__(self, x):
        h = self.bn(self.drop(self.proj(x)))
        self.kl_loss[...] = jnp.mean(h ** 2)            # state the call sets
        return h

model = Encoder(nnx.Rngs(0, dropout=1))

def example_inputs():
    return (jnp.ones((2, 8)),)
'''


def test_nnx_state_the_call_changes_is_returned_and_said(source_bundle):
    """BatchNorm's statistics, the dropout stream's counter and ``self.kl_loss = ...`` change in
    the call: the program returns their new values beside its output (as nnx.jit hands them
    back) and the bundle says which, in one line; the parameters it only reads are not among them."""
    _need("flax")
    b = source_bundle(NNX_STATE_SRC, "nnx_state")
    changed = {c["path"]: c["type"] for c in b.source["state_changes"]}
    assert changed == {"bn/mean": "BatchStat", "bn/var": "BatchStat", "drop/rngs/count": "RngCount",
                       "kl_loss": "Variable"}
    from analysis.render.summary import state_note, summary_text

    note = state_note(b)
    assert "\n" not in note and "bn/mean" in note and "kl_loss" in note and "output" in note
    assert note in summary_text(b)  # the CLI's summary says it
    # the output h (2x4) and the four new values are the program's results
    root = b.module("hlo_before").entry.root
    assert root.opcode == "tuple" and len(root.operands) == 5
    # a module whose call changes nothing returns just its output, with no note
    plain = source_bundle(NNX_SRC, "flax_nnx")
    assert "state_changes" not in plain.source and plain.module("hlo_before").entry.root.opcode != "tuple"


# ----------------------------------------------------------------- list and dict items, optimizers

NNX_CONTAINERS_SRC = '''
import jax.numpy as jnp
from flax import nnx

class Net(nnx.Module):
    def __init__(self, rngs):
        self.layers = nnx.List([nnx.Linear(4, 4, rngs=rngs) for _ in range(2)])
        self.blocks = nnx.Dict({"attn": nnx.Linear(4, 4, rngs=rngs)})
        self.grid = nnx.List([nnx.List([nnx.Linear(4, 4, rngs=rngs), nnx.Linear(4, 4, rngs=rngs)])])

    def __call__(self, x):
        for layer in self.layers:
            x = jnp.tanh(layer(x))
        x = self.blocks["attn"](x)
        return self.grid[0][1](self.grid[0][0](x))

model = Net(nnx.Rngs(0))
def example_inputs():
    return (jnp.ones((2, 4)),)
'''


def test_nnx_list_and_dict_items_are_layers_named_as_the_code_reads_them(source_bundle):
    _need("flax")
    from analysis.program.layers import layers_of_bundle
    from analysis.render.layer_graph import layer_maps, layer_variants
    from analysis.render.layers import layer_lines

    b = source_bundle(NNX_CONTAINERS_SRC, "nnx_containers")
    root = layers_of_bundle(b)
    # in the order the call runs them; the containers themselves are no layers
    assert list(root.children) == ["layers[0]", "layers[1]", "blocks['attn']", "grid[0][0]", "grid[0][1]"]
    assert all(root.children[n].kernels or root.children[n].shared for n in root.children)
    assert any(line.startswith("  blocks['attn']: 6 ops") for line in layer_lines(root))
    maps = layer_maps(b)
    assert "L:blocks['attn']" in maps["boxes"] and maps["order"][0] == "L:layers[0]"
    # the DOT text of the layers view quotes the names Graphviz reads
    dot = layer_variants(b, names=["layers"])["post"]["layers"].to_dot()
    assert '"L:blocks[\'attn\']" [id="L:blocks[\'attn\']", label="blocks[\'attn\']\\n' in dot


OPTAX_STEP_SRC = '''
import jax, jax.numpy as jnp, optax

tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))

def loss_fn(params, x):
    with jax.named_scope("dense"):
        return jnp.sum(jnp.tanh(x @ params["w"]) ** 2)

def train_step(params, opt_state, x):
    grads = jax.grad(loss_fn)(params, x)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

model = train_step
def example_inputs():
    params = {"w": jnp.ones((4, 3))}
    return params, tx.init(params), jnp.ones((2, 4))
'''

NNX_OPTIMIZER_SRC = '''
import jax.numpy as jnp, optax
from flax import nnx

net = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
optimizer = nnx.Optimizer(net, optax.sgd(0.1, momentum=0.9), wrt=nnx.Param)

def train_step(model, optimizer, x):
    grads = nnx.grad(lambda m: jnp.sum(m(x) ** 2))(model)
    optimizer.update(model, grads)

model = train_step
def example_inputs():
    return net, optimizer, jnp.ones((2, 4))
'''


@NAMED_UPDATES
def test_an_optax_update_is_a_layer_named_after_the_optimizer(source_bundle):
    _need("optax")
    import sys

    from analysis.program.layers import layers_of_bundle

    b = source_bundle(OPTAX_STEP_SRC, "optax_step")
    root = layers_of_bundle(b)
    # the chain's state holds adam's moments: the update is "adam", each transformation in it by
    # the optax function that made it (adam's constant learning rate is a `scale`)
    assert list(root.children) == ["dense", "adam", "apply_updates"]
    assert list(root.children["adam"].children) == ["clip_by_global_norm", "scale_by_adam", "scale"]
    assert any(sub.kernels for sub in root.children["adam"].walk())
    # nothing is left registered with Python's monitoring once the program is traced
    assert all(sys.monitoring.get_tool(i) is None for i in (2, 3, 4, 5))


@NAMED_UPDATES
def test_nnx_optimizer_update_is_a_layer_named_after_its_optimizer(source_bundle):
    _need("flax")
    from analysis.program.layers import layers_of_bundle

    root = layers_of_bundle(source_bundle(NNX_OPTIMIZER_SRC, "nnx_optimizer"))
    # sgd with momentum keeps a trace: "momentum"; the step's parameter update is in it
    assert list(root.children) == ["momentum"]
    assert list(root.children["momentum"].children) == ["trace", "scale", "apply_updates"]
