"""A big program's graphs before its timings: a measuring job with ``preview_kernels`` sends its
compiled bundle first (``{"preview": ...}``), ``compile_job(early=True)`` hands it out with
``Outcome.pending``, and the measured bundle follows; the app shows the graphs meanwhile.

The queue's rules are tested with a stand-in runner that blocks between its preview and its
answer (so "before" is an event, not a race); the protocol with real sandboxed workers; the page
with Streamlit's AppTest."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace

import pytest

from analysis.bundle.core import bundle_from_hlo
from analysis.errors import ExplorerError
from analysis.service import sandbox
from analysis.service.job import Job
from analysis.service.messages import read as read_message
from analysis.service.cache_keys import cache_key
from analysis.service.job_queue import JobQueue, compile_job
from analysis.service.settings import Limits
from analysis.service.store import Store
from analysis.service.worker import EarlyParts, Ran
from app.explorer_state import explorer_state
from sample_models._stack import stack_source
from tests.paths import ROOT
from tests.polling import holds, wait_until

HLO = """HloModule tiny, is_scheduled=true

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %e = f32[4]{0} exponential(%p)
}
"""


class PreviewRunner:
    """Sends a preview (the bundle unmeasured), then waits for ``release`` before it answers
    with the measured bundle."""

    def __init__(self):
        self.release = threading.Event()
        self.previewed = threading.Event()

    def __call__(self, job, progress=None, limits=None, cancel=None, preview=None):
        if preview is not None:
            preview(bundle_from_hlo(HLO, job.name))
            self.previewed.set()
        assert self.release.wait(20)
        b = bundle_from_hlo(HLO, job.name)
        b.timings = {"kernels": {}, "step_median_s": 1e-3}
        return Ran(b, isolated=False)


def _queue(runner, tmp_path=None):
    store = Store(str(tmp_path / "s.sqlite")) if tmp_path else None
    return JobQueue(Limits(workers=1, session_jobs=5), store=store, runner=runner)


def test_early_hands_out_the_compile_and_the_measured_bundle_follows(tmp_path):
    r = PreviewRunner()
    q = _queue(r, tmp_path)
    job = Job(source="def model(x): return x", name="big", measure=True, preview_kernels=1)
    out = compile_job(job, session="s", queue=q, early=True)
    assert out.pending is not None and not out.cached
    assert out.bundle.timings is None and out.bundle.kernels[0].name == "e"
    assert not out.pending.done()  # the runner is still held: the preview came first
    r.release.set()
    final = out.pending.result(20)
    assert final.bundle.timings["step_median_s"] == 1e-3 and final.pending is None
    assert out.pending.result(0) is final  # collected once
    # what the cache holds is the measured bundle, never the preview
    again = compile_job(job, session="s", queue=q, early=True)
    assert again.cached and again.pending is None and again.bundle.timings["step_median_s"] == 1e-3
    q.shutdown()


def test_whoever_waits_on_a_job_is_woken_by_its_preview_not_at_its_next_look():
    # the page's thread waits on the handle; a preview that did not wake it sat until the wait's
    # timeout (up to 0.1 s) before the page took it. Waited here with no timeout at all: only
    # the preview can end the wait (the runner is held, nothing else comes)
    r = PreviewRunner()
    q = _queue(r)
    h = q.submit(Job(name="woken", measure=True, preview_kernels=1), session="s")
    seen = []

    def waiter():
        while h.preview is None and not h.done():
            h.wait_change(None)
        seen.append(h.preview)

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    assert r.previewed.wait(20)
    t.join(20)
    done_before_release = not t.is_alive()
    r.release.set()  # (a waiter the preview did not wake is woken by the end instead)
    t.join(20)
    assert done_before_release, "the preview did not wake the waiter"
    assert seen and seen[0] is not None and seen[0].timings is None
    assert h.result(20).bundle.timings  # and the job still ends measured
    q.shutdown()


def test_without_early_or_without_preview_kernels_the_caller_waits_for_the_timings():
    r = PreviewRunner()
    r.release.set()
    q = _queue(r)
    out = compile_job(Job(name="a", measure=True, preview_kernels=1), session="s", queue=q)
    assert out.pending is None and out.bundle.timings
    r.previewed.clear()
    out = compile_job(Job(name="b", measure=True), session="s", queue=q, early=True)
    assert out.pending is None and out.bundle.timings and not r.previewed.is_set()  # none was asked for
    q.shutdown()


def test_a_runner_that_cannot_preview_still_runs_the_job():
    def plain(job, progress=None, limits=None, cancel=None):
        b = bundle_from_hlo(HLO, job.name)
        b.timings = {"kernels": {}}
        return Ran(b, isolated=False)

    q = _queue(plain)
    out = compile_job(Job(name="p", measure=True, preview_kernels=1), session="s", queue=q, early=True)
    assert out.pending is None and out.bundle.timings["kernels"] == {}
    q.shutdown()


def test_when_the_program_was_previewed_is_not_part_of_the_cache_key():
    base = Job(source="def model(x): return x", name="p", measure=True)
    assert cache_key(base, "cpu:x") == cache_key(Job(source=base.source, name="p", measure=True, preview_kernels=5),
                                                 "cpu:x")


def test_a_bad_preview_is_dropped_and_a_good_one_is_checked_like_a_bundle():
    job = Job(source="def model(x): return x  # the user's code", name="mine", filename="<pasted code>")
    got = []
    check = EarlyParts(job, got.append)
    with pytest.warns(UserWarning, match="preview was dropped"):
        check({"stages": {"hlo_after": "HloModule broken\nENTRY %m {"}})
    with pytest.warns(UserWarning, match="preview was dropped"):
        check(["not", "a", "bundle"])
    assert got == [] and check.bundle is None
    forged = bundle_from_hlo(HLO, "forged").to_dict()
    forged["source"] = {"kind": "code", "name": "forged", "code": "import os  # not what the user wrote"}
    forged["kernels"] = []  # derived again from the HLO: a worker cannot hide its kernels
    check(forged)
    assert len(got) == 1 and got[0].source["code"] == job.source and got[0].source["name"] == "mine"
    assert [k.name for k in got[0].kernels] == ["e"]
    check(bundle_from_hlo(HLO, "second").to_dict())  # one preview per job
    assert len(got) == 1


def test_the_measured_bundle_reuses_the_previews_parses_of_equal_texts_only():
    shown = bundle_from_hlo(HLO, "p", before_text=HLO)
    assert shown.kernel("e") is not None  # the page looked a kernel up: its index is cached beside the parses
    measured = bundle_from_hlo(HLO, "p", before_text=HLO.replace("exponential", "negate"))
    measured.share_from(shown)
    assert measured.module("hlo_after") is shown.module("hlo_after")
    assert measured.module("hlo_before") is not shown.module("hlo_before")  # another text: its own parse
    assert measured.module("hlo_before").entry.root.opcode == "negate"


def test_after_its_preview_a_worker_sends_only_what_measuring_added():
    """``{"measured"}`` completes the preview this side checked: the kernels and everything else
    are the preview's (derived here), the timings the worker's, checked against the schema."""
    from analysis.service.worker import interpret

    job = Job(source="def model(x): return x", name="mine", filename="<pasted code>", measure=True)
    got = []
    early = EarlyParts(job, got.append)
    early(bundle_from_hlo(HLO, "p").to_dict())
    timings = {"kernels": {"e": {"name": "e", "route": "xla", "median_s": 2e-6, "share": 0.5}}, "step_median_s": 3e-6}
    ran = interpret(read_message({"measured": {"timings": timings, "fusion_comparison": None}}), True, job,
                    pipe=early.wait(), preview=early.bundle)
    b = ran.bundle
    assert ran.isolated and b is not got[0] and b.timings["kernels"]["e"]["median_s"] == 2e-6
    assert got[0].timings is None  # the preview on show is not changed under the page
    assert [k.name for k in b.kernels] == ["e"] and b.source["code"] == job.source
    assert b.module("hlo_after") is got[0].module("hlo_after")  # parsed once, for both

    def refused(msg, preview=early.bundle):
        with pytest.raises(ExplorerError) as e:
            interpret(read_message(msg), True, job, pipe=early.wait(), preview=preview)
        return e.value.phase, e.value.message

    # no preview kept here (a bad one was dropped): nothing to complete
    assert refused({"measured": {"timings": timings}}, preview=None)[1] == \
        "the worker sent a measurement of a preview this side does not have"
    # a field the preview said (the kernels, the texts): refused, not merged
    assert refused({"measured": {"timings": timings, "kernels": []}}) == \
        ("protocol", "the worker sent a malformed measurement")
    assert refused({"measured": {"stages": {"hlo_after": HLO}}}) == \
        ("protocol", "the worker sent a malformed measurement")
    # what it read after the preview is checked as a bundle's is
    phase, msg = refused({"measured": {"timings": timings, "memory": {"schedule": "everything"}}})
    assert phase == "protocol" and msg.startswith("the worker sent a bad measurement:")
    assert refused({"measured": ["timings"]})[1] == "the worker sent a malformed measurement"
    phase, msg = refused({"measured": {"timings": {"kernels": {"e": {"route": "xla"}}}}})
    assert phase == "protocol" and msg.startswith("the worker sent a bad measurement:") and "median_s" in msg
    assert refused({"measured": {"timings": "fast"}})[1].startswith("the worker sent a bad measurement:")


def test_the_measured_bundle_keeps_what_the_preview_derived_unless_measuring_changed_its_inputs():
    from analysis.program.layers import layers_of_bundle
    from analysis.service.worker import interpret

    job = Job(source="def model(x): return x", name="mine", filename="<pasted code>", measure=True)
    early = EarlyParts(job, lambda b: None)
    early(bundle_from_hlo(HLO, "p", before_text=HLO).to_dict())
    shown = early.bundle
    made = []
    fp = lambda b: (b.module("hlo_before"), b.provenance, b.kernels)  # noqa: E731 - what it is made from
    index = shown.derived("an index", fp(shown), lambda: made.append(1) or {"made": len(made)})
    tree = layers_of_bundle(shown)  # holds the times: made again once they come
    timings = {"kernels": {"e": {"name": "e", "route": "xla", "median_s": 2e-6, "share": 0.5}}, "step_median_s": 3e-6}
    b = interpret(read_message({"measured": {"timings": timings, "fusion_comparison": None}}), True, job,
                  pipe=early.wait(), preview=shown).bundle
    assert b.derived("an index", fp(b), lambda: made.append(1) or {"made": len(made)}) is index
    assert made == [1]  # made once, for the preview
    assert tree is not None and layers_of_bundle(b) is not tree and layers_of_bundle(b).time_s is not None
    b.kernels = list(b.kernels)  # another kernel list: the index is made again from it
    assert b.derived("an index", fp(b), lambda: made.append(1) or {"made": len(made)}) == {"made": 2}


def test_hlo_sent_early_is_parsed_once_and_only_for_the_same_text():
    job = Job(name="p")
    early = EarlyParts(job)
    early.texts({"hlo_after": HLO, "hlo_before": HLO, "jaxpr": "not parsed", "hlo_x": 5})
    pipe = early.wait()
    assert pipe.parse("hlo_after") is not None and pipe.parse("hlo_before") is not None
    assert pipe.parse("jaxpr") is None and pipe.parse("hlo_x") is None
    d = bundle_from_hlo(HLO, "p", before_text=HLO.replace("exponential", "negate")).to_dict()
    from analysis.service.worker import untrusted_bundle

    b = untrusted_bundle(d, job, pipe)
    assert b.module("hlo_after") is pipe.parse("hlo_after")[1]  # the early parse
    assert b.module("hlo_before").entry.root.opcode == "negate"  # its own text, its own parse
    # early text that does not parse is no error: the bundle's text decides
    bad = EarlyParts(job)
    bad.texts({"hlo_after": "HloModule broken\nENTRY %m {"})
    assert bad.wait().parse("hlo_after") is None
    assert [k.name for k in untrusted_bundle(bundle_from_hlo(HLO, "p").to_dict(), job, bad.wait()).kernels] == ["e"]
    # and a bundle whose own text does not parse is still refused, whatever came early
    broken = bundle_from_hlo(HLO, "p").to_dict()
    broken["stages"]["hlo_after"] = "HloModule broken\nENTRY %m {"
    with pytest.raises(ExplorerError, match="does not parse"):
        untrusted_bundle(broken, job, pipe)


def test_hlo_sent_early_is_analyzed_here_for_a_bundle_of_the_same_texts():
    """The kernels of a worker's bundle are derived here, from its HLO: from the texts it sent
    early, while it was still busy, if they are the bundle's and the platform is the one the
    analysis assumed; otherwise again from the bundle's own."""
    from analysis.service.worker import untrusted_bundle

    job = Job(name="p")
    early = EarlyParts(job)
    early.texts({"hlo_after": HLO, "hlo_before": HLO})
    pipe = early.wait()
    ahead = pipe.analysis()
    assert [k.name for k in ahead[0]] == ["e"]  # an exponential: one kernel, named e
    d = bundle_from_hlo(HLO, "p", before_text=HLO).to_dict()
    d["kernels"] = []  # what the worker says is never what is shown
    b = untrusted_bundle(d, job, pipe)
    assert [k.name for k in b.kernels] == ["e"] and b.kernels[0] is ahead[0][0]  # the analysis made ahead
    assert b.provenance is ahead[1] and b.metrics == ahead[2] and b.metrics is not ahead[2]
    gpu = dict(d, environment={"platform": "gpu"})  # not the platform it was made for: made again
    g = untrusted_bundle(gpu, job, pipe)
    assert [k.name for k in g.kernels] == ["e"] and g.kernels[0] is not ahead[0][0]
    other = bundle_from_hlo(HLO.replace("exponential", "negate"), "p", before_text=HLO).to_dict()
    o = untrusted_bundle(other, job, pipe)  # another optimized text: its own parse and analysis
    assert o.kernels[0] is not ahead[0][0] and o.module("hlo_after").entry.root.opcode == "negate"


