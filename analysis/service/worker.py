"""The parent's side of a worker: start it in the sandbox, stream its progress, and turn every
way it can end (crash, kill, limit, garbage output) into a Bundle or an ``ExplorerError``.

No queue and no cache here: ``analysis.service.job_queue.compile_job`` adds those in front. The
worker process itself is ``analysis.service.worker_main``.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Callable

from analysis.bundle.core import SCHEMA_VERSION, STAGES, Bundle, fusion_decisions_from_json, reanalyze
from analysis.bundle.checks import drop_object_files
from analysis.errors import ExplorerError
from analysis import tuning
from analysis.hlo import HloParseError
from analysis.pipeline import Pipeline, WorkAhead
from analysis.service import worker_process
from analysis.service.failure import describe_failure
from analysis.service.job import Job
from analysis.service.messages import EARLY, MEASURED_FIELDS, Answer, Failure, Measured, Message, Probe, Texts, put_back
from analysis.service.settings import Limits


@dataclass
class Ran:
    """A bundle a worker made, and whether that worker ran inside the sandbox."""

    bundle: Bundle
    isolated: bool


def run_job(job: Job, progress: Callable[[str], None] | None = None, timeout: float | None = None,
            limits: Limits | None = None, cancel=None, preview: Callable[[Bundle], None] | None = None,
            ahead: WorkAhead | None = None, hold: threading.Event | None = None) -> Ran:
    """Run ``job`` in a sandboxed worker process; returns its Bundle or raises ExplorerError.
    ``preview`` receives the compiled bundle a measuring job sends before it is measured
    (``Job.preview_kernels``), checked as the final one is; the worker then waits until ``hold``
    is set (the preview drawn: ``worker_process.run_worker``) before it measures. ``ahead``, the
    caller's work on a draft of the bundle made from what the worker sends while it compiles
    (``EarlyParts``)."""
    limits = limits or Limits.from_env()
    if timeout is not None:
        limits = replace(limits, timeout_s=float(timeout))
    early = EarlyParts(job, preview, ahead, text_mb=limits.upload_mb)
    res = worker_process.run_worker(asdict(job), limits, progress, cancel, early if preview else None, early.texts,
                                    early.decisions, hold=hold if preview else None)
    if res.message is None:  # (an upload's bytes are no code to point into)
        raise describe_failure(res, limits, job.filename, job.source if job.kind in ("code", "file") else None)
    return interpret(res.message, res.isolated, job, pipe=early.wait(), preview=early.bundle, sent=early.sent,
                     decided=early.decided, text_mb=limits.upload_mb)


class EarlyParts:
    """What a worker sends before its answer, put to use while it works. Its HLO texts as XLA
    dumps them while it compiles, and once compiled where they differ (``texts``): fed to the
    job's ``Pipeline`` in a thread beside the compile, so the bundle that follows takes their
    parses and analysis (``Pipeline.onto``); that bundle leaves these texts out (``sent`` puts
    them back). The fusion decisions the worker made beside the compile (``decisions``): checked
    like a bundle's, and the bundle that follows leaves them out where they stand. A measuring
    job's preview (calling this object): checked like any bundle the worker sends and handed to
    ``deliver``; a bad one is dropped with a warning (the job goes on, its final answer decides).
    The caller's ``ahead`` (``analysis.pipeline.WorkAhead``) gets, in that thread, the module
    before optimization while the worker's XLA optimizes (``before``), once the texts are
    analyzed a draft bundle of them with the job's own source (``analyzed``), and once the
    decisions are in too one with them (``draft``); what it makes there it keeps by content,
    where the bundle that follows finds it."""

    STAGES = ("hlo_before", "hlo_after")  # parsed here
    TEXTS = ("jaxpr", "stablehlo")  # kept as sent

    def __init__(self, job: Job, deliver: Callable[[Bundle], None] | None = None,
                 ahead: WorkAhead | None = None, text_mb: int = Limits.upload_mb):
        self.job, self.deliver, self.ahead = job, deliver, ahead
        self.text_mb = text_mb  # the most of one text the worker may send (the upload limit)
        self.bundle: Bundle | None = None
        self.pipe = Pipeline()
        self.sent: dict = {}  # the texts as sent: a bundle that follows leaves them out
        self._thread: threading.Thread | None = None
        self._told = 0  # texts messages taken (at most messages.EARLY[Texts])
        self.decided = None  # the worker's early fusion decisions, checked
        self._decisions_taken = False
        self._ahead_of: tuple | None = None  # the analysis the ahead work was done for

    def texts(self, d) -> None:
        """One ``{"texts"}`` message: the HLO texts in it (as XLA dumps them during the compile,
        then the compiled ones where they differ) go to the pipeline in a thread, after the ones
        before them, and are analyzed once both are in."""
        if self._told >= EARLY[Texts] or not isinstance(d, dict):
            return
        self._told += 1
        big = oversized(d, self.text_mb)
        if big:  # what an upload may not be, a worker may not send (its final answer is refused too)
            warnings.warn(f"a worker's early texts were dropped: {big}")
            self._told = EARLY[Texts]
            return
        # the jaxpr and StableHLO come with the first: kept as texts (the bundle's, checked with it)
        self.sent = {**self.sent, **{k: v for k, v in d.items() if k in self.TEXTS + self.STAGES
                                     and isinstance(v, str) and v}}
        texts = {k: v for k, v in d.items() if k in self.STAGES and isinstance(v, str) and v}
        if not texts:
            return

        def parse():
            for k, v in texts.items():
                try:
                    self.pipe.offer(k, v)
                    if k == "hlo_before" and "hlo_after" not in texts:  # (the worker's XLA still optimizes)
                        self.pipe.prepare_before(self.ahead if self.job.kind in ("code", "file") else None)
                except Exception:  # noqa: BLE001 - parsed again with the bundle, which reports it
                    pass
            try:
                self.pipe.analysis()
            except Exception:  # noqa: BLE001 - analyzed again with the bundle, which reports it
                return
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
        """The ``ahead`` work, once per analysis of the texts: on a draft bundle of them with the
        job's source (what ``untrusted_bundle`` puts back) while the decisions are not in yet
        (``analyzed``: the worker reads them off XLA's log after the compile, a second at 96
        layers), and on one with the decisions once they are (``draft``)."""
        made, fd = self.pipe.analysis(), self.decided
        if self.ahead is None or made is None or self.job.kind not in ("code", "file"):
            return
        step = (made, fd is not None)
        if self._ahead_of is not None and self._ahead_of[1] == step[1] and all(
                a is b for a, b in zip(self._ahead_of[0], made)):
            return
        self._ahead_of = step
        source = {"name": self.job.name, "file": self.job.filename, "code": self.job.source}
        if fd is None:
            self.pipe.analyzed_ahead(self.ahead, source)
        else:
            self.pipe.work_ahead(self.ahead, fd, source)

    def wait(self) -> Pipeline:
        """The pipeline, once what was sent so far has gone through it."""
        if self._thread is not None:
            self._thread.join()
        return self.pipe

    def __call__(self, d) -> None:
        if self.deliver is None or self.bundle is not None:
            return
        big = oversized(d.get("stages") if isinstance(d, dict) else None, self.text_mb)
        if big:
            warnings.warn(f"a worker's preview was dropped: {big}")
            return
        try:
            b = untrusted_bundle(d, self.job, self.wait(), self.sent, self.decided)
        except ExplorerError as e:
            warnings.warn(f"a worker's preview was dropped: {e.one_line()}")
            return
        self.bundle = b
        self.deliver(b)


def oversized(texts, limit_mb: int) -> str | None:
    """What is wrong with ``texts`` (stage -> text, as a worker sends them) when one of them is
    larger than ``limit_mb`` (the upload limit: a worker's HLO costs the parent what an uploaded
    one does), else None."""
    for k, v in (texts.items() if isinstance(texts, dict) else ()):
        if isinstance(v, str) and len(v) > limit_mb << 20:
            return (f"its {str(k)[:20]} text is {len(v) / 2**20:.1f} MB, larger than the upload limit "
                    f"({limit_mb} MB; setting upload_mb)")
    return None


def interpret(msg: Message | None, isolated: bool, job: Job, pipe: Pipeline | None = None,
              preview: Bundle | None = None, sent: dict | None = None, decided: dict | None = None,
              text_mb: int = Limits.upload_mb) -> Ran:
    """A worker's final message (``Answer``, ``Measured`` or ``Failure``) as a Ran or an
    ExplorerError; the same for a worker here and one on a Ray node
    (``analysis.service.ray_engine``). ``pipe``: the job's pipeline, fed what the worker sent
    early (``EarlyParts``), whose parses and analysis the bundle takes where they are of its own
    texts; ``preview``: the job's checked preview, which a ``Measured`` answer
    completes; ``sent``: the HLO texts the worker sent early, which its bundle leaves out;
    ``decided``: the fusion decisions it sent early (checked), which its bundle may leave out."""
    if msg is None:
        raise ExplorerError("protocol", "the worker sent no message", job.filename)
    if isinstance(msg, Failure):
        raise _failure(msg, job)
    if isinstance(msg, Answer):
        big = oversized(msg.bundle.get("stages") if isinstance(msg.bundle, dict) else None, text_mb)
        if big:
            raise ExplorerError("limit", f"the worker's bundle was refused: {big}", job.filename)
        return Ran(untrusted_bundle(msg.bundle, job, pipe, sent, decided), isolated)
    if isinstance(msg, Measured):
        return Ran(measured_bundle(msg.fields, job, preview), isolated)
    raise ExplorerError("protocol", f"the worker answered {type(msg).__name__} to a {job.kind} job", job.filename)


def _failure(msg: Failure, job: Job | None = None) -> ExplorerError:
    """The error a worker's ``Failure`` message says (a malformed one is a protocol error)."""
    try:
        return ExplorerError.from_dict(msg.error)
    except (TypeError, AttributeError):
        return ExplorerError("protocol", "the worker sent a malformed error", job.filename if job else None)


