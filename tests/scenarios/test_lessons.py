"""The gallery: at least ten models, each with a lesson written from its own compile, and every
claim a lesson makes holds on the CPU."""

from __future__ import annotations

import pytest

from sample_models import gallery
from sample_models.lessons import LESSONS, lesson

NAMES = list(gallery())


def test_gallery_has_the_models_the_lessons_cover():
    assert len(NAMES) >= 10
    for required in ("mlp", "transformer_block", "attention", "layernorm", "softmax", "conv_bn_relu", "rnn_scan",
                     "bf16_mixed", "layout_transpose", "shape_sweep", "train_step"):
        assert required in NAMES
    assert set(NAMES) <= set(LESSONS)
    for e in gallery().values():
        assert e.title and e.lesson, e.name


@pytest.mark.parametrize("name", NAMES)
def test_lesson_claims_hold_on_cpu(gallery_bundle, name):
    b = gallery_bundle(name)
    les = lesson(b)
    assert les is not None and les.checks
    failed = [c.claim for c in les.checks if not c.holds]
    assert not failed, failed
    # the text quotes this compile's numbers, not fixed prose
    assert f"**{b.metrics['kernels_after']} kernels**" in les.text
    assert f"**{b.metrics['compute_ops_before']} ops**" in les.text


@pytest.mark.parametrize("name", NAMES)
def test_provenance_maps_most_ops(gallery_bundle, name):
    b = gallery_bundle(name)
    assert b.provenance.mapped_fraction >= 0.9, (name, b.provenance.unmapped)


def test_a_false_claim_is_reported_not_hidden(gallery_bundle):
    b = gallery_bundle("mlp", xla_disable_hlo_passes="fusion")
    les = LESSONS["mlp"](b)
    shared = les.checks[0]
    assert "same kernel" in shared.claim
    assert not shared.holds  # with fusion disabled the bias add and ReLU are apart
    assert "not on this compile" in les.markdown()


def test_lessons_only_for_gallery_bundles(source_bundle):
    src = "import jax.numpy as jnp\ndef model(x):\n    return x * 2\ndef example_inputs():\n    return (jnp.ones(4),)\n"
    assert lesson(source_bundle(src, "mlp")) is None
