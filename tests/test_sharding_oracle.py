"""Our reading of shardings checked against XLA's own (``HloSharding.from_string`` through
jaxlib, a test oracle only) on every ``sharding=`` attribute of the sharded modules in XLA's
tests (``../shared/xla-test-hlo/``, used from there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from analysis.hlo import HloParseError, parse_module
from analysis.sharding import parse_sharding

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "xla-test-hlo" / "modules"


def _shardings() -> list[str]:
    if not CORPUS.is_dir():
        return []
    found: set[str] = set()
    for path in sorted(CORPUS.rglob("*")):
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if "sharding=" not in text:
            continue
        try:
            module = parse_module(text)
        except (HloParseError, ValueError, RecursionError):
            continue  # some are invalid on purpose
        found.update(i.attributes["sharding"] for i in module.instructions() if "sharding" in i.attributes)
    return sorted(found)


SHARDINGS = _shardings()


def test_the_corpus_has_sharded_modules():
    if not CORPUS.is_dir():
        pytest.skip(f"no corpus at {CORPUS}")
    assert len(SHARDINGS) >= 30


@pytest.mark.parametrize("text", SHARDINGS)
def test_a_sharding_reads_as_xla_reads_it(text):
    xc = pytest.importorskip("jax._src.lib").xla_client
    try:
        theirs = xc.HloSharding.from_string(text)
    except Exception:  # noqa: BLE001 - XLA refuses it: nothing to compare
        pytest.skip("XLA does not accept this sharding")
    ours = parse_sharding(text)
    if theirs.tuple_elements():
        theirs = theirs.tuple_elements()[0]
    if theirs.is_replicated():
        assert ours.kind == "replicated" or (ours.kind == "tiled" and not any(n > 1 for n in ours.tiles)), text
    elif theirs.is_maximal():
        assert (ours.kind, ours.device) == ("maximal", theirs.tile_assignment_devices()[0]), text
    elif theirs.is_manual():
        assert ours.kind == "manual", text
    elif theirs.is_tiled():
        dims = list(theirs.tile_assignment_dimensions())
        trailing = 1
        for n in dims[len(ours.tiles):]:
            trailing *= n
        if ours.kind == "manual":  # tiles of 1 and a manual last dimension: every device its own
            assert all(n == 1 for n in dims[:-len(theirs.subgroup_types())]), text
        else:
            assert ours.kind == "tiled", text
            assert list(ours.tiles) == dims[:len(ours.tiles)] and ours.trailing == trailing, text
            assert list(ours.devices) == list(theirs.tile_assignment_devices()), text
            if theirs.replicate_on_last_tile_dim():
                assert ours.replicated_copies == dims[-1], text
