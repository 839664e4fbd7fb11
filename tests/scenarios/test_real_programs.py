"""Real programs (``tests/real_programs/``): small programs of our own written with what public
Flax (Linen and NNX), Equinox, Keras 3, optax and JAX examples rely on (typed dataclass fields,
``flax.struct``, ``nnx.scan`` over layers, ``eqx.field(static=True)``, Keras functional models,
``vmap(grad)``, ``custom_vjp``, ``jax.checkpoint`` policies, ``lax.scan``, Pallas in interpret
mode). Each is compiled as a user would: ``xla-explorer analyze FILE`` in the sandboxed worker,
then ``xla-explorer layers BUNDLE --json``. Checked against what each program is
(``tests/real_programs/expected.py``, worked by hand from the code): its parameter count, the
layer names it defines, the loops that repeat a layer, and the layer tree's totals against the
summary's.
"""

from __future__ import annotations

import json
import math
import os
import sys

import pytest

from tests.paths import REAL_PROGRAMS

PROGRAMS_DIR = REAL_PROGRAMS
sys.path.insert(0, PROGRAMS_DIR)
from expected import EXPECTED  # noqa: E402

pytestmark = [pytest.mark.sandbox]
pytest.importorskip("jax")

# the layers a loop repeats, with its trip count, from each program's own constants
REPEATS = {
    "nnx_scan_mlp": {"blocks": 3},  # three stacked blocks, nnx.scan over them
    "lax_scan_rnn": {"rnn/cell": 16},  # SEQ = 16 steps of lax.scan
    "equinox_gru": {"cell": 16},  # STEPS = 16 steps of lax.scan
}
# the Flax NNX state each call changes (the program's own assignments and RNG streams)
STATE_CHANGES = {"nnx_vae": {"kl_loss", "rngs/noise/count"}}
# the top layers in the order each program runs them (its own code, read top to bottom)
ORDER = {
    "nnx_decoder": ["embed", "layers[0]", "layers[1]", "final_norm", "logits"],
    "optax_chain_step": ["MLP", "adam", "apply_updates"],
    "checkpoint_policy": ["embed", "block_0", "block_1", "block_2", "head"],
}
# at most this share of a program's kernels outside every layer: the decoder's code outside its
# layers is the embedding's position add and its cast to bfloat16 (issue #50: at most 20%)
OUTSIDE_AT_MOST = {"nnx_decoder": 0.20}


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    """name -> (bundle, ``layers --json`` output), made once per program through the CLI."""
    from analysis.service import sandbox

    ok, why = sandbox.sandbox_status()
    if not ok:
        pytest.skip(f"bubblewrap cannot run here: {why}")
    out_dir = tmp_path_factory.mktemp("real-programs")
    done: dict = {}

    def get(name: str):
        if name not in done:
            from analysis.bundle.core import Bundle
            from analysis.cli import main

            out = str(out_dir / f"{name}.json")
            assert main(["analyze", os.path.join(PROGRAMS_DIR, f"{name}.py"), "--backend", "cpu", "--out", out]) == 0
            layers_json = str(out_dir / f"{name}.layers.json")
            with open(layers_json, "w") as f:
                saved, sys.stdout = sys.stdout, f
                try:
                    assert main(["layers", out, "--json"]) == 0
                finally:
                    sys.stdout = saved
            with open(layers_json) as f:
                done[name] = (Bundle.load(out), json.load(f))
        return done[name]

    return get


def _children(node: dict) -> dict:
    return {c["name"]: c for c in node["children"]}


def _level(node: dict) -> dict:
    """Looked through from the root: a single layer holding the rest (``ResNet``) is the model."""
    while len(node["children"]) == 1:
        node = node["children"][0]
    return node


# an optimizer's update is a layer where Python reports its functions' calls (sys.monitoring,
# 3.12+: analysis.compile.frameworks.optimizer_scopes); on 3.11 (jax 0.10) it is left unnamed
NAMED_UPDATES = hasattr(sys, "monitoring")
UPDATES = {"adam", "momentum", "optimizer", "apply_updates"}


def _as_this_python(expected):
    """The layers expected here: without the optimizer's where its update cannot be named."""
    if NAMED_UPDATES:
        return expected
    if isinstance(expected, list):
        return [n for n in expected if n not in UPDATES]
    return {k: _as_this_python(v) for k, v in expected.items() if k not in UPDATES}


