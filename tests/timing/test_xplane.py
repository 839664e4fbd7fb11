"""A profiler trace's XSpace read without JAX (analysis/timing/xplane.py): on a real CPU trace made here,
event for event what ``jax.profiler.ProfileData`` reads (the oracle); on XSpaces the test writes
as text (serialized by XLA's own protobuf code, not by the reader's), the parts ProfileData does
not give as the trace viewer's JSON export gives them; bad bytes and too much of anything in one
line."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.profiler import ProfileData  # noqa: E402

import analysis.timing.xplane  # noqa: E402
from analysis.errors import ExplorerError  # noqa: E402
from analysis.timing.xplane import read_xspace  # noqa: E402

RUNS = 3
# the stats jax writes as bytes values (serialized protos), seen in its CPU traces
BYTES_STATS = ("profile_options", "Hlo Proto")


@pytest.fixture(scope="module")
def xplane(tmp_path_factory):
    """The .xplane.pb of a program with a loop, run three times under the profiler."""
    import glob
    import os

    def f(x):
        return jax.lax.fori_loop(0, 4, lambda i, c: jnp.tanh(c @ c.T) + i, x).sum()

    folder = tmp_path_factory.mktemp("xplane")
    x = jnp.ones((32, 32))
    compiled = jax.jit(f).lower(x).compile()
    jax.block_until_ready(compiled(x))
    with jax.profiler.trace(str(folder)):
        for _ in range(RUNS):
            jax.block_until_ready(compiled(x))
    found = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
    assert len(found) == 1
    return found[0]


def test_the_reader_gives_profile_datas_events(xplane):
    """The same planes, lines and events in the same order, the same names and stats (bytes
    values left out), starts and durations within a nanosecond (ProfileData truncates them)."""
    with open(xplane, "rb") as f:
        mine = read_xspace(f.read(), xplane)
    ref = ProfileData.from_file(xplane)

    def kept(stats):  # bytes values are left out; ProfileData gives them as bytes, or as str when UTF-8
        return [(k, v) for k, v in stats if not isinstance(v, bytes) and k not in BYTES_STATS]

    def flat(pd):
        return [(p.name, ln.name, e.name, e.start_ns, e.duration_ns, kept(e.stats))
                for p in pd.planes for ln in p.lines for e in ln.events]

    want, got = flat(ref), flat(mine)
    assert len(got) == len(want)
    runs = {dict(w[5]).get("run_id") for w in want if dict(w[5]).get("hlo_module") == "jit_f"}
    assert len(runs) == RUNS  # the program's kernels are among them, one run_id per execution
    for g, w in zip(got, want):
        assert g[:3] == w[:3]
        assert g[3] == pytest.approx(w[3], abs=1.0) and g[4] == pytest.approx(w[4], abs=1.0)
        assert g[5] == w[5]
    assert [p.name for p in mine.planes] == [p.name for p in ref.planes]
    assert [list(p.stats) for p in mine.planes] == [kept(p.stats) for p in ref.planes]


SPACE = """
planes {
  id: 3 name: "/device:TPU:0"
  stats { metadata_id: 1 ref_value: 2 }
  stats { metadata_id: 9 bytes_value: "\\001\\002" }
  stat_metadata { key: 1 value { id: 1 name: "device_type_string" } }
  stat_metadata { key: 2 value { id: 2 name: "TPU v5 lite" } }
  stat_metadata { key: 3 value { id: 3 name: "hlo_category" } }
  stat_metadata { key: 4 value { id: 4 name: "program_id" } }
  stat_metadata { key: 5 value { id: 5 name: "zero" } }
  stat_metadata { key: 6 value { id: 6 name: "ratio" } }
  stat_metadata { key: 9 value { id: 9 name: "Hlo Proto" } }
  event_metadata { key: 1 value { id: 1 name: "%fusion.3 = f32[8]{0} fusion(f32[8]{0} %p)" display_name: "fusion.3"
                                  stats { metadata_id: 3 str_value: "loop fusion" } } }
  event_metadata { key: 2 value { id: 2 name: "copy.1" } }
  lines {
    id: 3 name: "XLA Ops" display_name: "XLA Ops (core 0)" timestamp_ns: 5000
    events { metadata_id: 1 offset_ps: 1500 duration_ps: 2000500
             stats { metadata_id: 4 uint64_value: 7 } stats { metadata_id: 5 int64_value: 0 }
             stats { metadata_id: 6 double_value: 0.25 } stats { metadata_id: 77 int64_value: 1 } }
    events { metadata_id: 2 num_occurrences: 4 duration_ps: 1000 }
    events { metadata_id: 2 offset_ps: 9000000 duration_ps: -5 }
    events { metadata_id: 42 offset_ps: 10000000 duration_ps: 1000 }
  }
  lines { id: 2 name: "XLA Modules" timestamp_ns: 5000 }
}
"""


def test_what_profile_data_leaves_out_is_read_as_the_json_export_writes_it():
    space = read_xspace(ProfileData.text_proto_to_serialized_xspace(SPACE), "t.xplane.pb")
    (plane,) = space.planes
    assert plane.name == "/device:TPU:0"
    assert plane.stats == [("device_type_string", "TPU v5 lite")]  # a ref names a stat metadata; bytes left out
    ops, modules = plane.lines
    assert ops.name == "XLA Ops (core 0)" and modules.name == "XLA Modules" and modules.events == []
    # the aggregated event (no time) and the one of negative duration are left out
    fusion, unknown = ops.events
    assert fusion.name == "fusion.3"  # the display name, the full name kept as long_name
    assert fusion.start_ns == pytest.approx(5001.5) and fusion.duration_ns == pytest.approx(2000.5)
    # the metadata's stats, then the event's own; a zero is a value (the oneof keeps it); a stat
    # whose metadata is missing is left out
    assert fusion.stats == [("hlo_category", "loop fusion"),
                            ("long_name", "%fusion.3 = f32[8]{0} fusion(f32[8]{0} %p)"),
                            ("program_id", 7), ("zero", 0), ("ratio", 0.25)]
    assert unknown.name == "" and unknown.stats == []  # metadata missing: as ProfileData, no name


@pytest.mark.parametrize("data, says", [
    (b"", "no planes"),
    (b"\x0a\xff\xff\xff\xff\x0f", "not an XSpace"),  # a plane longer than the bytes
    (b"\x2b" * 1000, "not an XSpace"),  # groups opened and never closed
    (b"hello, world", "not an XSpace"),
])
def test_bad_bytes_get_one_line(data, says):
    with pytest.raises(ExplorerError) as e:
        read_xspace(data, "bad.xplane.pb")
    line = e.value.one_line()
    assert says in line and "bad.xplane.pb" in line and "\n" not in line


@pytest.mark.parametrize("bound, value, says", [
    ("MAX_EVENTS", 3, "4 events, over the 3"),
    ("MAX_LINES", 1, "2 lines, over the 1"),
    ("MAX_METADATA", 5, "9 metadata entries, over the 5"),
    ("MAX_STATS", 4, "over 4 stat values"),
])
def test_too_much_of_anything_gets_one_line(monkeypatch, bound, value, says):
    monkeypatch.setattr(analysis.timing.xplane, bound, value)
    with pytest.raises(ExplorerError, match=says):
        read_xspace(ProfileData.text_proto_to_serialized_xspace(SPACE), "big.xplane.pb")
