"""``xla-explorer why`` on real programs whose work runs inside control flow
(``tests/real_programs/``): a BFGS fit (two nested ``while_loop``s), an adaptive Runge-Kutta
solver (a ``while_loop`` with a ``lax.cond`` in it) and a ``pmap``'d SGD step. XLA clones those
bodies and names their ops afresh; ``why`` must still place their decisions on the program's
ops. Each program is compiled as a user would (``xla-explorer analyze FILE`` in the sandboxed
worker) and checked against what it is: what it returns, worked from its own constants."""

from __future__ import annotations

import io
import os
import sys
from contextlib import redirect_stdout

import pytest

from tests.paths import REAL_PROGRAMS

pytestmark = [pytest.mark.sandbox]
pytest.importorskip("jax")

# what each returns (the entry's result), from the program's constants
OUTPUTS = {
    "bfgs_fit": ["f32[7]", "f32[]", "s32[]"],  # FEATURES + 1 weights, the loss, the iterations
    "ode_adaptive": ["f32[4]", "s32[]", "s32[]"],  # the 4-vector state, steps, rejections
    # DEVICES = 4 copies of hidden b (24), hidden w (12x24), out b (3), out w (24x3); the loss per device
    "pmap_sgd": ["f32[4,24]", "f32[4,12,24]", "f32[4,3]", "f32[4,24,3]", "f32[4]"],
}
# of the decisions about ops inside a loop body (pmap: its computation), at least this share is
# placed on the program's ops: every unmatched decision is counted as one inside, so this is a floor
MATCHED_INSIDE = {"bfgs_fit": 0.8, "ode_adaptive": 0.8, "pmap_sgd": 0.7}


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    from analysis.service import sandbox

    ok, why = sandbox.sandbox_status()
    if not ok:
        pytest.skip(f"bubblewrap cannot run here: {why}")
    out_dir = tmp_path_factory.mktemp("real-programs-why")
    done: dict = {}

    def get(name: str):
        if name not in done:
            from analysis.bundle.core import Bundle
            from analysis.cli import main

            out = str(out_dir / f"{name}.json")
            assert main(["analyze", os.path.join(REAL_PROGRAMS, f"{name}.py"), "--backend", "cpu", "--out", out]) == 0
            text = io.StringIO()
            with redirect_stdout(text):
                assert main(["why", out]) == 0
            done[name] = (Bundle.load(out), text.getvalue())
        return done[name]

    return get


def _bare(shape: str) -> str:
    return shape.split("{", 1)[0]


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_why_places_the_decisions_inside_control_flow_on_the_programs_ops(name, analyzed):
    bundle, text = analyzed(name)
    pre = bundle.module("hlo_before")
    root = next(i for i in pre.entry.instructions if i.is_root)
    assert [_bare(s.strip()) for s in root.shape_text.strip("()").split(", ")] == OUTPUTS[name]

    fd = bundle.fusion_decisions
    recs = fd["records"]
    where = {i.name: c.name for c in pre.computations for i in c.instructions}
    inside = [r for r in recs if r["matched"]
              and any(where[o] != pre.entry.name for o in r["producer_pre"] + r["consumer_pre"])]
    unmatched = [r for r in recs if not r["matched"]]
    assert len(unmatched) == fd["unmatched"]
    assert len(inside) >= 50  # the program's work is in the loop: so are most decisions
    assert len(inside) / (len(inside) + len(unmatched)) >= MATCHED_INSIDE[name], (len(inside), len(unmatched))
    # every pre op a decision names is one of the program's ops
    assert all(o in where for r in recs for o in r["producer_pre"] + r["consumer_pre"])

    # the CLI says the same counts, and no decision twice
    lines = text.splitlines()
    assert lines[0].startswith(f"{len(recs)} decisions logged (log, cpu); {len(unmatched)} could not be matched")
    shown = [ln for ln in lines[1:] if ln.startswith("[")]
    assert shown and len(shown) == len(set(shown))