def test_a_workers_bundle_leaves_out_what_the_parent_has_or_derives():
    """The worker sends no kernels or provenance (derived here anyway) and not the HLO texts it
    sent early; the parent puts those texts back, in the usual order of the stages."""
    from analysis.service.worker import untrusted_bundle
    from analysis.service.messages import leave_out

    b = bundle_from_hlo(HLO, "p", before_text=HLO)
    b.stages = {"jaxpr": "{ lambda ; a. let  in (a,) }", "hlo_before": b.stages["hlo_before"],
                "hlo_after": b.stages["hlo_after"]}
    sent = {"hlo_before": b.stages["hlo_before"], "hlo_after": b.stages["hlo_after"]}
    d = leave_out(b, sent)
    assert "kernels" not in d and "provenance" not in d and list(d["stages"]) == ["jaxpr"]
    assert list(leave_out(b, {})["stages"]) == ["jaxpr", "hlo_before", "hlo_after"]  # nothing sent: all of it
    job = Job(name="p")
    early = EarlyParts(job)
    early.texts(sent)
    got = untrusted_bundle(d, job, early.wait(), early.sent)
    assert list(got.stages) == ["jaxpr", "hlo_before", "hlo_after"] and got.stages["hlo_after"] == HLO
    assert [k.name for k in got.kernels] == ["e"] and got.provenance is not None
    # a text the bundle does carry is the bundle's, whatever came early
    d2 = leave_out(b, {})
    d2["stages"]["hlo_after"] = HLO.replace("exponential", "negate")
    assert untrusted_bundle(d2, job, early.wait(), early.sent).module("hlo_after").entry.root.opcode == "negate"