def _check_names(node: dict, expected: dict, where: str) -> None:
    found = _children(node)
    assert set(found) == set(expected), f"{where or 'the program'}: {sorted(found)} != {sorted(expected)}"
    for name, sub in expected.items():
        if sub:  # {} leaves a layer's own inside unchecked (a library's attention has query/key/...)
            _check_names(found[name], sub, f"{where}/{name}".lstrip("/"))


def _check_sums(node: dict) -> None:
    """At every level, a layer's ops and kernels are its sub-layers' plus what lies outside them."""
    todo = [node]
    while todo:
        n = todo.pop()
        if n["children"]:
            assert n["ops"] == n["outside_sublayers"]["ops"] + sum(c["ops"] for c in n["children"]), n["path"]
            assert n["kernels"] == n["outside_sublayers"]["kernels"] + sum(c["kernels"] for c in n["children"]), \
                n["path"]
        todo.extend(n["children"])


def _parameter_inputs(bundle, spec: dict) -> list[dict]:
    """The inputs that hold the parameters (and the model's state): the split's first argument(s)
    for a module object, else the argument the program's ``param_arg`` names."""
    library = bundle.source.get("library")
    args = {"flax.nnx": {0}, "equinox": {0}, "keras": {0, 1}}.get(library, {spec["param_arg"]})
    return [i for i in bundle.source["inputs"] if int(i["path"][1:].split("]", 1)[0]) in args]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_program_compiles_and_reads_as_its_own_module_tree(name, analyzed):
    spec = EXPECTED[name]
    bundle, tree = analyzed(name)
    assert bundle.kernels and bundle.metrics["kernels_after"] > 0
    # its parameters (and state) are the program's inputs, as many as the architecture has
    held = _parameter_inputs(bundle, spec)
    assert len(held) == spec["param_leaves"] + spec.get("state_leaves", 0)
    assert sum(math.prod(i["shape"]) for i in held) == spec["parameters"] + spec.get("state", 0)
    # the layer tree: the program's own names, nested as its modules nest
    root = tree["layers"]
    expected = _as_this_python(spec["layers"])
    if len(expected) == 1 and next(iter(expected.values())):  # one root module: the tree holds it
        (top, inner), = expected.items()
        assert [c["name"] for c in root["children"]] == [top]
        _check_names(_level(root), inner, top)
    else:
        _check_names(_level(root), expected, "")
    # the tree's totals are the summary's, and every level adds up
    assert root["ops"] == tree["program"]["ops"] == bundle.metrics["compute_ops_before"]
    assert root["kernels"] == tree["program"]["kernels"] == bundle.metrics["kernels_after"]
    _check_sums(root)
    # a layer a loop repeats is one layer with the loop's count; no other layer says it repeats
    repeats = {}
    todo = list(root["children"])
    while todo:
        n = todo.pop()
        if n["repeats"] is not None:
            repeats[n["path"]] = n["repeats"]
        todo.extend(n["children"])
    assert repeats == REPEATS.get(name, {})
    # no JAX or library internals among the layers
    names = set()
    todo = list(root["children"])
    while todo:
        n = todo.pop()
        names.add(n["name"])
        todo.extend(n["children"])
    internal = {"while", "body", "cond", "closed_call", "checkpoint", "rematted_computation", "eval_jaxpr"}
    assert not names & internal and not any("->" in n or "__call__" in n or "(" in n for n in names), names
    order = _as_this_python(ORDER.get(name, []))
    if len(order) > 1:  # (one top layer left: _level looks through it)
        assert [c["name"] for c in _level(root)["children"]] == order
    if name in OUTSIDE_AT_MOST:
        assert root["outside_sublayers"]["kernels"] <= OUTSIDE_AT_MOST[name] * root["kernels"], root["outside_sublayers"]


def test_nnx_state_a_real_program_changes_is_said(analyzed):
    from analysis.render.summary import state_note

    for name, changed in STATE_CHANGES.items():
        bundle, _ = analyzed(name)
        assert {c["path"] for c in bundle.source["state_changes"]} == changed
        assert all(path in state_note(bundle) for path in changed)
