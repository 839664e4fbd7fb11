"""Permalinks: view state <-> query parameters, round trips and bad links (never an exception)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from app.permalink import (params_to_state, query_string, resolve_code, selection, state_to_params)

NAMES = {"mlp", "transformer_block"}


def _clean(state: dict) -> dict:
    return {k: v for k, v in state.items() if k != "errors" and v not in (None, {})}


@pytest.mark.parametrize("state", [
    {"model": "mlp"},
    {"model": "transformer_block", "backend": "gpu", "view": "kernels", "node": "fusion.3", "side": "post"},
    {"code": "abcdefgh234", "backend": "cpu", "line": 14, "view": "source"},
    {"model": "mlp", "backend": "cpu", "view": "memory", "node": "ynn_fusion.5", "side": "post"},
    {"model": "mlp", "node": "dot.1", "side": "pre", "view": "text",
     "options": {"xla_disable_hlo_passes": "fusion,dot-library-rewriter", "xla_cpu_enable_fast_math": True,
                 "xla_gpu_autotune_level": 0, "xla_dump_hlo_pass_re": "a;b\\c"}},
])
def test_round_trip(state):
    params = state_to_params(state)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in params.items())
    back = params_to_state(params, NAMES)
    assert back["errors"] == []
    assert _clean(back) == state
    # and through a real URL (what a browser sends back)
    qs = parse_qs(urlparse("http://x/" + query_string(state)).query)
    assert _clean(params_to_state(qs, NAMES)) == state


def test_gallery_names_default_to_the_gallery():
    assert params_to_state({"model": "mlp"})["model"] == "mlp"
    assert query_string({}) == ""


@pytest.mark.parametrize("params, expect", [
    ({"model": "nope"}, "no gallery model named 'nope'"),
    ({"model": "../../etc/passwd"}, "no gallery model"),
    ({"code": "!!"}, "not a code id"),
    ({"code": "abc"}, "not a code id"),
    ({"backend": "tpu"}, "unknown backend"),
    ({"opt": "notxla=1"}, "bad compiler option"),
    ({"opt": "xla_foo"}, "bad compiler option"),
    ({"view": "graphs!"}, "unknown view"),
    ({"node": "<script>"}, "not an instruction name"),
    ({"node": "x", "side": "left"}, "unknown side"),
    ({"line": "-3"}, "positive whole number"),
    ({"line": "1e9"}, "positive whole number"),
    ({"model": "mlp", "code": "abcdefgh"}, "either model= or code="),
    ({"node": "x", "line": "3"}, "either node= or line="),
    ({"model": "m" * 5000}, "too long"),
])
def test_bad_params_are_error_values(params, expect):
    state = params_to_state(params, NAMES)
    assert any(expect in e for e in state["errors"]), state["errors"]
    assert all(isinstance(e, str) and "\n" not in e for e in state["errors"])


def test_bad_values_are_dropped_the_rest_applies():
    s = params_to_state({"model": "mlp", "backend": "nope", "opt": "xla_a=1;bad;xla_b=true", "line": "7",
                         "utm_source": "mail", "embed": "true"}, NAMES)
    assert s["model"] == "mlp" and s["backend"] is None and s["line"] == 7
    assert s["options"] == {"xla_a": 1, "xla_b": True}
    assert len(s["errors"]) == 2


@pytest.mark.parametrize("params", [None, 42, "model=mlp", [("model", "mlp")], {"model": None}, {"model": []},
                                    {"model": 5}, {"line": ["1", "2"]}])
def test_never_raises(params):
    s = params_to_state(params, NAMES)
    assert isinstance(s["errors"], list)


def test_a_mapping_that_raises():
    class Bad(dict):
        def get(self, *a):
            raise RuntimeError("boom")

    s = params_to_state(Bad(), NAMES)
    assert s["model"] is None and s["errors"]


def test_selection():
    assert selection(params_to_state({"node": "fusion.1"}, NAMES)) == {"side": "post", "name": "fusion.1"}
    assert selection(params_to_state({"node": "add.2", "side": "pre"}, NAMES)) == {"side": "pre", "name": "add.2"}
    assert selection(params_to_state({"line": "12"}, NAMES)) == {"line": 12}
    assert selection(params_to_state({}, NAMES)) == {}


def test_code_ids_from_the_store(tmp_path):
    from analysis.service.store import Store

    store = Store(str(tmp_path / "s.sqlite"))
    cid = store.put_code("def model(x):\n    return x\n")
    state = params_to_state(state_to_params({"code": cid}), NAMES)
    assert state["code"] == cid and resolve_code(state, store).startswith("def model")
    missing = params_to_state({"code": "zzzzzzzz"}, NAMES)
    assert resolve_code(missing, store) is None and "no code with id 'zzzzzzzz'" in missing["errors"][0]
    bad_store = tmp_path / "not.sqlite"
    bad_store.write_bytes(b"this is not sqlite" * 100)
    state = params_to_state({"code": cid}, NAMES)
    assert resolve_code(state, Store(str(bad_store))) is None and "cannot read code" in state["errors"][0]
    store.close()
