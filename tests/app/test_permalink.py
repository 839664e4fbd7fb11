"""Permalinks: view state <-> query parameters, round trips and bad links (never an exception)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from app.permalink import (link_base, params_to_state, public_url, query_string, resolve_code, selection,
                           state_to_params)

NAMES = {"mlp", "transformer_block"}


def _clean(state: dict) -> dict:
    return {k: v for k, v in state.items() if k != "errors" and v not in (None, {})}


@pytest.mark.parametrize("state", [
    {"model": "mlp"},
    {"model": "transformer_block", "backend": "gpu", "view": "kernels", "node": "fusion.3", "side": "post"},
    {"code": "abcdefgh234", "backend": "cpu", "line": 14, "view": "source"},
    {"model": "mlp", "backend": "cpu", "view": "memory", "node": "ynn_fusion.5", "side": "post"},
    {"model": "mlp", "present": True, "measure": False, "compare": True},
    {"model": "mlp", "view": "devices"},
    {"model": "mlp", "jax": "0.10.2"},
    {"code": "abcdefgh234", "jax": "0.12.0.1", "backend": "cpu"},
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


def test_a_bad_jax_version_is_dropped_the_rest_applies():
    s = params_to_state({"model": "mlp", "jax": "0.10.2/../..", "backend": "cpu"}, NAMES)
    assert s["jax"] is None and (s["model"], s["backend"]) == ("mlp", "cpu")
    assert s["errors"] == ["link: jax must be a release like 0.10.2, not '0.10.2/../..'"]
    assert "jax" not in state_to_params({"model": "mlp", "jax": None})


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
    ({"devices": "9"}, "devices must be a number from 1 to 8"),
    ({"devices": "-1"}, "devices must be a number from 1 to 8"),
    ({"devices": "eight"}, "devices must be a number from 1 to 8"),
    ({"jax": "latest"}, "jax must be a release like 0.10.2"),
    ({"jax": "0.10.2; rm -rf /"}, "jax must be a release like 0.10.2"),
    ({"jax": "10"}, "jax must be a release like 0.10.2"),  # a release has at least one dot
    ({"jax": "0.10."}, "jax must be a release like 0.10.2"),
    ({"jax": "0.1.2.3.4"}, "jax must be a release like 0.10.2"),  # at most four parts
    ({"jax": "0.12345.1"}, "jax must be a release like 0.10.2"),  # at most four digits a part
    ({"jax": "\u0660.\u0661\u0660"}, "jax must be a release like 0.10.2"),  # Arabic-Indic digits: not 0-9
    ({"jax": "<b>0.10.2</b>"}, "jax must be a release like 0.10.2"),
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


def test_the_settings_that_change_what_is_shown_travel_in_the_link():
    p = state_to_params({"model": "mlp", "present": True, "measure": False, "compare": True})
    assert (p["present"], p["measure"], p["compare"]) == ("1", "0", "1")
    # the defaults (not presenting, measuring, no fusion-off compile) are left out
    assert state_to_params({"model": "mlp", "present": False, "measure": True, "compare": False}) == {"model": "mlp"}
    st = params_to_state({"model": "mlp", "present": "yes", "measure": "off", "compare": "TRUE"}, NAMES)
    assert (st["present"], st["measure"], st["compare"], st["errors"]) == (True, False, True, [])


def test_a_bad_flag_is_one_line_and_the_rest_applies():
    st = params_to_state({"model": "mlp", "measure": "maybe", "present": "1"}, NAMES)
    assert st["measure"] is None and st["present"] is True and st["model"] == "mlp"
    assert st["errors"] == ["link: measure must be 1 or 0, not 'maybe'"]


def test_the_public_address_comes_from_the_setting_else_the_request(tmp_path):
    none = str(tmp_path / "absent.toml")
    assert public_url({}, none) == (None, None)
    assert public_url({"XLA_EXPLORER_PUBLIC_URL": "https://xe.school.edu/"}, none) == ("https://xe.school.edu", None)
    toml = tmp_path / "s.toml"
    toml.write_text('[app]\npublic_url = "http://10.0.0.5:8501"\n')
    assert public_url({}, str(toml)) == ("http://10.0.0.5:8501", None)
    # the environment wins over the file
    assert public_url({"XLA_EXPLORER_PUBLIC_URL": "https://a.org"}, str(toml))[0] == "https://a.org"
    for bad in ("javascript:alert(1)", "https://a.org/?x=1", "ftp://a.org", "https://" + "a" * 400):
        url, problem = public_url({"XLA_EXPLORER_PUBLIC_URL": bad}, none)
        assert url is None and problem.startswith("settings: XLA_EXPLORER_PUBLIC_URL is not an http(s)")
    broken = tmp_path / "broken.toml"
    broken.write_text("[app\n")
    url, problem = public_url({}, str(broken))
    assert url is None and problem.startswith("settings: ") and "\n" not in problem
    assert link_base("http://localhost:8501/?model=mlp", "https://xe.school.edu") == "https://xe.school.edu/"
    assert link_base("http://localhost:8501/compare?a=1", "https://xe.school.edu", "compare") == "https://xe.school.edu/compare"
    assert link_base("http://host.lan:8501/?model=mlp#x", None) == "http://host.lan:8501/"
    assert link_base(None, None) == ""


def test_every_tab_under_the_graphs_can_be_linked():
    # a tab a link could not name opened as the Kernels tab (view=devices did)
    from app.explorer_link import TABS

    for view in TABS:
        back = params_to_state({"view": view})
        assert back["errors"] == [] and back["view"] == view