def test_the_jaxpr_and_stablehlo_sent_with_the_first_texts_are_left_out_and_put_back():
    """The jaxpr and StableHLO (known before XLA starts) come with the first texts message; the
    bundle leaves them out like the HLO texts, and the parent puts all four back in order. What
    is not a text of a stage is not taken."""
    from analysis.service.worker import untrusted_bundle
    from analysis.service.messages import leave_out

    b = bundle_from_hlo(HLO, "p", before_text=HLO)
    jaxpr, stablehlo = "{ lambda ; a:f32[4]. let b = exp a in (b,) }", "module @jit_f { }"
    b.stages = {"jaxpr": jaxpr, "stablehlo": stablehlo, "hlo_before": b.stages["hlo_before"],
                "hlo_after": b.stages["hlo_after"]}
    first = {"stablehlo": stablehlo, "jaxpr": jaxpr, "hlo_before": b.stages["hlo_before"],
             "kernels": "[]", "metrics": {"x": 1}}
    early = EarlyParts(Job(name="p"))
    early.texts(first)
    early.texts({"hlo_after": b.stages["hlo_after"]})
    assert set(early.sent) == {"jaxpr", "stablehlo", "hlo_before", "hlo_after"}
    sent = {k: v for k, v in b.stages.items()}
    d = leave_out(b, sent)
    assert "stages" not in d or not d["stages"]
    got = untrusted_bundle(d, Job(name="p"), early.wait(), early.sent)
    assert list(got.stages) == ["jaxpr", "stablehlo", "hlo_before", "hlo_after"]
    assert got.stages["jaxpr"] == jaxpr and got.stages["stablehlo"] == stablehlo
    # a message of texts alone (no HLO) counts as one of the three taken
    other = EarlyParts(Job(name="p"))
    for _ in range(4):
        other.texts({"jaxpr": "j"})
    other.texts({"hlo_before": HLO})
    assert other.sent == {"jaxpr": "j"}


