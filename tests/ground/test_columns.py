"""Rows written by column (analysis.columns): the form a bundle's fusion decisions take in JSON."""

import json

import pytest

from analysis import columns
from analysis.bundle.core import SCHEMA_VERSION, Bundle
from analysis.errors import ExplorerError


def _rows(n):
    """n rows: two passes, a reason that repeats, a name of its own per row, a line number, a
    field only every third row has, and a list and an object that repeat."""
    return [{"pass": "fusion" if i % 2 else "dot-library-rewriter", "reason": "not profitable",
             "name": f"add.{i}", "line": 10 + i, **({"fusion": "loop_fusion.1"} if i % 3 == 0 else {}),
             "pre": ["add", "mul"] if i % 2 else ["dot"], "how": {"producer": "name", "consumer": "name"}}
            for i in range(n)]


def test_repeated_values_are_a_table_and_distinct_ones_a_list():
    rows = _rows(6)
    got = columns.encode(rows)
    assert got["count"] == 6
    cols = got["columns"]
    assert cols["pass"] == {"values": ["dot-library-rewriter", "fusion"], "codes": [0, 1, 0, 1, 0, 1]}
    assert cols["reason"] == {"values": ["not profitable"], "codes": [0] * 6}
    assert cols["name"] == ["add.0", "add.1", "add.2", "add.3", "add.4", "add.5"]  # 6 distinct of 6
    assert cols["line"] == [10, 11, 12, 13, 14, 15]
    assert cols["fusion"] == {"values": ["loop_fusion.1"], "codes": [0, -1, -1, 0, -1, -1]}  # -1: lacks it
    assert cols["pre"] == {"values": [["dot"], ["add", "mul"]], "codes": [0, 1, 0, 1, 0, 1]}
    assert cols["how"] == {"values": [{"producer": "name", "consumer": "name"}], "codes": [0] * 6}
    back = columns.decode(json.loads(json.dumps(got)))
    assert back == rows
    assert "fusion" not in back[1]  # a field a row lacked is still lacking
    assert back[1]["pre"] is back[3]["pre"]  # equal values: one object


def test_numbers_and_booleans_stay_apart():
    rows = [{"v": 1}, {"v": True}, {"v": 1.0}, {"v": 1}, {"v": [1]}, {"v": [True]}, {"v": None}, {"v": 1}]
    back = columns.decode(json.loads(json.dumps(columns.encode(rows))))
    assert [(type(r["v"]), r["v"]) for r in back] == [(type(r["v"]), r["v"]) for r in rows]
    assert type(back[5]["v"][0]) is bool


def test_lists_and_objects_of_names_share_by_value_and_others_keep_their_types():
    a, b = ["add.1", "mul.2"], ["add.1", "mul.2"]  # equal lists, two objects
    rows = [{"ops": a, "how": {"p": "name"}}, {"ops": b, "how": {"p": "name"}}, {"ops": [], "how": {}},
            {"ops": a, "how": {"p": "name"}}, {"ops": [], "how": {}}, {"ops": b, "how": {"p": "name"}}]
    cols = columns.encode(rows, leave_out=("nothing",))["columns"]
    assert cols["ops"] == {"values": [["add.1", "mul.2"], []], "codes": [0, 0, 1, 0, 1, 0]}
    assert cols["how"] == {"values": [{"p": "name"}, {}], "codes": [0, 0, 1, 0, 1, 0]}
    back = columns.decode(json.loads(json.dumps(columns.encode(rows))))
    assert back == rows and back[0]["ops"] is back[1]["ops"]
    # a column of lists that are not all names: a name and a number stay apart, and so do 1 and true
    mixed = [{"v": ["1"]}, {"v": [1]}, {"v": [True]}, {"v": ["1"]}, {"v": [1]}, {"v": {"k": 1}}]
    back = columns.decode(json.loads(json.dumps(columns.encode(mixed))))
    assert [(r["v"], [type(x) for x in r["v"]] if isinstance(r["v"], list) else None) for r in back] == \
        [(r["v"], [type(x) for x in r["v"]] if isinstance(r["v"], list) else None) for r in mixed]


def test_fields_left_out_are_not_written():
    got = columns.encode(_rows(4), leave_out=("name", "how", "no-such-field"))
    assert set(got["columns"]) == {"pass", "reason", "line", "fusion", "pre"}
    assert columns.decode(got)[0] == {"pass": "dot-library-rewriter", "reason": "not profitable", "line": 10,
                                      "fusion": "loop_fusion.1", "pre": ["dot"]}


def test_no_rows_and_rows_that_are_not_objects():
    assert columns.decode(columns.encode([])) == []
    assert columns.encode([{"a": 1}, "x"]) is None  # the caller keeps its list


def test_a_value_too_long_to_share_is_written_per_row():
    long = "x" * (columns.MAX_VALUE + 10)
    rows = [{"r": long}, {"r": long}, {"r": long}]
    got = columns.encode(rows)
    assert got["columns"]["r"] == [long, long, long]
    assert columns.decode(got) == rows
    # and if some row lacks the field, there is no column form: the rows stay a list
    assert columns.encode([{"r": long}, {"r": long}, {}]) is None


