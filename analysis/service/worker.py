"""The parent's side of a worker: start it in the sandbox, stream its progress, and turn every
way it can end (crash, kill, limit, garbage output) into a Bundle or an ``ExplorerError``.

No queue and no cache here: ``analysis.service.queue.compile_job`` adds those in front. The
worker process itself is ``analysis.service.worker_main``.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Callable

from analysis.bundle import SCHEMA_VERSION, STAGES, Bundle, fusion_decisions_from_json, reanalyze, remember_analysis
from analysis.errors import ExplorerError
from analysis import tuning
from analysis.hlo import HloParseError, parse_module, same_module_text
from analysis.kernels import detect_platform
from analysis.service import sandbox
from analysis.service.job import MEASURED_FIELDS, Job
from analysis.service.settings import Limits


@dataclass
class Ran:
    """A bundle a worker made, and whether that worker ran inside the sandbox."""

    bundle: Bundle
    isolated: bool


def run_job(job: Job, progress: Callable[[str], None] | None = None, timeout: float | None = None,
            limits: Limits | None = None, cancel=None, preview: Callable[[Bundle], None] | None = None) -> Ran:
    """Run ``job`` in a sandboxed worker process; returns its Bundle or raises ExplorerError.
    ``preview`` receives the compiled bundle a measuring job sends before it is measured
    (``Job.preview_kernels``), checked as the final one is."""
    limits = limits or Limits.from_env()
    if timeout is not None:
        limits = replace(limits, timeout_s=float(timeout))
    early = EarlyParts(job, preview)
    res = sandbox.run_worker(asdict(job), limits, progress, cancel, early if preview else None, early.texts,
                             early.decisions)
    if res.message is None:
        raise sandbox.describe_failure(res, limits, job.filename, job.source)
    like = early.like()
    return interpret(res.message, res.isolated, job, like=like, preview=early.bundle, sent=early.sent,
                     decided=early.decided)


# Work to do on a worker's early bundle beside the compile, once its HLO is parsed and analyzed
# and its fusion decisions are in: functions of the draft bundle (``EarlyParts``), registered
# by whoever shows the bundle (the app lays its graphs out: ``app.views.payload_ahead``). What
# they remember on the draft (``Bundle.derived``) goes to the worker's bundle that follows, and
# counts there only while what it was made of is that bundle's too.
AHEAD: dict[str, Callable[[Bundle], None]] = {}


class EarlyParts:
    """What a worker sends before its answer. Its HLO texts as XLA dumps them while it compiles,
    and once compiled where they differ (``texts``): parsed and analyzed here in a thread
    beside the compile and while the worker goes on, so the bundle that follows is not
    parsed or analyzed again (``like``); that bundle leaves these texts out (``sent`` puts them
    back), and one it does carry uses an early parse only if equal (``Bundle.share_parses``). A
    measuring job's preview (calling this object): checked like any bundle the worker sends and
    handed to ``deliver``; a bad one is dropped with a warning (the job goes on, its final
    answer decides). The fusion decisions the worker made beside the compile (``decisions``):
    checked like a bundle's, and the bundle that follows leaves them out where they stand. Once
    the texts are analyzed and the decisions are in, a draft bundle of them (with the job's own
    source) is handed to the ``AHEAD`` functions in that thread."""

    STAGES = ("hlo_before", "hlo_after")  # parsed here
    TEXTS = ("jaxpr", "stablehlo")  # kept as sent

    def __init__(self, job: Job, deliver: Callable[[Bundle], None] | None = None):
        self.job, self.deliver = job, deliver
        self.bundle: Bundle | None = None
        self._parses: dict = {}
        self.sent: dict = {}  # the texts as sent: a bundle that follows leaves them out
        self._like: Bundle | None = None
        self._thread: threading.Thread | None = None
        self._told = 0  # texts messages taken (at most sandbox.EARLY_MESSAGES["texts"])
        self._like_mods: tuple = ()  # the modules self._like was made of
        self.decided = None  # the worker's early fusion decisions, checked
        self._decisions_taken = False
        self._ahead_of: Bundle | None = None  # the early bundle the AHEAD work was done for

    def texts(self, d) -> None:
        """One ``{"texts"}`` message: the HLO texts in it (as XLA dumps them during the compile,
        then the compiled ones where they differ) are parsed in a thread, after the ones before
        them; once both are parsed, the two are analyzed (again only when a parse changed)."""
        if self._told >= sandbox.EARLY_MESSAGES["texts"] or not isinstance(d, dict):
            return
        self._told += 1
        # the jaxpr and StableHLO come with the first: kept as texts (the bundle's, checked with it)
        self.sent = {**self.sent, **{k: v for k, v in d.items() if k in self.TEXTS + self.STAGES
                                     and isinstance(v, str) and v}}
        texts = {k: v for k, v in d.items() if k in self.STAGES and isinstance(v, str) and v}
        if not texts:
            return

        def parse():
            for k, v in texts.items():
                had = self._parses.get(k)
                if had is not None and had[0] == v:
                    continue  # the compiled text is the one dumped: parsed already
                if had is not None and same_module_text(had[1], had[0], v):
                    # it differs only in the order of a backend_config's fields (XLA:CPU's
                    # YNNPACK fusions): the parse takes the compiled text's, and stays
                    self._parses[k] = (v, had[1])
                    continue
                try:
                    self._parses[k] = (v, parse_module(v))
                except Exception:  # noqa: BLE001 - parsed again with the bundle, which reports it
                    self._parses.pop(k, None)
            parses = dict(self._parses)
            mods = tuple(parses[k][1] if k in parses else None for k in self.STAGES)
            if self._like is not None and all(a is b for a, b in zip(self._like_mods, mods)):
                for k, t in parses.items():  # the same modules: their analysis stands, on these texts
                    self._like.stages[k] = t[0]
                    self._like._parsed[k] = t
                return
            self._like_mods = mods
            like = Bundle(stages={k: v[0] for k, v in parses.items()})
            like._parsed.update(parses)
            if len(parses) == 2:  # and analyzed, as the bundle that follows will be
                try:
                    remember_analysis(like, detect_platform(like.module("hlo_after")))
                except Exception:  # noqa: BLE001 - analyzed again with the bundle, which reports it
                    pass
            self._like = like
            self._ahead()

        self._chain(parse)

    def _chain(self, work) -> None:
        """Run ``work`` in a thread, after the work before it."""
        before = self._thread

        def run():
            if before is not None:
                before.join()
            with tuning.building():  # big modules, decisions and graphs: hundreds of thousands of objects
                work()

        self._thread = threading.Thread(target=run, name="xla-explorer-early-parse", daemon=True)
        self._thread.start()

    def decisions(self, d) -> None:
        """The worker's ``{"decisions"}`` message (once): its fusion decisions, checked in the
        thread after the parses (``fusion_decisions_from_json``; bad ones are dropped, and the
        bundle that follows then has none)."""
        if self._decisions_taken or not isinstance(d, dict):
            return
        self._decisions_taken = True

        def check():
            try:
                self.decided = fusion_decisions_from_json(d)
            except ExplorerError as e:
                warnings.warn(f"a worker's fusion decisions were dropped: {e.one_line()}")
                return
            self._ahead()

        self._chain(check)

    def _ahead(self) -> None:
        """The ``AHEAD`` work, once per early bundle that is analyzed and has the decisions:
        on a draft of it with the job's source (what ``untrusted_bundle`` puts back), whose
        ``derived`` entries the early bundle then holds for the bundle that follows."""
        like, fd = self._like, self.decided
        if not AHEAD or like is None or fd is None or like is self._ahead_of or self.job.kind not in ("code", "file"):
            return
        hit = like._parsed.get("_d:analysis")
        if hit is None:
            return
        self._ahead_of = like
        platform = hit[1][0]
        draft = Bundle(stages=dict(like.stages), fusion_decisions=fd,
                       source={"name": self.job.name, "file": self.job.filename, "code": self.job.source},
                       environment={"platform": platform} if platform else {})
        draft.share_parses(like)
        reanalyze(draft, like)  # its analysis, and the decisions' kernels from its provenance
        for fn in list(AHEAD.values()):
            try:
                fn(draft)
            except Exception as e:  # noqa: BLE001 - done again for the bundle, which reports it
                warnings.warn(f"work ahead of a worker's bundle failed: {type(e).__name__}: {e}")
        like.share_derived(draft)

    def like(self) -> Bundle | None:
        """The checked preview, else a bundle that holds the early parses (None without any)."""
        if self.bundle is not None:
            return self.bundle
        if self._thread is None:
            return None
        self._thread.join()
        return self._like

    def __call__(self, d) -> None:
        if self.deliver is None or self.bundle is not None:
            return
        try:
            like = self.like()
            b = untrusted_bundle(d, self.job, like, self.sent, self.decided)
        except ExplorerError as e:
            warnings.warn(f"a worker's preview was dropped: {e.one_line()}")
            return
        self.bundle = b
        self.deliver(b)


def interpret(msg, isolated: bool, job: Job, like: Bundle | None = None, preview: Bundle | None = None,
              sent: dict | None = None, decided: dict | None = None) -> Ran:
    """A worker's message (``{"bundle"}``, ``{"measured"}`` or ``{"error"}``) as a Ran or an
    ExplorerError; the same for a worker here and one on a Ray node
    (``analysis.service.ray_engine``). ``like``: a bundle whose parses the bundle reuses where its
    texts are the same; ``preview``: the job's checked preview, which a ``{"measured"}`` answer
    completes; ``sent``: the HLO texts the worker sent early, which its bundle leaves out;
    ``decided``: the fusion decisions it sent early (checked), which its bundle may leave out."""
    if not isinstance(msg, dict):
        raise ExplorerError("protocol", "the worker sent no message", job.filename)
    if "error" in msg:
        try:
            raise ExplorerError.from_dict(msg["error"])
        except (TypeError, AttributeError):
            raise ExplorerError("protocol", "the worker sent a malformed error", job.filename) from None
    if "bundle" in msg:
        return Ran(untrusted_bundle(msg["bundle"], job, like, sent, decided), isolated)
    if "measured" in msg:
        return Ran(measured_bundle(msg["measured"], job, preview), isolated)
    raise ExplorerError("protocol", f"the worker answered {sorted(msg)} to a {job.kind} job", job.filename)


def measured_bundle(d, job: Job, preview: Bundle | None) -> Bundle:
    """A measuring job's answer after its preview: the fields measuring adds
    (``MEASURED_FIELDS``, checked against the schema) on a copy of the preview this side checked.
    The worker said everything else in the preview, where this side derived it again; sending the
    whole bundle a second time was the biggest message of the job (at 192 layers the decoded
    copy of a bundle already shown, the peak of the server's memory)."""
    if preview is None:
        raise ExplorerError("protocol", "the worker sent a measurement of a preview this side does not have",
                            job.filename)
    if not isinstance(d, dict) or not set(d) <= set(MEASURED_FIELDS):
        raise ExplorerError("protocol", "the worker sent a malformed measurement", job.filename)
    try:
        part = Bundle.from_dict({**d, "schema_version": SCHEMA_VERSION})
    except ExplorerError as e:
        raise ExplorerError("protocol", f"the worker sent a bad measurement: {e.message}", job.filename) from None
    b = replace(preview, source=dict(preview.source), options=dict(preview.options),
                environment=dict(preview.environment), metrics=dict(preview.metrics),
                timings=part.timings, fusion_comparison=part.fusion_comparison)
    b.share_parses(preview)
    b.share_derived(preview)  # the layer tree is made again (it holds the times), the rest is not
    return b


def untrusted_bundle(d, job: Job, like: Bundle | None = None, sent: dict | None = None,
                     decided: dict | None = None) -> Bundle:
    """A worker's bundle, as untrusted as an upload: the user's code ran in that process and
    could have rewritten it. Checked against the schema (``Bundle.from_dict``), what the parent
    knows from the job put back (the code, the name and file), and everything derived from the
    HLO texts derived again here (kernels, provenance, metrics: a worker does not send them).
    An HLO text the bundle leaves out is the one the worker sent early (``sent``), and so are
    fusion decisions it leaves out (``decided``, checked already). What was derived ahead on
    ``like`` is taken where it was made of what this bundle holds (``Bundle.derived``)."""
    with tuning.building():  # a big program's bundle is hundreds of thousands of objects, none garbage
        return _untrusted_bundle(d, job, like, sent, decided)


def _untrusted_bundle(d, job: Job, like: Bundle | None = None, sent: dict | None = None,
                      decided: dict | None = None) -> Bundle:
    if sent and isinstance(d, dict) and isinstance(d.get("stages"), dict):
        own = d["stages"]
        back = {k: v for k, v in sent.items() if k in STAGES and k not in own}
        if back:  # in the usual order of the stages
            d["stages"] = {k: own[k] if k in own else back[k] for k in (*STAGES, *own) if k in own or k in back}
    try:
        b = Bundle.from_dict(d)
    except ExplorerError as e:
        raise ExplorerError("protocol", f"the worker sent a bad bundle: {e.message}", job.filename) from None
    src = dict(b.source) if isinstance(b.source, dict) else {}
    if job.kind in ("code", "file"):
        src.update(name=job.name, file=job.filename, code=job.source)
    elif job.kind == "gallery":
        src.update(name=job.name)
    b.source = src
    if decided is not None and isinstance(d, dict) and "fusion_decisions" not in d:
        b.fusion_decisions = decided
    if like is not None:
        b.share_parses(like)  # equal texts only: what is derived from them is derived again below
    try:
        reanalyze(b, like)  # (or taken from like's analysis of the same parses, made here)
    except HloParseError as e:
        raise ExplorerError("protocol", f"the worker sent HLO that does not parse: {e.message}", job.filename) from None
    if like is not None:
        b.share_derived(like)  # each entry counts only while what it was made of is this bundle's
    return b


def run_probe(limits=None) -> dict:
    """Ask a (sandboxed) worker what devices JAX sees here."""
    limits = limits or Limits.from_env()
    res = sandbox.run_worker(asdict(Job(kind="probe", name="probe")), limits)
    if res.message is None or "probe" not in res.message:
        if res.message and "error" in res.message:
            raise ExplorerError.from_dict(res.message["error"])
        raise sandbox.describe_failure(res, limits)
    return res.message["probe"]