FUSING_MODEL = """
import jax
import jax.numpy as jnp


def model(x, w):
    h = jnp.tanh(x @ w) * 2.0 + 1.0
    return jax.nn.softmax(h, axis=-1).sum(axis=0)


def example_inputs():
    return (jnp.ones((64, 32)), jnp.ones((32, 16)))
"""


@pytest.fixture(scope="module")
def fusing_compile():
    from analysis.compile.load import load_source
    from analysis.compile.stages import compile_model

    b = compile_model(load_source(FUSING_MODEL, "m.py", "m"), "cpu").bundle
    assert b.fusion_decisions and b.fusion_decisions["records"]
    return b


def _code_job():
    return Job(kind="code", source=FUSING_MODEL, filename="m.py", name="m")


def _sent_early(b, job, decisions, ahead=None):
    import json

    early = EarlyParts(job, ahead=ahead)
    early.texts({"hlo_before": b.stages["hlo_before"]})
    early.texts({"hlo_after": b.stages["hlo_after"]})
    early.decisions(json.loads(json.dumps(decisions)))  # as a worker's line carries them
    return early


def test_fusion_decisions_sent_early_are_checked_and_put_back_where_the_bundle_leaves_them_out(fusing_compile):
    from analysis.fusion.codec import fusion_decisions_json
    from analysis.service.worker import untrusted_bundle
    from analysis.service.messages import leave_out

    b, job = fusing_compile, _code_job()
    sent = {"hlo_before": b.stages["hlo_before"], "hlo_after": b.stages["hlo_after"]}
    early = _sent_early(b, job, fusion_decisions_json(b.fusion_decisions))
    pipe = early.wait()
    assert early.decided is not None and len(early.decided["records"]) == len(b.fusion_decisions["records"])
    d = leave_out(b, sent, decided=b.fusion_decisions)
    assert "fusion_decisions" not in d
    got = untrusted_bundle(d, job, pipe, early.sent, early.decided)
    assert got.fusion_decisions is early.decided
    # the kernels each record's ops ended in, derived here from this side's provenance: those
    # the compile's own bundle derived from its own
    def ends(fd):
        return [(list(r["producer_kernels"]), list(r["consumer_kernels"])) for r in fd["records"]]

    assert ends(got.fusion_decisions) == ends(b.fusion_decisions) and any(p for p, _ in ends(b.fusion_decisions))
    # a bundle that carries decisions has its own, whatever came early
    own = untrusted_bundle(leave_out(b, sent), job, pipe, early.sent, early.decided)
    assert own.fusion_decisions is not early.decided and own.fusion_decisions["records"]
    # a second message is not taken; a bad one is dropped with a warning, and the bundle that
    # leaves them out then has none
    early.decisions({"records": "again"})
    assert early.wait() is pipe and early.decided is got.fusion_decisions
    bad = EarlyParts(job)
    with pytest.warns(UserWarning, match="fusion decisions were dropped"):
        bad.decisions({"records": {"columns": {"decision": ["fused"]}, "count": 3}})  # 1 value, 3 rows
        bad.wait()
    assert bad.decided is None
    assert untrusted_bundle(d, job, bad.wait(), sent, bad.decided).fusion_decisions is None