def measured_bundle(d, job: Job, preview: Bundle | None) -> Bundle:
    """A measuring job's answer after its preview: what the worker read after it sent the preview
    (the buffer assignment, the kernels' code) and what measuring added (``MEASURED_FIELDS``,
    checked against the schema together, as a bundle's are) on a copy of the preview this side
    checked. The worker said everything else in the preview, where this side derived it again;
    sending the whole bundle a second time was the biggest message of the job (for a big program
    the decoded copy of a bundle already shown was the peak of the server's memory:
    docs/performance.md)."""
    if preview is None:
        raise ExplorerError("protocol", "the worker sent a measurement of a preview this side does not have",
                            job.filename)
    if not isinstance(d, dict) or not set(d) <= set(MEASURED_FIELDS):
        raise ExplorerError("protocol", "the worker sent a malformed measurement", job.filename)
    drop_object_files(d)  # the worker disassembled them: this process runs no ELF reader
    try:
        part = Bundle.from_dict({**d, "schema_version": SCHEMA_VERSION})
    except ExplorerError as e:
        raise ExplorerError("protocol", f"the worker sent a bad measurement: {e.message}", job.filename) from None
    b = replace(preview, source=dict(preview.source), options=dict(preview.options),
                environment=dict(preview.environment), metrics=dict(preview.metrics),
                **{k: getattr(part, k) for k in MEASURED_FIELDS if k in d})
    b.share_from(preview)  # the layer tree is made again (it holds the times), the rest is not
    return b


