"""Training steps as people write them (issue #50): a function handed Flax NNX modules, an
``nnx.Optimizer`` and metrics is compiled as ``nnx.jit`` runs it, so the program holds the update,
the optimizer's moments, BatchNorm statistics, RNG counts and metric totals as outputs (under a
plain ``jax.jit`` they were none and XLA deleted them); a step that returns nothing still shows
its work; a program with no output at all says so in one line, in every command; a Flax Linen
module object is initialized and applied as Linen's examples do; a Keras stateless step may be
handed its variables. Every expected value is worked from the programs below, never from the
tool's output."""

from __future__ import annotations

import pytest

from analysis.bundle.core import bundle_from_hlo
from analysis.errors import ExplorerError
from analysis.render.summary import empty_note, state_note, summary_html, summary_text

# ----------------------------------------------------------------------------- the programs

# A tagger trained one step: 2 Linear layers (kernel, bias) and a BatchNorm (scale, bias) are 6
# parameter arrays; the BatchNorm's mean and var, the dropout stream's key and count are the
# module's other 4 variables. Adam's state: its count, mu and nu for each of the 6 parameters,
# and the optimizer's step (14). Two averaged metrics: a total and a count each (4).
NNX_STEP = '''
import jax, jax.numpy as jnp, optax
from flax import nnx

class Tagger(nnx.Module):
    def __init__(self, rngs):
        self.embed = nnx.Linear(12, 24, rngs=rngs)
        self.norm = nnx.BatchNorm(24, rngs=rngs)
        self.dropout = nnx.Dropout(0.1, rngs=rngs)
        self.classify = nnx.Linear(24, 5, rngs=rngs)

    def __call__(self, x):
        return self.classify(self.dropout(jax.nn.gelu(self.norm(self.embed(x)))))

tagger = Tagger(nnx.Rngs(params=0, dropout=1))
optimizer = nnx.Optimizer(tagger, optax.adam(3e-4), wrt=nnx.Param)
metrics = nnx.MultiMetric(loss=nnx.metrics.Average("loss"), accuracy=nnx.metrics.Accuracy())

def train_step(tagger, optimizer, metrics, tokens, labels):
    def loss_fn(tagger):
        logits = tagger(tokens)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), logits
    (loss, logits), grads = nnx.value_and_grad(loss_fn, has_aux=True)(tagger)
    optimizer.update(tagger, grads)
    metrics.update(loss=loss, logits=logits, labels=labels)
    return loss

model = train_step

def example_inputs():
    return tagger, optimizer, metrics, jnp.ones((16, 12)), jnp.arange(16) % 5
'''

PARAMS = {f"tagger/{p}" for p in ("embed/kernel", "embed/bias", "norm/scale", "norm/bias", "classify/kernel",
                                  "classify/bias")}
MOMENTS = {f"optimizer/opt_state/0/{m}/{p[len('tagger/'):]}" for m in ("mu", "nu") for p in PARAMS}
CHANGED = (PARAMS | MOMENTS | {"optimizer/opt_state/0/count", "optimizer/step", "tagger/norm/mean", "tagger/norm/var",
                               "tagger/dropout/rngs/count"}
           | {f"metrics/{m}/{x}" for m in ("loss", "accuracy") for x in ("total", "count")})
STATE_ARRAYS = 6 + 4 + 14 + 4  # every variable of the three objects is an input of the program

# The MNIST tutorial's shape of step: it returns nothing, its work is the update
NNX_STEP_RETURNS_NOTHING = NNX_STEP.replace("    return loss\n\nmodel", "\nmodel")

# The tagger and a ModelAndOptimizer that holds the very same tagger: one object, its variables
# one input each, updated once
NNX_SHARED = '''
import jax, jax.numpy as jnp, optax
from flax import nnx

class Net(nnx.Module):
    def __init__(self, rngs):
        self.hidden = nnx.Linear(6, 8, rngs=rngs)
        self.out = nnx.Linear(8, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(jax.nn.relu(self.hidden(x)))

net = Net(nnx.Rngs(0))
trainer = nnx.ModelAndOptimizer(net, optax.sgd(0.1))

def model(net, trainer, x, y):
    loss, grads = nnx.value_and_grad(lambda n: ((n(x) - y) ** 2).mean())(net)
    trainer.update(grads)
    return loss

def example_inputs():
    return net, trainer, jnp.ones((4, 6)), jnp.zeros((4, 1))
'''

