"""The lecture model (app.lecture): a lecture's JSON read back as written, every step checked as
a link to its page is, bad input refused with one line saying where, and the gallery's shipped
lecture valid, on gallery models that exist."""

from __future__ import annotations

import json

import pytest

from analysis.errors import ExplorerError
from analysis.service.store import Store
from app import lecture
from sample_models import gallery

NAMES = {"mlp", "softmax"}


def _doc(*steps, title="Fusion in two steps"):
    return {"title": title, "steps": list(steps)}


def _step(page="explorer", caption="Look at the fusion", **link):
    return {"page": page, "link": link, "caption": caption}


def _refused(doc_or_text) -> str:
    text = doc_or_text if isinstance(doc_or_text, str) else json.dumps(doc_or_text)
    with pytest.raises(ExplorerError) as e:
        lecture.from_json(text, NAMES)
    line = e.value.one_line()
    assert "\n" not in line
    return line


def test_a_lecture_reads_back_as_written():
    doc = _doc(_step(model="mlp", backend="cpu", view="kernels", node="fusion.3", side="post"),
               _step(page="passes", caption="Passes  one\nby one", model="softmax", backend="h200", step="4"))
    lec = lecture.from_json(json.dumps(doc), NAMES)
    assert lec.title == "Fusion in two steps"
    assert [s.page for s in lec.steps] == ["explorer", "passes"]
    assert lec.steps[0].params == {"model": "mlp", "backend": "cpu", "view": "kernels", "node": "fusion.3",
                                   "side": "post"}
    assert lec.steps[1].caption == "Passes one by one"  # white space made one space
    # a step opens in presentation mode
    assert lec.steps[0].query()["present"] == "1"
    assert lecture.from_json(lecture.to_json(lec), NAMES) == lec


def test_an_explorer_step_is_written_as_its_permalink():
    # values as the permalink reads them (a flag in any case, the backend in capitals) come back
    # as the permalink writes them; a node without a side is on the optimized graph
    lec = lecture.from_dict(_doc(_step(model="mlp", backend="CPU", compare="yes", node="add.1")), NAMES)
    assert lec.steps[0].params == {"model": "mlp", "backend": "cpu", "node": "add.1", "side": "post",
                                   "compare": "1"}


@pytest.mark.parametrize("doc, where", [
    (_doc(_step(model="resnet")), "step 1: no gallery model named 'resnet'"),
    (_doc(_step(model="mlp"), _step(model="mlp", view="charts")), "step 2: unknown view 'charts'"),
    (_doc(_step(model="mlp", node="<img src=x>")), "step 1: '<img src=x>' is not an instruction name"),
    (_doc(_step(model="mlp", theme="dark")), "step 1: parameter 'theme' is not one the explorer page reads"),
    (_doc(_step(backend="cpu")), "step 1: an Explorer step names a gallery model"),
    (_doc(_step(page="slides", model="mlp")), "step 1: unknown page 'slides'"),
    (_doc(_step(page="passes", model="nope")), "step 1: no gallery model named 'nope'"),
    (_doc(_step(page="compare", model="mlp", a="<script>")), "step 1: parameter a='<script>' has characters"),
    (_doc(_step(model="mlp", caption="")), "step 1 caption: must be some text"),
    (_doc(_step(model="mlp", caption="x" * 401)), "step 1 caption: is 401 characters long (at most 400)"),
    (_doc(_step(model="mlp"), title=None), "title: must be some text"),
    ({"title": "t", "steps": []}, "steps: must be a list of one step or more"),
    ({"title": "t", "steps": [_step(model="mlp")] * 41}, "steps: 41 steps (at most 40)"),
    ({"title": "t", "steps": [_step(model="mlp")], "script": "x"}, "unknown field 'script'"),
    (["not", "an", "object"], "lecture: must be an object"),
])
def test_bad_lectures_are_refused_saying_where(doc, where):
    assert where in _refused(doc)


def test_text_that_is_not_json_or_too_long_is_refused():
    assert "not JSON (line 1, column 2)" in _refused("{oops")
    assert "at most 50000" in _refused(" " * 50_001)


def test_a_link_names_a_shipped_lecture_or_a_stored_one(tmp_path):
    store = Store(str(tmp_path / "s.sqlite"))
    text = json.dumps(_doc(_step(model="mlp", caption="one")))
    lid = store.put_code(text)
    assert lecture.load(lid, store, NAMES).steps[0].caption == "one"
    with pytest.raises(ExplorerError, match="no lecture with id 'abcdefgh' on this server"):
        lecture.load("abcdefgh", store, NAMES)
    with pytest.raises(ExplorerError, match="neither a lecture of the gallery"):
        lecture.load("../../etc/passwd", store, NAMES)
    # stored code that is not a lecture: refused as one
    with pytest.raises(ExplorerError, match="not JSON"):
        lecture.load(store.put_code("def model(x): return x"), store, NAMES)


def test_slide_picks_a_step_or_says_why_not():
    assert lecture.slide("3", 10) == (2, None)
    assert lecture.slide(None, 10) == (0, None)
    at, problem = lecture.slide("11", 10)
    assert at == 0 and "slide must be a number from 1 to 10, not '11'" in problem
    assert lecture.slide("-1", 10)[1] is not None


def test_the_shipped_lecture_walks_ten_claims_on_gallery_models():
    lec = lecture.shipped("xla-claims")  # checked against the real gallery
    assert len(lec.steps) == 10
    models = set(gallery())
    for i, s in enumerate(lec.steps, 1):
        assert s.caption.startswith(f"{i}. "), s.caption  # each says which claim it is
        assert "Look at" in s.caption  # and what to look at
        if "model" in s.params:
            assert s.params["model"] in models
        if s.params.get("backend"):
            assert s.params["backend"] in ("cpu", "h200")  # measured here, or the recorded H200 compile
    tabs = {s.params.get("view") for s in lec.steps if s.page == "explorer"}
    assert {"kernels", "memory", "code", "devices"} <= tabs