def untrusted_bundle(d, job: Job, pipe: Pipeline | None = None, sent: dict | None = None,
                     decided: dict | None = None) -> Bundle:
    """A worker's bundle, as untrusted as an upload: the user's code ran in that process and
    could have rewritten it. Checked against the schema (``Bundle.from_dict``), what the parent
    knows from the job put back (the code, the name and file), and everything derived from the
    HLO texts derived again here (kernels, provenance, metrics: a worker does not send them).
    An HLO text the bundle leaves out is the one the worker sent early (``sent``), and so are
    fusion decisions it leaves out (``decided``, checked already). The job's pipeline (``pipe``)
    gives the parses and analysis of the texts it holds, and what was derived ahead of them."""
    with tuning.building():  # a big program's bundle is hundreds of thousands of objects, none garbage
        return _untrusted_bundle(d, job, pipe, sent, decided)


def _untrusted_bundle(d, job: Job, pipe: Pipeline | None = None, sent: dict | None = None,
                      decided: dict | None = None) -> Bundle:
    drop_object_files(d)  # the worker disassembled them: this process runs no ELF reader
    put_back(d, sent, STAGES)  # the HLO texts it sent early
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
    try:
        if pipe is not None:
            pipe.onto(b)  # the parses and analysis of its own texts, made as they came, or made now
        else:
            reanalyze(b)
    except HloParseError as e:
        raise ExplorerError("protocol", f"the worker sent HLO that does not parse: {e.message}", job.filename) from None
    return b


def run_probe(limits=None) -> dict:
    """Ask a (sandboxed) worker what devices JAX sees here."""
    limits = limits or Limits.from_env()
    res = worker_process.run_worker(asdict(Job(kind="probe", name="probe")), limits)
    if isinstance(res.message, Probe):
        return res.message.facts
    if isinstance(res.message, Failure):
        raise _failure(res.message)
    raise describe_failure(res, limits)
