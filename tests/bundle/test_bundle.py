"""The Bundle as JSON: round trips, and every way a file can be bad -> one-line load error."""

from __future__ import annotations

import json
import os

import pytest

from analysis.bundle.core import SCHEMA_VERSION, Bundle, bundle_from_hlo
from analysis.errors import ExplorerError
from sample_models import gallery
from tests.program.test_kernels import CPU_HLO, GPU_HLO
from tests.paths import FIXTURES, ROOT

GALLERY = list(gallery())

PRE_HLO = '''HloModule jit_f, entry_computation_layout={(f32[8]{0})->f32[8]{0}}

ENTRY %main.1 (x.1: f32[8]) -> f32[8] {
  %x.1 = f32[8]{0} parameter(0), metadata={op_name="x"}
  %neg.1 = f32[8]{0} negate(%x.1), metadata={op_name="jit(f)/neg" source_file="f.py" source_line=3}
  ROOT %exp.1 = f32[8]{0} exponential(%neg.1), metadata={op_name="jit(f)/exp" source_file="f.py" source_line=3}
}
'''


def _load_error(path) -> ExplorerError:
    with pytest.raises(ExplorerError) as ei:
        Bundle.load(path)
    e = ei.value
    assert e.phase == "load"
    assert "\n" not in e.one_line()
    assert e.file == str(path)
    return e