def test_work_ahead_runs_once_on_a_draft_that_the_bundle_of_the_same_inputs_takes(fusing_compile, monkeypatch):
    """The caller's ahead work gets a draft of the early texts, their analysis, the decisions and the
    job's source, in the thread beside the compile; what it derives there is what a bundle of
    the same inputs takes, and a bundle of other inputs makes again."""
    from analysis.fusion.codec import fusion_decisions_json
    from analysis.service.worker import untrusted_bundle
    from analysis.service.messages import leave_out

    from analysis.pipeline import WorkAhead

    seen = []

    class Work(WorkAhead):
        def draft(self, draft):
            seen.append((threading.current_thread().name, draft))
            draft.derived("probe", (draft.module("hlo_after"), draft.kernels, draft.fusion_decisions,
                                    draft.source.get("code")), lambda: "made ahead")

    work = Work()

    b, job = fusing_compile, _code_job()
    sent = {"hlo_before": b.stages["hlo_before"], "hlo_after": b.stages["hlo_after"]}
    early = _sent_early(b, job, fusion_decisions_json(b.fusion_decisions), ahead=work)
    pipe = early.wait()
    assert len(seen) == 1 and seen[0][0] == "xla-explorer-early-parse"
    draft = seen[0][1]
    assert draft.source["code"] is job.source and draft.fusion_decisions is early.decided
    assert [k.name for k in draft.kernels] == [k.name for k in b.kernels]

    def probe(x):
        return x.derived("probe", (x.module("hlo_after"), x.kernels, x.fusion_decisions, x.source.get("code")),
                         lambda: "made again")

    # the decisions' kernels were derived on the draft: the bundle of the same decisions (the very
    # object) and the same provenance takes them as they are
    derived = []
    monkeypatch.setattr("analysis.pipeline.derive_decision_kernels", lambda fd, prov: derived.append(fd))
    got = untrusted_bundle(leave_out(b, sent, decided=b.fusion_decisions), job, pipe, early.sent, early.decided)
    assert probe(got) == "made ahead"
    assert derived == [] and got.fusion_decisions is draft.fusion_decisions
    assert got.fusion_decisions["records"] and got.provenance is draft.provenance
    monkeypatch.undo()
    own = untrusted_bundle(leave_out(b, sent), job, pipe, early.sent, early.decided)  # its own decisions
    assert probe(own) == "made again"
    # without the decisions, or for a gallery model (whose code this side does not have), none
    seen.clear()
    EarlyParts(job, ahead=work).texts(sent)
    gallery = _sent_early(b, Job(kind="gallery", name="mlp"), fusion_decisions_json(b.fusion_decisions), ahead=work)
    gallery.wait()
    assert seen == []


def test_once_the_texts_are_analyzed_the_work_ahead_starts_without_the_decisions_and_the_draft_takes_it(fusing_compile):
    """The optimized module comes a second before a worker's fusion decisions at 96 layers (it
    reads them off XLA's log after): the caller's ``analyzed`` gets a draft of the texts alone
    then, and what it derives there the draft with the decisions, and the worker's bundle, take."""
    from analysis.fusion.codec import fusion_decisions_json
    from analysis.pipeline import WorkAhead
    from analysis.service.messages import leave_out
    from analysis.service.worker import untrusted_bundle

    calls = []

    class Work(WorkAhead):
        def analyzed(self, draft):
            calls.append(("analyzed", draft.fusion_decisions))
            draft.derived("probe", (draft.module("hlo_after"), draft.kernels), lambda: ["made without decisions"])

        def draft(self, draft):
            calls.append(("draft", draft.fusion_decisions))
            calls.append(("probe", draft.derived("probe", (draft.module("hlo_after"), draft.kernels),
                                                 lambda: ["made again"])))

    b, job = fusing_compile, _code_job()
    sent = {"hlo_before": b.stages["hlo_before"], "hlo_after": b.stages["hlo_after"]}
    early = EarlyParts(job, ahead=Work())
    early.texts({"hlo_before": b.stages["hlo_before"]})
    early.texts({"hlo_after": b.stages["hlo_after"]})
    early.wait()
    assert calls == [("analyzed", None)]  # once both are analyzed, before any decisions
    early.texts({"hlo_after": b.stages["hlo_after"]})  # the compiled text, the same: no second run
    early.decisions(fusion_decisions_json(b.fusion_decisions))
    pipe = early.wait()
    assert [c[0] for c in calls] == ["analyzed", "draft", "probe"]
    assert calls[1][1] is early.decided and calls[2][1] == ["made without decisions"]
    got = untrusted_bundle(leave_out(b, sent, decided=b.fusion_decisions), job, pipe, early.sent, early.decided)
    assert got.derived("probe", (got.module("hlo_after"), got.kernels), lambda: ["made again"]) == ["made without decisions"]


# ----------------------------------------------------------------------------- real workers

ISOLATED, WHY = sandbox.sandbox_status()

RAISES_WHEN_RUN = '''
import jax
import jax.numpy as jnp


def _sensor(x):
    raise RuntimeError("sensor offline")


def model(x):
    y = jax.pure_callback(_sensor, jax.ShapeDtypeStruct(x.shape, x.dtype), jnp.exp(x))
    return y + 1


def example_inputs():
    return (jnp.ones((4, 4)),)
'''