# A plain function that returns nothing: no state to return either
RETURNS_NOTHING = '''
import jax.numpy as jnp

def model(x):
    y = jnp.tanh(x) * 2.0

def example_inputs():
    return (jnp.ones((8, 8)),)
'''

# A Flax Linen module object: its call needs the "dropout" stream and updates batch_stats
LINEN_OBJECT = '''
import jax, jax.numpy as jnp
import flax.linen as nn

class Scorer(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(20, name="expand")(x)
        x = nn.BatchNorm(use_running_average=False, name="norm")(x)
        x = nn.Dropout(0.2, deterministic=False, name="drop")(x)
        return nn.Dense(3, name="score")(nn.relu(x))

model = Scorer()

def example_inputs():
    return (jnp.ones((10, 7)),)
'''

LINEN_PLAIN = '''
import jax.numpy as jnp
import flax.linen as nn

class Mlp(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2, name="head")(nn.tanh(nn.Dense(9, name="body")(x)))

model = Mlp()

def example_inputs():
    return (jnp.ones((3, 5)),)
'''

# Keras's own guide's stateless step, handed the variables themselves
KERAS_STEP = '''
import jax, jax.numpy as jnp, keras

net = keras.Sequential([keras.Input((6,)), keras.layers.Dense(10, activation="relu", name="hidden"),
                        keras.layers.Dense(2, name="head")])
opt = keras.optimizers.SGD(0.01)
opt.build(net.trainable_variables)

def loss_of(trainable, frozen, x, y):
    pred, frozen = net.stateless_call(trainable, frozen, x, training=True)
    return jnp.mean((pred - y) ** 2), frozen

def model(state, x, y):
    trainable, frozen, opt_vars = state
    (loss, frozen), grads = jax.value_and_grad(loss_of, has_aux=True)(trainable, frozen, x, y)
    trainable, opt_vars = opt.stateless_apply(opt_vars, grads, trainable)
    return loss, (trainable, frozen, opt_vars)

def example_inputs():
    return (net.trainable_variables, net.non_trainable_variables, opt.variables), jnp.ones((4, 6)), jnp.zeros((4, 2))
'''


def _need(*dists: str) -> None:
    import importlib.util

    for d in ("jax", *dists):
        if importlib.util.find_spec(d) is None:
            pytest.skip(f"{d} is not installed here")


def _outputs(b, stage: str = "hlo_after") -> int:
    """How many arrays the compiled program returns: its entry's ROOT tuple's elements."""
    root = b.module(stage).entry.root
    return len(root.operands) if root.opcode == "tuple" else 1


def _entry_parameters(b) -> int:
    return sum(1 for i in b.module("hlo_before").entry.instructions if i.opcode == "parameter")


def _layers(b) -> set:
    from analysis.program.layers import layer_path

    return {p for i in b.module("hlo_before").instructions() if i.metadata.op_name
            for p in [layer_path(i.metadata.op_name)] if p}


# ----------------------------------------------------------------------------- Flax NNX steps


def test_an_nnx_train_step_returns_the_state_it_changes(source_bundle):
    _need("flax", "optax")
    b = source_bundle(NNX_STEP, "nnx_step")
    assert b.source["library"] == "flax.nnx" and b.source["parameters"] == STATE_ARRAYS
    # the objects' variables and the two batches are the program's inputs
    assert _entry_parameters(b) == STATE_ARRAYS + 2
    # what the step changed, named by the argument that holds it
    changes = {c["path"]: c for c in b.source["state_changes"]}
    assert set(changes) == CHANGED
    assert all(changes[p]["optimizer"] == "adam" for p in MOMENTS)
    assert changes["tagger/norm/mean"]["type"] == "BatchStat" and not changes["tagger/norm/mean"]["new"]
    # the loss and every changed variable are outputs: XLA kept the update's work
    assert _outputs(b) == 1 + len(CHANGED)
    # the layers are the tagger's attributes, in the forward and the backward pass
    assert {("embed",), ("norm",), ("dropout",), ("classify",)} <= _layers(b)