@pytest.mark.parametrize("name", GALLERY)
def test_gallery_bundle_round_trip(gallery_bundle, name, tmp_path):
    b = gallery_bundle(name)
    path = tmp_path / "b.json"
    b.save(path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    assert set(data["stages"]) == {"jaxpr", "stablehlo", "hlo_before", "hlo_after"}
    loaded = Bundle.load(path)
    assert loaded == b
    assert loaded.content_hash() == b.content_hash()
    assert loaded.kernels[0].source_lines == b.kernels[0].source_lines
    # The views read from the loaded copy as from the original.
    assert len(list(loaded.module("hlo_after").instructions())) == b.metrics["instructions_after"]


@pytest.mark.parametrize("text", [GPU_HLO, CPU_HLO], ids=["gpu", "cpu"])
def test_hlo_bundle_round_trip(text, tmp_path):
    b = bundle_from_hlo(text, "step", "step.hlo")
    assert b.kernels and b.stages == {"hlo_after": text}
    path = tmp_path / "b.json"
    b.save(path)
    assert Bundle.load(path) == b
    assert Bundle.from_json(b.to_json()) == b


def test_json_and_hash_is_the_bundle_and_its_content_hash():
    """The report's one encoding: the same bundle as ``to_json``, and the same hash; the hash
    leaves out only the creation time."""
    b = bundle_from_hlo(PRE_HLO, "step", "step.hlo")
    b.created = "2026-01-02T03:04:05"
    text, digest = b.json_and_hash()
    assert json.loads(text) == json.loads(b.to_json())
    assert list(json.loads(text))[-1] == "created"
    assert digest == b.content_hash()
    b.created = "2027-01-01T00:00:00"
    assert b.json_and_hash()[1] == digest  # another time, the same compile
    b.source = {**b.source, "name": "other"}
    assert b.content_hash() != digest


def test_bundle_from_post_text():
    b = bundle_from_hlo(GPU_HLO, "step")
    assert b.platform == "gpu" and b.title == "step"
    assert b.provenance is None  # no pre-optimization text to map from
    assert b.metrics["kernels_after"] == len([k for k in b.kernels if k.route != "control"])
    assert "unfused_bytes" not in b.metrics


def test_bundle_from_pre_text_only():
    b = bundle_from_hlo(PRE_HLO, "f")
    assert set(b.stages) == {"hlo_before"}
    assert b.kernels == [] and b.provenance is None
    assert b.metrics == {"compute_ops_before": 2}
    assert Bundle.from_json(b.to_json()) == b


def test_bundle_from_pre_and_post_text():
    post = '''HloModule jit_f, is_scheduled=true
%fc (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  %n = f32[8]{0} negate(%p), metadata={op_name="jit(f)/neg" source_file="f.py" source_line=3}
  ROOT %e = f32[8]{0} exponential(%n), metadata={op_name="jit(f)/exp" source_file="f.py" source_line=3}
}
ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  ROOT %f = f32[8]{0} fusion(%x), kind=kLoop, calls=%fc
}
'''
    b = bundle_from_hlo(post, "f", before_text=PRE_HLO)
    assert set(b.stages) == {"hlo_before", "hlo_after"}
    assert b.provenance.pre_to_kernels == {"neg.1": ["f"], "exp.1": ["f"]}
    assert b.metrics["compute_ops_before"] == 2 and b.metrics["kernels_after"] == 1


@pytest.mark.parametrize("bad, line", [
    ("HloModule m\nENTRY %main {\n  %p = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%p\n}\n", 4),
    ("HloModule m\nENTRY %main {\n  %p = f32[2]{0} parameter(0)\n  ROOT %n = f32[2,x]{0} negate(%p)\n}\n", 4),
    ("HloModule m\nENTRY %main {\n  %p = f32[2]{0} parameter(0)\n", 4),
    ("not hlo at all\n", 1),
])
def test_hlo_parse_errors(bad, line):
    with pytest.raises(ExplorerError) as ei:
        bundle_from_hlo(bad, "bad", "bad.hlo")
    e = ei.value
    assert e.phase == "parse" and e.file == "bad.hlo"
    assert e.line == line
    assert e.one_line().startswith(f"parse error at bad.hlo:{line}")


def test_truncated_gpu_text_is_a_parse_error():
    cut = GPU_HLO[: GPU_HLO.index("%async-start")]
    with pytest.raises(ExplorerError) as ei:
        bundle_from_hlo(cut)
    assert ei.value.phase == "parse" and ei.value.line is not None


@pytest.fixture
def good(tmp_path):
    b = bundle_from_hlo(CPU_HLO, "cpu")
    return json.loads(b.to_json())


@pytest.mark.parametrize("content, needle", [
    ('{"schema_version": 1, "source": {', "not valid JSON"),  # truncated
    ("{not json", "not valid JSON"),  # corrupted
    ("[1, 2, 3]", "JSON object"),  # not an object
    ('"a string"', "JSON object"),
    ("{}", "schema_version"),  # wrong schema: not a bundle
    ('{"schema_version": "1"}', "schema_version"),
    ('{"schema_version": true}', "schema_version"),
    ('{"schema_version": 1, "kernels": [{"name": "k"}]}', "malformed"),
    ('{"schema_version": 1, "kernels": 5}', "malformed"),
    ('{"schema_version": 1, "metrics": [1]}', "metrics"),
    ('{"schema_version": 1, "source": "x"}', "source"),
    ('{"schema_version": 1, "stages": {"hlo_after": 3}}', "stages"),
    ('{"schema_version": 1, "provenance": "x"}', "provenance"),
    # fusion decisions the views would index into: refused at the door, with where
    ('{"schema_version": 4, "fusion_decisions": {"records": [], "edges": "x"}}', "fusion_decisions.edges"),
    ('{"schema_version": 4, "fusion_decisions": {"records": [1]}}', "fusion_decisions.records[0]"),
    ('{"schema_version": 4, "fusion_decisions": {"records": [{"reason": 3}]}}', "fusion_decisions.records[0]"),
    ('{"schema_version": 4, "fusion_decisions": {"records": {"columns": {"reason": [5]}, "count": 1}}}',
     "fusion_decisions.records.reason"),
    ('{"schema_version": 4, "fusion_decisions": {"records": "x"}}', "fusion_decisions.records"),
    ('{"schema_version": 4, "fusion_decisions": {"records": [], "edges": [{"producer": "a", "consumer": "b", '
     '"records": ["0"]}]}}', "fusion_decisions.edges[0]"),
    (b"\xff\xfe\x00garbage", "not valid JSON"),
    ("", "not valid JSON"),
])
def test_bad_files_are_load_errors(tmp_path, content, needle):
    path = tmp_path / "bad.json"
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    e = _load_error(path)
    assert needle in e.message


def test_truncated_real_bundle(tmp_path, good):
    path = tmp_path / "cut.json"
    text = json.dumps(good)
    path.write_text(text[: len(text) // 2])
    e = _load_error(path)
    assert e.line is not None


def test_newer_schema_is_refused(tmp_path, good):
    good["schema_version"] = SCHEMA_VERSION + 1
    path = tmp_path / "new.json"
    path.write_text(json.dumps(good))
    e = _load_error(path)
    assert "newer" in e.message and str(SCHEMA_VERSION + 1) in e.message


def test_older_schema_and_unknown_fields_load(good):
    good["schema_version"] = 1
    good["a_field_from_the_future"] = {"x": 1}
    del good["timings"]
    b = Bundle.from_dict(good)
    assert b.schema_version == SCHEMA_VERSION and b.timings is None


def test_missing_file(tmp_path):
    e = _load_error(tmp_path / "nope.json")
    assert e.message


def test_reanalyze_recomputes_and_keeps_extra_metrics(gallery_bundle):
    from analysis.bundle.core import reanalyze

    b = Bundle.from_json(gallery_bundle("mlp").to_json())
    fresh = [k.name for k in b.kernels]
    b.kernels = b.kernels[:1]  # as if an older analysis had found fewer
    b.metrics["kernels_after"] = -1
    b.metrics["shape_sweep"] = {"lengths": [1, 2]}
    reanalyze(b)
    assert [k.name for k in b.kernels] == fresh
    assert b.metrics["kernels_after"] == len(fresh)
    assert b.metrics["shape_sweep"] == {"lengths": [1, 2]}


def test_decision_kernels_are_derived_from_the_ops_not_stored():
    """A decision's kernels come from its pre-optimization ops through the provenance, when the
    bundle is loaded: never from the JSON (a worker or an upload could say anything there), and
    not written to it (the lists grew with layers x records)."""
    from tests.program.test_links import POST, PRE

    b = bundle_from_hlo(POST, name="m", before_text=PRE)
    rec = {"pass_name": "fusion", "decision": "fused", "producer": "e", "consumer": "a", "reason": "",
           "fusion": None, "line": 1, "source": "log", "how": {"producer": "name", "consumer": "name"},
           "matched": True}
    b.fusion_decisions = {"records": [
        {**rec, "producer_pre": ["e"], "consumer_pre": ["a", "d1"], "producer_kernels": ["made-up"]},
        {**rec, "producer_pre": ["e"], "consumer_pre": ["a", "d1"]},
        {**rec, "producer_pre": "not a list", "consumer_pre": [3, "d2"]},
    ], "edges": []}
    text = b.to_json()
    assert "producer_kernels" not in text and "made-up" not in text
    got = Bundle.from_json(text).fusion_decisions["records"]
    # e and a were fused into loop_fusion; d1 became dot.1, d2 dot.2 (the HLO above)
    assert got[0]["producer_kernels"] == ["loop_fusion"]
    assert got[0]["consumer_kernels"] == ["dot.1", "loop_fusion"]
    assert got[1]["consumer_kernels"] is got[0]["consumer_kernels"]  # the same ops: one list
    assert got[2]["producer_kernels"] == [] and got[2]["consumer_kernels"] == ["dot.2"]
    # a bundle that still carries lists (an older release's: records as a list) gets them derived again
    d = json.loads(text)
    d["schema_version"] = 3
    d["fusion_decisions"]["records"] = [{**rec, "producer_pre": ["e"], "consumer_pre": ["a", "d1"],
                                         "producer_kernels": ["made-up"]}]
    assert Bundle.from_dict(d).fusion_decisions["records"][0]["producer_kernels"] == ["loop_fusion"]


def test_a_memory_peak_written_as_whole_floats_loads_as_integers():
    """Bundles written before the live curve counted in integers hold ``134664.0``: still whole
    numbers of bytes. A fraction of a byte is not."""
    import copy
    import glob

    path = sorted(glob.glob(os.path.join(ROOT,
                                         "sample_models", "recorded", "h200", "mlp.bundle.json")))[0]
    d = json.loads(open(path).read())
    p = d["memory"]["peak"]
    whole = copy.deepcopy(d)
    whole["memory"]["peak"] = {**p, "bytes": float(p["bytes"]), "by_kind": {k: float(v) for k, v in p["by_kind"].items()}}
    b = Bundle.from_dict(whole)
    assert b.memory["peak"]["bytes"] == p["bytes"] and isinstance(b.memory["peak"]["bytes"], int)
    assert all(isinstance(v, int) for v in b.memory["peak"]["by_kind"].values())
    half = copy.deepcopy(d)
    half["memory"]["peak"] = {**p, "bytes": p["bytes"] + 0.5}
    with pytest.raises(ExplorerError, match="memory.peak"):
        Bundle.from_dict(half)


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(os.path.join(FIXTURES, "cpu"))
                                        if f.endswith(".bundle.json")))
def test_the_json_size_bound_is_never_more_than_the_json(name):
    # the report skips the JSON it could not embed by this bound: it must never exceed the truth
    b = Bundle.load(os.path.join(FIXTURES, "cpu", name))
    assert 0 < b.json_size_at_least() <= len(b.to_json())


def test_the_json_size_bound_counts_the_texts_memory_and_kernels():
    b = bundle_from_hlo(CPU_HLO, "cpu")
    text = sum(len(t) for t in b.stages.values())
    assert b.json_size_at_least() >= text + 300 * len(b.kernels)  # an empty kernel record is ~300 characters
