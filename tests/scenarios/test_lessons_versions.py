"""The gallery's lessons on what changed between two XLA releases (``sample_models.lessons_versions``):
attention compiled by the jax 0.10 and the jax 0.12 runtimes (the ones ``scripts/dev.sh`` makes;
nothing is downloaded), every claim holding whichever release is A; the claims said not to hold
where the two compiles do not differ; and no lesson where the pair is not one gallery model in two
releases."""

from __future__ import annotations

import copy

import pytest

from analysis.render.format import human_bytes
from analysis.service import runtimes
from analysis.service.job import Job
from analysis.service.worker import run_job
from sample_models import gallery
from sample_models.lessons_versions import LESSONS, SHOWN_BY, versions_lesson


def _runtime(minor: str):
    return next((r for r in runtimes.available() if r.jax.startswith(minor + ".")), None)


@pytest.fixture(scope="module")
def releases():
    """attention compiled on the CPU by jax 0.10 and by jax 0.12, each in its own runtime."""
    old, new = _runtime("0.10"), _runtime("0.12")
    if old is None or new is None:
        pytest.skip("the lesson compares jax 0.10 with jax 0.12 and this machine lacks the runtime of "
                    + ("0.10" if old is None else "0.12") + " (scripts/dev.sh test makes .venv/jax-0.10)")
    path = str(gallery()["attention"].path)
    return tuple(run_job(Job(kind="gallery", name="attention", filename=path, backend="cpu", jax=r.jax)).bundle
                 for r in (old, new))


def _shapes():
    """The score and result shapes the model's own sizes give (sample_models/attention.py)."""
    src = gallery()["attention"].path.read_text()
    sizes = {}
    for line in src.splitlines():
        if line.startswith("B, SEQ, HEADS, HEAD_DIM ="):
            sizes = dict(zip(("B", "SEQ", "HEADS", "HEAD_DIM"), (int(x) for x in line.split("=")[1].split(","))))
    return sizes["HEADS"], sizes["SEQ"], sizes["HEAD_DIM"]


def test_the_attention_lesson_holds_on_jax_0_10_against_0_12_either_way_round(releases):
    old, new = releases
    heads, seq, head_dim = _shapes()
    for a, b in ((old, new), (new, old)):
        les = versions_lesson(a, b)
        assert les is not None and les.checks
        failed = [c.claim for c in les.checks if not c.holds]
        assert not failed, failed
        # the 0.10 side widens P (f32, 4 bytes an element), the 0.12 side keeps bf16 (2 bytes)
        p_f32, p_bf16 = heads * seq * seq * 4, heads * seq * seq * 2
        assert f"f32[{heads},{seq},{seq}] ({human_bytes(p_f32)})" in les.text
        assert f"bf16[{heads},{seq},{seq}] ({human_bytes(p_bf16)})" in les.text
        assert f"jax {old.environment['jax']}'s XLA ({'A' if a is old else 'B'}) widens it to f32" in les.text
        assert f"jax {new.environment['jax']}'s XLA ({'A' if a is new else 'B'}) keeps it in bf16" in les.text


def test_the_claims_are_said_not_to_hold_where_the_releases_compiled_alike(releases):
    _, new = releases
    twin = copy.deepcopy(new)
    twin.environment = dict(new.environment, jax="0.12.0.2")  # the same compile, named another release
    les = versions_lesson(new, twin)
    held = {c.claim.split(" (")[0]: c.holds for c in les.checks}
    assert held["one release computes the P·V matmul in f32, the other keeps it in bf16"] is False
    assert held["jax traced the same P·V matmul for both releases"] is True
    assert "✘ not on this compile: one release computes" in les.markdown()


def test_no_lesson_for_one_release_another_model_or_a_non_gallery_bundle(releases):
    old, new = releases
    assert versions_lesson(new, copy.deepcopy(new)) is None  # one release
    other = copy.deepcopy(new)
    other.source = dict(new.source, name="mlp")
    assert versions_lesson(old, other) is None  # two models
    code = copy.deepcopy(new)
    code.source = dict(new.source, kind="code")
    assert versions_lesson(old, code) is None
    assert set(SHOWN_BY) == set(LESSONS) <= set(gallery())
    # the page links each lesson to its two releases: releases the Compare page offers
    assert SHOWN_BY["attention"] == (runtimes.RELEASES["0.10"][0], runtimes.RELEASES["0.12"][0])
