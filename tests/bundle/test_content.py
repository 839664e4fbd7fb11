"""analysis.bundle.content: values a front end makes from a bundle, found by any bundle of the
same content (the draft made beside a compile, the answer that follows, a stored copy read
back) and by no bundle of other content. Hand-written modules; what each value is made of is
counted here."""

from __future__ import annotations

import threading

import pytest

from analysis.bundle.content import ContentCache, content_key
from analysis.bundle.core import Bundle
from analysis.pipeline import Pipeline, WorkAhead
from tests.pipeline.test_pipeline import POST, POST_COMPILED, POST_OTHER  # one module; its compiled print; another

PRE = """HloModule m
ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  %a = f32[8]{0} add(%p, %p), metadata={op_name="jit(f)/add" source_file="f.py" source_line=3}
  ROOT %n = f32[8]{0} negate(%a), metadata={op_name="jit(f)/neg" source_file="f.py" source_line=4}
}
"""
PARTS = ("before", "after", "decisions", "timings", "source")


def _bundle(post=POST, code="def f(x): ...", timings=None) -> Bundle:
    b = Bundle(stages={"hlo_before": PRE, "hlo_after": post}, source={"name": "f", "file": "f.py", "code": code},
               environment={"platform": "cpu"}, timings=timings)
    return b


def test_a_value_is_made_once_for_every_bundle_of_the_same_content():
    cache, made = ContentCache(PARTS, size=4), []
    first = cache.get(_bundle(), lambda: made.append(1) or {"n": len(made)})
    again = cache.get(_bundle(), lambda: made.append(1) or {"n": len(made)})  # other objects, same texts
    assert again is first and made == [1]


@pytest.mark.parametrize("other", [
    dict(post=POST_OTHER),  # another optimized module
    dict(code="def f(x): return -x"),  # another source
    dict(timings={"kernels": {"fused": {"mean_us": 3.0}}}),  # measured
])
def test_another_content_gets_its_own_value(other):
    cache, made = ContentCache(PARTS, size=4), []
    cache.get(_bundle(), lambda: made.append("plain"))
    cache.get(_bundle(**other), lambda: made.append("other"))
    assert made == ["plain", "other"]


def test_a_value_made_of_fewer_parts_is_shared_by_bundles_that_differ_elsewhere():
    cache, made = ContentCache(("before",), size=4), []
    cache.get(_bundle(), lambda: made.append(1))
    cache.get(_bundle(post=POST_OTHER, code="other"), lambda: made.append(2))
    assert made == [1]


def test_the_oldest_value_goes_when_the_cache_is_full_and_a_forgotten_one_is_made_again():
    cache, made = ContentCache(("source",), size=2), []
    for code in ("a", "b", "c", "a"):  # "a" went when "c" came
        cache.get(_bundle(code=code), lambda: made.append(code))
    assert made == ["a", "b", "c", "a"]
    cache.forget(_bundle(code="a"))
    cache.get(_bundle(code="a"), lambda: made.append("a again"))
    assert made[-1] == "a again"
    with pytest.raises(ValueError):
        ContentCache(("kernels",), size=1)  # not a part a key is made of


def test_a_value_being_made_is_waited_for_not_made_twice():
    cache, made = ContentCache(PARTS, size=4), []
    started, release = threading.Event(), threading.Event()

    def slow():
        made.append("slow")
        started.set()
        release.wait(30)
        return "value"

    got = {}
    t = threading.Thread(target=lambda: got.setdefault("thread", cache.get(_bundle(), slow)))
    t.start()
    assert started.wait(30)
    waiter = threading.Thread(target=lambda: got.setdefault("page", cache.get(_bundle(), lambda: made.append("again"))))
    waiter.start()
    release.set()
    t.join(30)
    waiter.join(30)
    assert made == ["slow"] and got == {"thread": "value", "page": "value"}


class _Probe(WorkAhead):
    """A front end's work ahead, keeping what it makes in its own content cache."""

    def __init__(self, cache):
        self.cache, self.before_ops, self.drafts = cache, [], 0

    def before(self, module):
        self.before_ops = [i.name for i in module.entry.instructions]

    def draft(self, bundle):
        self.drafts += 1
        self.cache.get(bundle, lambda: ("made on the draft", [k.name for k in bundle.kernels]))


def test_work_ahead_gets_the_module_before_optimization_then_a_draft_whose_value_the_bundle_finds():
    """The dump's optimized text and the compiled one differ in a backend_config's field order
    (one module): the draft of the dump and the bundle of the compiled text share the value."""
    cache = ContentCache(PARTS, size=4)
    probe = _Probe(cache)
    pipe = Pipeline()
    pipe.offer("hlo_before", PRE)
    pipe.prepare_before(probe)
    assert probe.before_ops == ["p", "a", "n"]
    pipe.offer("hlo_after", POST)
    pipe.work_ahead(probe, None, {"name": "f", "file": "f.py", "code": "def f(x): ..."})
    pipe.offer("hlo_after", POST_COMPILED)
    b = pipe.onto(_bundle(post=POST_COMPILED))
    assert probe.drafts == 1
    assert cache.get(b, lambda: "made again") == ("made on the draft", ["f"])
    # a bundle of other content does not find it
    assert cache.get(_bundle(post=POST_OTHER), lambda: "made again") == "made again"


def test_a_work_ahead_that_fails_is_a_warning_and_the_bundle_still_comes():
    class Broken(WorkAhead):
        def draft(self, bundle):
            raise RuntimeError("boom")

    pipe = Pipeline()
    pipe.offer("hlo_before", PRE)
    pipe.offer("hlo_after", POST)
    with pytest.warns(UserWarning, match="work ahead of a bundle failed: RuntimeError: boom"):
        pipe.work_ahead(Broken(), None, {"name": "f"})
    assert [k.name for k in pipe.onto(_bundle()).kernels] == ["f"]


def test_the_key_names_what_each_part_holds():
    b = _bundle()
    key = content_key(b, ("after",))
    assert key.endswith("@cpu")  # the platform the kernels were found for
    assert content_key(_bundle(), ("after",)) == key
    assert content_key(_bundle(post=POST_OTHER), ("after",)) != key