@pytest.mark.parametrize("bad, says", [
    ([], "must be an object"),
    ({"count": -1, "columns": {}}, "count"),
    ({"count": "2", "columns": {}}, "count"),
    ({"count": 2, "columns": []}, "columns must be an object"),
    ({"count": 2, "columns": {"a": [1]}}, "1 values for 2 rows"),
    ({"count": 2, "columns": {"a": {"values": ["x"]}}}, "values and codes"),
    ({"count": 2, "columns": {"a": {"values": ["x"], "codes": [0]}}}, "1 codes for 2 rows"),
    ({"count": 2, "columns": {"a": {"values": ["x"], "codes": [0, 1]}}}, "not an index"),
    ({"count": 2, "columns": {"a": {"values": ["x"], "codes": [0, -2]}}}, "not an index"),
    ({"count": 2, "columns": {"a": {"values": ["x"], "codes": [0, 0.0]}}}, "not an index"),
    ({"count": 2, "columns": {"a": {"values": ["x"], "codes": [0, True]}}}, "not an index"),
    # one long value that every row would name: a small file that reads as a big one
    ({"count": 2, "columns": {"a": {"values": [["y" * 3000, "z" * 3000]], "codes": [0, 0]}}}, "longer than"),
])
def test_malformed_columns_say_where(bad, says):
    with pytest.raises(columns.ColumnsError) as e:
        columns.decode(bad, "here")
    assert says in str(e.value) and "here" in str(e.value)


def _bundle_dict(records) -> dict:
    return {"schema_version": 4, "stages": {}, "fusion_decisions": {"records": records, "edges": []}}


def test_a_bundle_writes_its_records_by_column_and_reads_them_back():
    rows = _rows(5)
    b = Bundle.from_dict(_bundle_dict(json.loads(json.dumps(rows))))  # loading derives fields in place
    d = json.loads(b.to_json())
    assert d["schema_version"] == SCHEMA_VERSION  # a loaded bundle is written as the current schema
    assert d["fusion_decisions"]["records"]["count"] == 5
    assert d["fusion_decisions"]["records"]["columns"]["reason"] == {"values": ["not profitable"], "codes": [0] * 5}
    got = Bundle.from_dict(d).fusion_decisions["records"]
    assert [{k: v for k, v in r.items() if not k.endswith("_kernels")} for r in got] == rows


def test_a_bundle_with_malformed_columns_is_one_line_error():
    bad = {"count": 1, "columns": {"reason": {"values": [], "codes": [0]}}}
    with pytest.raises(ExplorerError) as e:
        Bundle.from_dict(_bundle_dict(bad))
    msg = e.value.one_line()
    assert "malformed bundle" in msg and "fusion_decisions.records" in msg and "reason" in msg
    assert "\n" not in msg


def test_a_table_reads_rows_by_column_without_making_them():
    rows = _rows(6)
    t = columns.table(columns.encode(rows))
    assert len(t) == 6 and t == rows
    r = t[3]  # i % 3 == 0: has a fusion; i odd: the fusion pass
    assert r["pass"] == "fusion" and r.get("fusion") == "loop_fusion.1" and r["name"] == "add.3"
    assert "fusion" not in t[4] and t[4].get("fusion", "-") == "-"
    with pytest.raises(KeyError):
        t[4]["fusion"]
    assert list(t[4]) == ["pass", "reason", "name", "line", "pre", "how"] and len(t[4]) == 6
    assert t[-1]["line"] == 15 and [x["line"] for x in t[1:3]] == [11, 12]
    with pytest.raises(IndexError):
        t[6]
    with pytest.raises(TypeError):  # read-only
        t[0]["reason"] = "x"
    assert dict(t[0]) == rows[0] and json.loads(json.dumps(t.dicts())) == rows
    assert t.encoded() == columns.encode(rows)


def test_records_read_by_column_get_their_kernels_from_the_provenance_not_the_text():
    from analysis.fusion.codec import derive_decision_kernels

    class P:  # the provenance's one field this reads: each pre-optimization op's kernels
        pre_to_kernels = {"add": ["fusion.2"], "mul": ["fusion.1", "fusion.2"], "dot": ["custom-call.0"]}

    rows = [{"producer_pre": ["add", "mul"], "consumer_pre": ["dot"], "producer_kernels": ["forged"]},
            {"producer_pre": ["dot"]},  # no consumer side
            {"producer_pre": ["add", "mul"], "consumer_pre": []}]
    fd = {"records": columns.encode(rows)}
    d = _bundle_dict(fd["records"])
    b = Bundle.from_dict(d)
    t = b.fusion_decisions["records"]
    assert isinstance(t, columns.Table)
    assert t[0]["producer_kernels"] == []  # derived on load (no provenance here), not what the text said
    derive_decision_kernels(b.fusion_decisions, P())
    assert [r["producer_kernels"] for r in t] == [["fusion.1", "fusion.2"], ["custom-call.0"], ["fusion.1", "fusion.2"]]
    assert [r["consumer_kernels"] for r in t] == [["custom-call.0"], [], []]
    # written again without them
    assert "producer_kernels" not in json.loads(b.to_json())["fusion_decisions"]["records"]["columns"]