def test_the_state_line_says_what_the_step_returns(source_bundle):
    _need("flax", "optax")
    b = source_bundle(NNX_STEP, "nnx_step")
    line = state_note(b)
    assert "\n" not in line and line.startswith("Returns the state the step changes")
    for words in ("6 parameter arrays", "optimizer state (adam: 2 moments mu and nu, step)",
                  "2 BatchNorm statistics (tagger/norm/mean, tagger/norm/var)",
                  "1 RNG count (tagger/dropout/rngs/count)", "4 metric totals"):
        assert words in line, line
    # one line, said by the CLI's summary and the report alike
    assert f"note                    : {line}" in summary_text(b)
    assert line.replace("(", "").split(":")[0] in summary_html(b)
    assert empty_note(b) is None


def test_a_step_that_returns_nothing_still_shows_its_update(source_bundle):
    """The MNIST tutorial's step returns nothing: under a plain jit that was '0 ops -> 0 kernels'."""
    _need("flax", "optax")
    b = source_bundle(NNX_STEP_RETURNS_NOTHING, "nnx_step_nothing")
    assert {c["path"] for c in b.source["state_changes"]} == CHANGED
    assert _outputs(b) == len(CHANGED)
    assert b.metrics["compute_ops_before"] > 0 and b.metrics["kernels_after"] > 0 and b.kernels
    assert empty_note(b) is None and "kernels after           : 0\n" not in summary_text(b)


def test_an_object_two_arguments_hold_is_split_once(source_bundle):
    _need("flax", "optax")
    b = source_bundle(NNX_SHARED, "nnx_shared")
    # Net's 4 parameter arrays once (the trainer holds the same net), the trainer's step (sgd
    # keeps no moments), x and y
    assert b.source["parameters"] == 4 + 1 and _entry_parameters(b) == 4 + 1 + 2
    changed = {c["path"] for c in b.source["state_changes"]}
    # (a ModelAndOptimizer is an nnx.Optimizer: its step is its own)
    assert changed == {f"net/{p}" for p in ("hidden/kernel", "hidden/bias", "out/kernel", "out/bias")} | \
        {"trainer/step"}
    assert _outputs(b) == 1 + 5
    assert "optimizer state (step)" in state_note(b) and "4 parameter arrays" in state_note(b)


def test_a_step_that_uses_an_object_it_was_not_handed_is_one_line():
    """Under jit such an update could not be returned: Flax refuses it, and the line says what to do."""
    _need("flax", "optax")
    from analysis.compile.load import load_source
    from analysis.compile.stages import compile_model

    src = NNX_SHARED.replace("def model(net, trainer, x, y):", "def model(x, y):").replace(
        "return net, trainer, jnp.ones", "return jnp.ones")
    with pytest.raises(ExplorerError) as info:
        compile_model(load_source(src, "<closure>", "closure"), "cpu")
    e = info.value
    assert e.phase == "trace" and e.line == src.splitlines().index(
        "    loss, grads = nnx.value_and_grad(lambda n: ((n(x) - y) ** 2).mean())(net)") + 1
    text = e.one_line()
    assert "\n" not in text and "hand it to `model` as an argument" in text and "Param(" not in text


# ----------------------------------------------------------------------------- nothing returned


def test_a_program_that_returns_nothing_says_so(source_bundle):
    _need()
    b = source_bundle(RETURNS_NOTHING, "returns_nothing")
    note = empty_note(b)
    assert note is not None and "\n" not in note and note.startswith("The program returns nothing")
    assert f"note                    : {note}" in summary_text(b)
    assert "returns nothing" in summary_html(b)
    from analysis.render.code_text import code_text

    with pytest.raises(ExplorerError) as info:
        code_text(b)
    assert info.value.message == note  # not "an HLO text, or a bundle made before schema 6"


EMPTY_HLO = """HloModule empty
ENTRY %main (x: f32[4]) -> () {
  %x = f32[4]{0} parameter(0)
  ROOT %tuple = () tuple()
}
"""

ONE_OUTPUT_HLO = EMPTY_HLO.replace("-> ()", "-> f32[4]").replace("ROOT %tuple = () tuple()",
                                                                 "ROOT %n = f32[4]{0} negate(%x)")


def test_the_empty_note_reads_the_programs_outputs():
    assert empty_note(bundle_from_hlo(EMPTY_HLO, "empty")) is not None
    assert empty_note(bundle_from_hlo(ONE_OUTPUT_HLO, "one")) is None


