"""The SQLite store and the ways its inputs can be broken: real SQLite files, no mocks.

Also malformed HLO uploads and corrupted Bundle files: a clear error, nothing else lost.
"""

from __future__ import annotations

import sqlite3
import threading

import pytest

from analysis.bundle.core import Bundle, bundle_from_hlo
from analysis.errors import ExplorerError
from analysis.service.store import Store, content_key

HLO = """HloModule tiny, is_scheduled=true

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %fusion = f32[4]{0} fusion(%p), kind=kLoop, calls=%fused
}

%fused (q: f32[4]) -> f32[4] {
  %q = f32[4]{0} parameter(0)
  ROOT %e = f32[4]{0} exponential(%q)
}
"""


def tiny_bundle(name="tiny") -> Bundle:
    return bundle_from_hlo(HLO, name)


def test_bundle_roundtrip_and_survives_reopen(tmp_path):
    path = tmp_path / "s.sqlite"
    s = Store(str(path))
    b = tiny_bundle()
    key = content_key("k", 1)
    assert s.get_bundle(key) is None
    s.put_bundle(key, b)
    got = s.get_bundle(key)
    assert got.to_dict() == Bundle.from_json(b.to_json()).to_dict()
    s.close()
    s2 = Store(str(path))  # a restart
    assert s2.get_bundle(key).stages == b.stages
    assert s2.recent()[0]["name"] == "tiny"
    assert s2.check()[0] is True
    assert s2._conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_content_key_is_stable_and_sensitive():
    a = content_key({"x": 1, "y": [1, 2]}, "jax-0.10")
    assert a == content_key({"y": [1, 2], "x": 1}, "jax-0.10")
    assert a != content_key({"x": 2, "y": [1, 2]}, "jax-0.10")
    assert a != content_key({"x": 1, "y": [1, 2]}, "jax-0.11")


def test_code_short_ids(tmp_path):
    s = Store(str(tmp_path / "s.sqlite"))
    i1 = s.put_code("def model(x):\n    return x\n")
    i2 = s.put_code("def model(x):\n    return x + 1\n")
    assert i1 != i2 and 8 <= len(i1) <= 12
    assert s.put_code("def model(x):\n    return x\n") == i1
    assert s.get_code(i1) == "def model(x):\n    return x\n"
    assert s.get_code(i1.upper()) == "def model(x):\n    return x\n"
    assert s.get_code("nosuchid") is None


def test_concurrent_writers(tmp_path):
    path = str(tmp_path / "s.sqlite")
    b = tiny_bundle()
    errors = []

    def writer(n):
        s = Store(path)  # each its own handle, like separate app processes
        try:
            for i in range(15):
                s.put_bundle(content_key(n, i), b)
                s.put_code(f"# {n} {i}\n")
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(Store(path).bundle_keys()) == 90


def test_garbage_file_is_a_store_error(tmp_path):
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"this is not a database at all\n" * 200)
    s = Store(str(path))
    with pytest.raises(ExplorerError) as info:
        s.get_bundle("k")
    assert info.value.phase == "store" and str(path) == info.value.file
    ok, msg = s.check()
    assert ok is False and "store" in msg
    assert path.read_bytes().startswith(b"this is not a database")  # not overwritten


def test_foreign_sqlite_file_is_refused_untouched(tmp_path):
    path = tmp_path / "other.sqlite"
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    c.execute("INSERT INTO customers VALUES (1, 'ada')")
    c.commit()
    c.close()
    s = Store(str(path))
    with pytest.raises(ExplorerError) as info:
        s.put_code("x = 1")
    assert info.value.phase == "store" and "not an XLA Explorer store" in info.value.message
    c = sqlite3.connect(path)
    assert [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["customers"]
    c.close()


def test_damaged_row_costs_only_that_row(tmp_path):
    path = str(tmp_path / "s.sqlite")
    s = Store(path)
    good, bad, worse = content_key("good"), content_key("bad"), content_key("worse")
    s.put_bundle(good, tiny_bundle("good"))
    s.put_bundle(bad, tiny_bundle("bad"))
    s.put_bundle(worse, tiny_bundle("worse"))
    c = sqlite3.connect(path)
    c.execute("UPDATE bundles SET data = ? WHERE key = ?", (b"\x00garbage", bad))
    import zlib
    c.execute("UPDATE bundles SET data = ? WHERE key = ?", (zlib.compress(b'{"schema_version": "x"'), worse))
    c.commit()
    c.close()
    for k in (bad, worse):
        with pytest.raises(ExplorerError) as info:
            s.get_bundle(k)
        assert info.value.phase == "store" and "damaged" in info.value.message
    assert s.get_bundle(good).title == "good"
    s.put_bundle(bad, tiny_bundle("bad"))  # overwriting repairs it
    assert s.get_bundle(bad).title == "bad"


def test_truncated_store_file(tmp_path):
    path = tmp_path / "s.sqlite"
    s = Store(str(path))
    for i in range(30):
        s.put_bundle(content_key(i), tiny_bundle())
    s._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    s.close()
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 3])
    s2 = Store(str(path))
    try:
        keys = s2.bundle_keys()
        for k in keys:
            s2.get_bundle(k)
        ok, _ = s2.check()
        assert ok is False
    except ExplorerError as e:
        assert e.phase == "store"


def test_meta_and_reserved_keys(tmp_path):
    s = Store(str(tmp_path / "s.sqlite"))
    s.put_meta("probe:abc", {"default": "cpu"})
    assert s.get_meta("probe:abc") == {"default": "cpu"}
    assert s.get_meta("nothing") is None
    with pytest.raises(ExplorerError):
        s.put_meta("app", "evil")


# ----------------------------------------------------------------------------- uploads


@pytest.mark.parametrize("text", [
    "HloModule broken\n\nENTRY %main {\n  %p = f32[4]{0} parameter(0)\n  ROOT %x = f32[4]{0} add(%p, \n",
    "this is not hlo at all",
    "",
    "HloModule m\nENTRY %e (p: f32[2]) -> f32[2] {\n  ROOT %p = f32[2]{0} parameter(0)\n",
])
def test_malformed_hlo_upload_is_a_parse_error(text):
    with pytest.raises(ExplorerError) as info:
        bundle_from_hlo(text, "upload", "upload.hlo")
    assert info.value.phase == "parse"
    assert "\n" not in info.value.one_line()


@pytest.mark.parametrize("data", [
    b"{not json", b"[]", b'{"schema_version": 999}', b'{"stages": {}}', b"\xff\xfe\x00garbage",
    b'{"schema_version": 1, "stages": {"hlo_after": 5}}', b'{"schema_version": 1, "kernels": [1, 2]}',
])
def test_corrupted_bundle_file_is_a_load_error(tmp_path, data):
    f = tmp_path / "b.json"
    f.write_bytes(data)
    with pytest.raises(ExplorerError) as info:
        Bundle.load(str(f))
    assert info.value.phase == "load" and info.value.file == str(f)


def test_corrupted_bundle_does_not_affect_the_store(tmp_path):
    s = Store(str(tmp_path / "s.sqlite"))
    s.put_bundle("k", tiny_bundle())
    with pytest.raises(ExplorerError):
        Bundle.from_json(b"{broken")
    assert s.get_bundle("k").title == "tiny"
