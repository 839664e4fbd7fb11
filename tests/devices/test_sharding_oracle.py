"""Our reading of shardings checked against XLA's own (``HloSharding.from_string`` through
jaxlib, a test oracle only) on every ``sharding=`` attribute of the sharded modules in XLA's
tests (``../shared/xla-test-hlo/``, used from there)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.hlo import HloParseError, parse_module
from analysis.devices.sharding import parse_sharding
from tests.paths import ROOT

CORPUS = Path(ROOT).parent / "shared" / "xla-test-hlo" / "modules"


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


# Named shardings, as jax 0.12's XLA dumps the module it starts from: each checked against XLA's
# reading of it (the same text), where this jaxlib reads the form
NAMED = [
    "{mesh['x'=2,'y'=4], [{'x'}, {'y'}]}",
    "{mesh['x'=2,'y'=4], [{}, {'y'}]}",
    "{mesh['x'=2,'y'=4], [{'x', 'y'}, {}]}",
    "{mesh['x'=2,'y'=4], [{'y'}, {'x'}]}",
    "{mesh['x'=2,'y'=4], [{'x'}, {}]}",
    "{mesh['x'=8], [{}, {}]}",
    "{mesh['x'=8], [{'x'}, {}]}",
    "{mesh['x'=2,'y'=4,'z'=2], [{'z', 'x'}, {}]}",
    "{mesh['x'=2,'y'=4], device_ids=(7,6,5,4,3,2,1,0), [{'x'}, {'y'}]}",
    "{mesh['x'=2,'y'=4], device_ids=(7,6,5,4,3,2,1,0), [{'y'}, {}]}",
    "{mesh['x'=2,'y'=4], [{'y', ?}, {?}], replicated={'x'}}",
]


@functools.lru_cache(maxsize=1)
def _xla_reads_named_shardings() -> bool:
    # asked in a process of its own: jaxlib 0.10's XLA reads one but aborts when asked for its tiles
    probe = ("from jax._src.lib import xla_client as xc; "
             "xc.HloSharding.from_string(\"" + NAMED[0] + "\").tile_assignment_dimensions()")
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120).returncode == 0


@pytest.mark.parametrize("text", NAMED)
def test_a_named_sharding_reads_as_xla_reads_it(text):
    xc = pytest.importorskip("jax._src.lib").xla_client
    if not _xla_reads_named_shardings():
        pytest.skip("this XLA does not read named shardings")
    theirs = xc.HloSharding.from_string(text)
    ours = parse_sharding(text)
    if theirs.is_replicated():
        assert ours.kind == "replicated", text
        return
    dims = list(theirs.tile_assignment_dimensions())
    assert ours.kind == "tiled" and list(ours.tiles) == dims[:len(ours.tiles)], text
    trailing = 1
    for n in dims[len(ours.tiles):]:
        trailing *= n
    assert ours.trailing == trailing == ours.replicated_copies, text
    # the same devices hold each block (XLA may order the copies of a block otherwise)
    theirs_devices = list(theirs.tile_assignment_devices())
    groups = lambda devs: [sorted(devs[i:i + trailing]) for i in range(0, len(devs), trailing)]  # noqa: E731
    assert groups(list(ours.devices)) == groups(theirs_devices), text


def test_a_named_sharding_s_blocks():
    s = parse_sharding("{mesh['x'=2,'y'=4], [{'x'}, {}]}")
    assert s.words() == "rows split over 2 devices, 4 copies of each block"
    assert [s.block_of(d, (8, 16)) for d in (0, 3, 4, 7)] == [((0, 4), (0, 16))] * 2 + [((4, 8), (0, 16))] * 2
    t = parse_sharding("{mesh['x'=2,'y'=4], device_ids=(7,6,5,4,3,2,1,0), [{'x'}, {'y'}]}")
    assert t.block_of(7, (8, 16)) == ((0, 4), (0, 4)) and t.block_of(0, (8, 16)) == ((4, 8), (12, 16))
    assert parse_sharding("{mesh['x'=4], [{'w'}]}").kind == "unknown"  # an axis the mesh has not