def test_the_state_line_from_a_written_list():
    b = bundle_from_hlo(ONE_OUTPUT_HLO, "m")
    assert state_note(b) is None
    b.source["state_changes"] = [{"path": "enc/kl", "type": "Variable", "new": True},
                                 {"path": "bn/mean", "type": "BatchStat", "new": False},
                                 {"path": 7, "type": None}, "junk"]
    line = state_note(b)
    assert line.startswith("Returns the state the call changes")  # no parameter changes: a call, not a step
    assert "1 BatchNorm statistic (bn/mean)" in line and "1 Variable variable (enc/kl (new))" in line
    assert "1 None variable (7)" in line and "junk" not in line
    b.source["state_changes"] = [{"path": f"p{i}", "type": "Param"} for i in range(500)]
    assert "500 parameter arrays" in state_note(b) and "p499" not in state_note(b)


# ----------------------------------------------------------------------------- Flax Linen objects


def test_a_linen_module_object_is_initialized_and_applied(source_bundle):
    _need("flax")
    b = source_bundle(LINEN_OBJECT, "linen_object")
    # params: expand (kernel, bias), norm (scale, bias), score (kernel, bias); batch_stats: mean, var
    assert b.source["library"] == "flax.linen" and b.source["parameters"] == 6 + 2
    paths = [i["path"] for i in b.source["inputs"]]
    assert len(paths) == 8 + 1 + 1  # the variables, the dropout stream's key, the batch
    assert paths[0].startswith("[0]") and paths[-1] == "[2]"
    assert {c["path"] for c in b.source["state_changes"]} == {"batch_stats/norm/mean", "batch_stats/norm/var"}
    assert _outputs(b) == 1 + 2  # the scores and the new batch_stats
    assert {("Scorer",), ("Scorer", "expand"), ("Scorer", "norm"), ("Scorer", "drop"), ("Scorer", "score")} <= \
        _layers(b)
    assert "2 BatchNorm statistics" in state_note(b) and "Linen" in state_note(b)


def test_a_linen_object_without_state_returns_its_output_only(source_bundle):
    _need("flax")
    b = source_bundle(LINEN_PLAIN, "linen_plain")
    assert b.source["parameters"] == 4 and _entry_parameters(b) == 4 + 1
    assert "state_changes" not in b.source and _outputs(b) == 1 and state_note(b) is None
    assert {("Mlp", "body"), ("Mlp", "head")} <= _layers(b)


# ----------------------------------------------------------------------------- Keras


def test_a_keras_stateless_step_handed_its_variables(source_bundle):
    _need("keras")
    b = source_bundle(KERAS_STEP, "keras_step")
    # hidden and head (kernel, bias) trainable; SGD's variables (its iteration and learning
    # rate); x and y
    assert _entry_parameters(b) == 4 + 2 + 2
    assert _outputs(b) == 1 + 4 + 2  # the loss, the new weights, the optimizer's variables
    assert {("hidden",), ("head",)} <= _layers(b)


# ----------------------------------------------------------------------------- the CLI, as a user runs it


@pytest.mark.sandbox
def test_the_cli_says_the_state_line_and_the_empty_line(tmp_path, capsys):
    _need("flax", "optax")
    from analysis.cli import main
    from analysis.service import sandbox

    ok, why = sandbox.sandbox_status()
    if not ok:
        pytest.skip(f"bubblewrap cannot run here: {why}")
    step = tmp_path / "train_step.py"
    step.write_text(NNX_STEP)
    assert main(["analyze", str(step), "--backend", "cpu", "--out", str(tmp_path / "step.json")]) == 0
    said = capsys.readouterr().err  # the summary goes to stderr
    lines = [ln for ln in said.splitlines() if "Returns the state the step changes" in ln]
    assert len(lines) == 1 and "6 parameter arrays" in lines[0] and "adam" in lines[0]

    nothing = tmp_path / "nothing.py"
    nothing.write_text(RETURNS_NOTHING)
    bundle = str(tmp_path / "nothing.json")
    assert main(["analyze", str(nothing), "--backend", "cpu", "--out", bundle]) == 0
    assert sum("The program returns nothing" in ln for ln in capsys.readouterr().err.splitlines()) == 1
    assert main(["code", bundle]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "The program returns nothing" in err and "schema" not in err
