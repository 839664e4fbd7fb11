"""Malformed HLO, many ways: random mutations of real modules must either parse or raise
HloParseError with a line — never another exception (and never hang) — and whatever parses
must go through the whole analysis (kernels, provenance, metrics, graphs) as an uploaded HLO
file does."""

from __future__ import annotations

import random

import pytest

from analysis.bundle.core import bundle_from_hlo
from analysis.errors import ExplorerError
from analysis.render.module_graphs import post_graph, pre_graph
from analysis.hlo import HloParseError, parse_module

MUTATIONS = 400


def _mutate(text: str, rng: random.Random) -> str:
    if not text:
        return text
    op = rng.randrange(7)
    i = rng.randrange(len(text))
    if op == 0:  # drop a character
        return text[:i] + text[i + 1:]
    if op == 1:  # insert a bracket, quote or separator
        return text[:i] + rng.choice("(){}[]\",=%/*\n") + text[i:]
    if op == 2:  # truncate
        return text[:i]
    if op == 3:  # duplicate a line
        lines = text.splitlines(True)
        j = rng.randrange(len(lines))
        return "".join(lines[:j + 1] + [lines[j]] + lines[j + 1:])
    if op == 4:  # delete a line
        lines = text.splitlines(True)
        j = rng.randrange(len(lines))
        return "".join(lines[:j] + lines[j + 1:])
    if op == 5:  # swap two lines
        lines = text.splitlines(True)
        a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[a], lines[b] = lines[b], lines[a]
        return "".join(lines)
    return text[:i] + "\x00" + text[i:]  # a stray NUL


@pytest.mark.parametrize("model", ["mlp", "rnn_scan", "h200:attention", "h200:rnn_scan"])
def test_mutated_modules_parse_or_fail_cleanly(gallery_bundle, model):
    # "h200:<name>": XLA:GPU's recorded output (big backend_configs, workspace tuples, Triton
    # and cuDNN fusions); the others are compiled here on the CPU
    if model.startswith("h200:"):
        from analysis.bundle.core import Bundle
        from sample_models import recorded_bundle_path

        b = Bundle.load(str(recorded_bundle_path(model.split(":", 1)[1], "h200")))
    else:
        b = gallery_bundle(model)
    rng = random.Random(1234)
    outcomes = {"parsed": 0, "error": 0}
    for stage in ("hlo_before", "hlo_after"):
        base = b.stages[stage]
        for _ in range(MUTATIONS // 2):
            text = _mutate(base, rng)
            try:
                m = parse_module(text)
            except HloParseError as e:
                assert e.line >= 1 and e.column >= 1
                assert "\n" not in str(e)
                outcomes["error"] += 1
                continue
            # what parsed is a consistent module: every operand is defined in its computation
            for comp in m.computations:
                for inst in comp.instructions:
                    assert all(o in comp.by_name for o in inst.operands)
                    inst.metadata, inst.backend_config, inst.fusion_kind  # decoded lazily: must not raise
                    try:
                        inst.shape
                    except Exception as e:  # noqa: BLE001
                        pytest.fail(f"shape of {inst.name} raised {type(e).__name__}: {e}")
            # and the rest of the pipeline an upload goes through
            try:
                up = bundle_from_hlo(text, "fuzz")
            except ExplorerError as e:
                assert e.phase == "parse"
                continue
            if up.module("hlo_after") is not None:
                post_graph(up.module("hlo_after"), up.kernels).to_dot()
            else:
                pre_graph(up.module("hlo_before")).to_dot()
            outcomes["parsed"] += 1
    assert outcomes["error"] > 0 and outcomes["parsed"] > 0
