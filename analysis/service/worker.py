"""The parent's side of a worker: start it in the sandbox, stream its progress, and turn every
way it can end (crash, kill, limit, garbage output) into a Bundle or an ``ExplorerError``.

No queue and no cache here: ``analysis.service.queue.compile_job`` adds those in front. The
worker process itself is ``analysis.service.worker_main``.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, replace
from typing import Callable

from analysis.bundle import Bundle, reanalyze
from analysis.errors import ExplorerError
from analysis.gc_pause import gc_paused
from analysis.hlo import HloParseError
from analysis.service import sandbox
from analysis.service.job import Job
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
    previews = PreviewChecker(job, preview)
    res = sandbox.run_worker(asdict(job), limits, progress, cancel, previews if preview else None)
    if res.message is None:
        raise sandbox.describe_failure(res, limits, job.filename, job.source)
    return interpret(res.message, res.isolated, job, like=previews.bundle)


class PreviewChecker:
    """A worker's preview (its bundle before measuring), checked like any bundle it sends and
    handed on; a bad one is dropped with a warning (the job goes on, its final answer decides).
    Kept, so the final bundle reuses its parses (``Bundle.share_parses``)."""

    def __init__(self, job: Job, deliver: Callable[[Bundle], None] | None):
        self.job, self.deliver = job, deliver
        self.bundle: Bundle | None = None

    def __call__(self, d) -> None:
        if self.deliver is None or self.bundle is not None:
            return
        try:
            b = untrusted_bundle(d, self.job)
        except ExplorerError as e:
            warnings.warn(f"a worker's preview was dropped: {e.one_line()}")
            return
        self.bundle = b
        self.deliver(b)


def interpret(msg, isolated: bool, job: Job, like: Bundle | None = None) -> Ran:
    """A worker's message (``{"bundle"}`` or ``{"error"}``) as a Ran or an ExplorerError; the
    same for a worker here and one on a Ray node (``analysis.service.ray_engine``). ``like``: the
    job's checked preview, whose parses the bundle reuses where its texts are the same."""
    if not isinstance(msg, dict):
        raise ExplorerError("protocol", "the worker sent no message", job.filename)
    if "error" in msg:
        try:
            raise ExplorerError.from_dict(msg["error"])
        except (TypeError, AttributeError):
            raise ExplorerError("protocol", "the worker sent a malformed error", job.filename) from None
    if "bundle" in msg:
        return Ran(untrusted_bundle(msg["bundle"], job, like), isolated)
    raise ExplorerError("protocol", f"the worker answered {sorted(msg)} to a {job.kind} job", job.filename)


def untrusted_bundle(d, job: Job, like: Bundle | None = None) -> Bundle:
    """A worker's bundle, as untrusted as an upload: the user's code ran in that process and
    could have rewritten it. Checked against the schema (``Bundle.from_dict``), what the parent
    knows from the job put back (the code, the name and file), and everything derived from the
    HLO texts derived again here (kernels, provenance, metrics)."""
    with gc_paused():  # a big program's bundle is hundreds of thousands of objects, none garbage
        return _untrusted_bundle(d, job, like)


def _untrusted_bundle(d, job: Job, like: Bundle | None = None) -> Bundle:
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
    if like is not None:
        b.share_parses(like)  # equal texts only: what is derived from them is derived again below
    try:
        reanalyze(b)
    except HloParseError as e:
        raise ExplorerError("protocol", f"the worker sent HLO that does not parse: {e.message}", job.filename) from None
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