@pytest.mark.sandbox
@pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")
def test_a_sandboxed_worker_sends_the_compile_before_it_measures(tmp_path):
    q = JobQueue(Limits(timeout_s=120, measure_timeout_s=120), Store(str(tmp_path / "s.sqlite")))
    job = Job(kind="gallery", name="mlp", backend="cpu", measure=True, preview_kernels=1)
    seen: list[str] = []
    out = compile_job(job, session="t", queue=q, early=True, progress=seen.append)
    assert out.pending is not None and out.isolated is None
    first = out.bundle
    assert first.timings is None and first.kernels and first.fusion_decisions is not None
    # sent as soon as its graphs could be drawn: what the worker reads after that comes with the timings
    assert first.memory is None and first.code is None and first.memory_analysis is None
    assert first.phase_seconds["compile"] > 0  # (the summary's compile time is known by then)
    final = out.pending.result(120)
    b = final.bundle
    assert b.timings and set(b.timings["kernels"]) <= {k.name for k in first.kernels}
    # ... and is the program's own: the same as a compile of it that was not previewed
    whole = compile_job(replace(job, preview_kernels=None, measure=False), session="t", queue=q).bundle
    assert whole.memory and b.memory["peak"] == whole.memory["peak"] and b.memory["totals"] == whole.memory["totals"]
    assert b.memory["agreement"] == whole.memory["agreement"] and b.memory_analysis == whole.memory_analysis
    assert sorted(b.code["kernels"]) == sorted(whole.code["kernels"]) and b.phase_seconds == first.phase_seconds
    assert b.stages["hlo_after"] == first.stages["hlo_after"]
    assert b.module("hlo_after") is first.module("hlo_after")  # the preview's parse, not a second one
    assert [k.name for k in b.kernels] == [k.name for k in first.kernels]
    # a program below the threshold is not previewed: the caller gets its timings at once
    out = compile_job(Job(kind="gallery", name="softmax", backend="cpu", measure=True, preview_kernels=10**6),
                      session="t", queue=q, early=True)
    assert out.pending is None and out.bundle.timings
    q.shutdown()


@pytest.mark.sandbox
@pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")
def test_a_workers_decisions_come_early_and_the_graphs_are_made_ahead_of_its_bundle(monkeypatch):
    """A real worker sends the fusion decisions it made beside the compile before its bundle
    (while XLA compiles, at 192 layers); the app's graph payload is then made in the parent's
    early thread (what the decisions do not change before they came), and the worker's bundle
    (which leaves the decisions out) takes it: equal to one made from that bundle afterwards."""
    import json

    from analysis.service import worker as worker_module
    from analysis.render import layout_cache
    from app import graph_payload

    made: list[str] = []
    real_core = graph_payload.payload_core
    monkeypatch.setattr(graph_payload, "payload_core", lambda b: (made.append(threading.current_thread().name), real_core(b))[1])
    undecided: list[bool] = []  # what the decisions do not change: made before they came

    class Ahead(graph_payload.PayloadAhead):
        def analyzed(self, bundle):
            undecided.append(bundle.fusion_decisions is None and not made)
            super().analyzed(bundle)

    told = []
    real_decisions = EarlyParts.decisions
    monkeypatch.setattr(EarlyParts, "decisions", lambda self, d: (told.append(d), real_decisions(self, d))[1])
    job = Job(kind="code", source=stack_source(12), filename="layers.py", name="layers", backend="cpu")
    graph_payload.CORES.clear()
    b = worker_module.run_job(job, limits=Limits(timeout_s=180), ahead=Ahead()).bundle
    assert told and b.fusion_decisions and b.fusion_decisions["records"]
    assert made == ["xla-explorer-early-parse"]
    payload = graph_payload.graph_payload(b)
    assert made == ["xla-explorer-early-parse"]  # found by its content, not made again
    # (whether the optimized module's dump came before the decisions depends on the compile's
    # timing at 12 layers; where it did, that work came first, without them: the order itself is
    # tested on texts fed one by one, above)
    assert all(undecided) and len(undecided) <= 1
    graph_payload.CORES.forget(b)
    b.forget("payload:undecided")
    with layout_cache.SVG_LOCK:
        layout_cache.SVG_CACHE.clear()
    fresh = graph_payload.graph_payload(b)
    assert made[-1] == threading.current_thread().name
    assert json.dumps(payload, sort_keys=True, default=str) == json.dumps(fresh, sort_keys=True, default=str)


@pytest.mark.sandbox
@pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")
def test_the_parent_parses_a_workers_hlo_while_the_worker_analyzes(monkeypatch):
    import analysis.bundle.core as bundle_module
    import analysis.pipeline as pipeline_module
    from analysis.service import worker as worker_module

    parsed_in: list[str] = []
    real = pipeline_module.parse_module

    def watched(text):
        parsed_in.append(threading.current_thread().name)
        return real(text)

    monkeypatch.setattr(pipeline_module, "parse_module", watched)
    monkeypatch.setattr(bundle_module, "parse_module", watched)
    ran = worker_module.run_job(Job(kind="gallery", name="mlp", backend="cpu"), limits=Limits(timeout_s=120))
    assert ran.bundle.kernels and ran.isolated
    # each module once, in the thread that started when the worker sent its texts; none after
    assert parsed_in == ["xla-explorer-early-parse"] * 2


@pytest.mark.sandbox
@pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")
def test_a_measurement_that_fails_after_the_preview_is_one_line_and_the_graphs_stay(tmp_path):
    q = JobQueue(Limits(timeout_s=120, measure_timeout_s=120), Store(str(tmp_path / "s.sqlite")))
    job = Job(source=RAISES_WHEN_RUN, name="sensor", measure=True, preview_kernels=1, backend="cpu")
    out = compile_job(job, session="t", queue=q, early=True)
    assert out.pending is not None and out.bundle.kernels  # it compiles: the callback runs only when run
    with pytest.raises(ExplorerError) as info:
        out.pending.result(120)
    e = info.value
    # the callback's own exception, at the user's line (7: the raise), not XLA's wrapped traceback
    assert e.phase == "measure" and e.line == 7 and "Traceback" not in e.one_line()
    assert e.message.startswith("RuntimeError: sensor offline") and "\n" not in e.one_line()
    # nothing was cached for it: the next compile tries again
    assert not compile_job(job, session="t", queue=q, early=True).cached
    q.shutdown()


@pytest.mark.sandbox
@pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")
def test_after_its_preview_a_worker_waits_for_the_page_before_it_measures(tmp_path):
    """The worker says it holds (``held``) after its preview and measures once the page has drawn
    it (``JobHandle.release``): until then nothing of its measuring is said and its job runs on."""
    q = JobQueue(Limits(timeout_s=120, measure_timeout_s=120), Store(str(tmp_path / "s.sqlite")))
    seen: list[str] = []
    h = q.submit(Job(kind="gallery", name="mlp", backend="cpu", measure=True, preview_kernels=1), session="t",
                 progress=seen.append)
    wait_until(lambda: h.phase == "held", 90, lambda: f"the worker to hold its preview (phases: {seen})")
    assert h.preview is not None and h.preview.timings is None
    holds(lambda: h.phase == "held" and not h.done(), 2.0, "the worker waiting for its page")
    h.release()
    ran = h.result(120)
    assert ran.bundle.timings and ran.bundle.memory is not None
    assert seen.index("measure") > seen.index("held"), seen
    q.shutdown()


def test_a_held_worker_goes_on_when_its_stdin_closes_or_the_bound_passes():
    from analysis.service.worker_main import wait_for_release

    r, w = os.pipe()
    try:
        assert wait_for_release(r, bound=0.05) is False  # never released: the bound
        os.close(w)
        w = None
        assert wait_for_release(r, bound=60) is True  # released: at once
    finally:
        os.close(r)
        if w is not None:
            os.close(w)


def test_a_page_that_leaves_a_compile_being_measured_releases_it():
    r = PreviewRunner()
    q = _queue(r)
    out = compile_job(Job(name="p", measure=True, preview_kernels=1), session="s", queue=q, early=True)
    page = explorer_state({})
    page.pending = out.pending
    assert not out.pending.released
    page.leave_pending()  # another compile or an upload is shown instead
    assert out.pending.released and page.pending is None
    r.release.set()
    assert out.pending.result(20).bundle.timings
    q.shutdown()


# ----------------------------------------------------------------------------- the page

APP = os.path.join(ROOT, "app", "main.py")

UNIQUE = '''"""Preview test model: each call waits a moment, so measuring outlasts the page's rerun."""
import time

import jax
import jax.numpy as jnp


def _slow(y):
    time.sleep(0.02)
    return y


def model(x, w):
    # written by test_preview: {stamp}
    y = jnp.tanh(x @ w) * 2 + 1
    return jax.pure_callback(_slow, jax.ShapeDtypeStruct(y.shape, y.dtype), y)


def example_inputs():
    return (jnp.ones((64, 64)), jnp.ones((64, 64)))
'''


def _texts(at) -> str:
    return "\n".join([i.value for i in at.info] + [c.value for c in at.caption] + [w.value for w in at.warning])


@pytest.mark.sandbox
@pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")
def test_the_page_shows_the_graphs_while_measuring_and_then_the_timings(monkeypatch):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    assert not at.exception, at.exception
    monkeypatch.setenv("XLA_EXPLORER_PREVIEW_KERNELS", "1")  # this small program counts as big
    at.radio(key="source_kind").set_value("Paste code").run()
    page = explorer_state(at.session_state)
    page.code = UNIQUE.format(stamp=time.time_ns())  # never in the cache
    at.run()
    at.button(key="compile").click().run()
    assert not at.exception, at.exception
    assert page.pending is not None
    assert page.pending.released  # its page is drawn (AppTest has no frame to wait for): measured now
    assert "kernel timings follow" in _texts(at)
    assert "Measuring: every kernel is being timed" in _texts(at)
    shown = page.bundle
    assert shown.timings is None and page.payload["graphs"]["post"]["svgs"]
    # the buffer assignment is read after the graphs were sent: the Memory tab says it follows
    assert shown.memory is None and shown.code is None
    at.session_state["view_tab"] = "Memory"
    at.run()
    assert "The buffer assignment comes with the kernel timings: this compile is being measured" in _texts(at)
    assert "No buffer assignment in this bundle" not in _texts(at)
    # a report or a bundle of it now would lack what measuring brings: not offered until it is here
    assert {(d.key, d.proto.disabled) for d in at.get("download_button") if d.key in ("dl_report", "dl_bundle")} \
        == {("dl_report", True), ("dl_bundle", True)}
    page.sel = {"side": "post", "name": shown.kernels[0].name}

    def measured():
        at.run()
        return page.pending is None

    wait_until(measured, 120, "the measured bundle", interval_s=0.5)
    assert not at.exception, at.exception
    b = page.bundle
    assert b.timings and b.stages["hlo_after"] == shown.stages["hlo_after"]
    # the selection stays
    assert f"Selected: **{shown.kernels[0].name}** (after optimization)" in [c.value for c in at.caption]
    assert "kernel timings follow" not in _texts(at) and "Measuring:" not in _texts(at)
    assert b.memory is not None and b.code is not None
    assert "peak live memory" in [m.label for m in at.metric]  # the Memory tab, on show, now has it
    assert {(d.key, d.proto.disabled) for d in at.get("download_button") if d.key in ("dl_report", "dl_bundle")} \
        == {("dl_report", False), ("dl_bundle", False)}
    at.session_state["view_tab"] = "Kernels & timings"
    at.run()
    assert "step (median)" in [m.label for m in at.metric]


from tests.pipeline.test_pipeline import POST as POST_DUMP, PRE as PRE_TEXT  # noqa: E402 - the pipeline's own modules


def test_texts_sent_as_xla_dumps_them_are_parsed_once_and_the_compiled_ones_take_the_parse():
    """A worker sends each HLO text as XLA dumps it, then the compiled ones where they differ.
    A compiled text that differs from its dump only in the order of a backend_config's fields
    takes the dump's parse and its analysis; one that differs otherwise is parsed and analyzed
    again. At most three such messages are taken."""
    from analysis.bundle.core import Bundle

    compiled = POST_DUMP.replace('{"a":1,"b":[2,3]}', '{"b":[2,3],"a":1}')
    early = EarlyParts(Job(kind="code", name="x"))
    early.texts({"hlo_before": PRE_TEXT})
    early.texts({"hlo_after": POST_DUMP})
    pipe = early.wait()
    dumped, made = pipe.parse("hlo_after")[1], pipe.analysis()
    early.texts({"hlo_after": compiled})
    assert early.wait() is pipe and pipe.parse("hlo_after") == (compiled, dumped)  # the dump's parse, on its text
    assert pipe.analysis() is made
    assert early.sent == {"hlo_before": PRE_TEXT, "hlo_after": compiled}
    # the bundle that follows takes that parse and its analysis
    b = pipe.onto(Bundle(stages={"hlo_before": PRE_TEXT, "hlo_after": compiled}))
    assert b.module("hlo_after") is dumped and b.kernels is made[0] and [k.name for k in b.kernels] == ["f"]
    # another compiled text: parsed and analyzed again
    other = EarlyParts(Job(kind="code", name="x"))
    other.texts({"hlo_before": PRE_TEXT, "hlo_after": POST_DUMP})
    first = other.wait().analysis()
    other.texts({"hlo_after": POST_DUMP.replace("negate(%a)", "abs(%a)")})
    assert other.wait().parse("hlo_after")[1].by_name["fused"].by_name["n"].opcode == "abs"
    assert other.wait().analysis() is not first
    # a fourth message is not taken (a worker cannot keep this side parsing)
    more = EarlyParts(Job(kind="code", name="x"))
    for text in ("a", "b", "c", "d"):
        more.texts({"hlo_before": text})
    assert more.sent == {"hlo_before": "c"}


def test_a_real_worker_s_answer_leaves_out_the_hlo_it_sent_while_compiling():
    """A worker (a real process, with the limits) sends its HLO texts as XLA dumps them; its
    answer then leaves out the texts the bundle holds that were sent: the optimized module is
    not sent twice, whichever of XLA's equal texts (the dump's, ``as_text()``'s) the bundle took."""
    pytest.importorskip("jax")
    from dataclasses import asdict, replace

    from analysis.service.job import Job
    from analysis.service.messages import Answer
    from analysis.service.settings import Limits
    from analysis.service.worker_process import run_worker

    told: list[dict] = []
    res = run_worker(asdict(Job(kind="gallery", name="rnn_scan")), replace(Limits.from_env(), sandbox="off"),
                     texts=told.append)
    assert isinstance(res.message, Answer), res.message
    assert any("hlo_after" in t for t in told)
    assert "hlo_after" not in res.message.bundle["stages"]
    assert "hlo_before" not in res.message.bundle["stages"]


def test_what_a_worker_reads_after_its_preview_is_what_its_measurement_may_carry():
    """The fields a preview goes without (read from the dump once the graphs' parts were sent)
    are fields a ``{"measured"}`` answer may bring: none of them is lost on the way."""
    from analysis.compile.stages import GRAPHS_LATER
    from analysis.service.messages import MEASURED_FIELDS

    assert set(GRAPHS_LATER) <= set(MEASURED_FIELDS)
    assert not {"kernels", "provenance", "stages", "source", "fusion_decisions"} & set(MEASURED_FIELDS)
