"""Jobs: the one way the app and the CLI get a Bundle for a model — cache, queue, sandbox, store.

    outcome = compile_job(Job(kind="gallery", name="mlp"), session="abc", progress=print)
    outcome.bundle, outcome.cached, outcome.isolated

``compile_job`` looks the job up in the store by content hash (code, options, backend, jax
version, device kind); on a miss it queues the job, a sandboxed worker runs it
(``analysis.service.worker_process``), and the Bundle is stored before it is returned, as an ``Outcome``
that says whether it came from the cache and whether its worker was sandboxed. Errors are
``ExplorerError`` (never a traceback).

The queue (``JobQueue``): compile-only jobs run in parallel, up to ``Limits.workers`` at once;
measurement jobs (``Job.measure`` or ``Job.compare_fusion``) run one at a time, with their own
shorter budget (``Limits.measure_timeout_s``). With ``measure_mode = "beside"`` (the default,
chosen by measuring both on the development machine: docs/worker.md) compile jobs keep running
next to a measuring job and its ``timings.jobs_beside`` says how many did; with ``"alone"`` a
measuring job waits for the running compile jobs and no new one starts until it has finished. ``submit`` returns a ``JobHandle`` with ``status``,
``position()`` (jobs ahead of it in its lane), ``phase`` (the worker's last progress message),
``result(timeout)`` and ``cancel()``. Each session may have ``Limits.session_jobs`` jobs queued
or running, each client (the part of a session id before its ``/``) ``Limits.client_jobs``; one
more is refused with a ``limit`` error. Each lane takes turns between clients, then sessions
(round robin). Two identical requests in flight share one worker.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import platform
import queue as _queue
import threading
import time
import warnings
from dataclasses import dataclass, replace
from typing import Callable

from analysis.bundle.core import Bundle, reanalyze
from analysis.errors import ExplorerError
from analysis.hlo import HloParseError
from analysis.pipeline import WorkAhead
from analysis.service.job import Job, is_measure
from analysis.service.recorded import recorded_target_bundle
from analysis.service.sandbox import cuda_plugin_installed
from analysis.service.cache_keys import (LateKey, cache_key, device_kind_for, device_probe, forget_probes, known_probe,
                                         probe_meta_key)
from analysis.service import peaks
from analysis.service.settings import Limits
from analysis.service.store import default_store
from analysis.service.worker import Ran, run_job

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"


@dataclass
class Outcome:
    """What ``compile_job`` gives back: the Bundle, whether it came from the cache, and whether
    the worker that made it ran in the sandbox (None for a cached bundle: it was made earlier)."""

    bundle: Bundle
    cached: bool = False
    isolated: bool | None = None
    recorded: str | None = None  # a recorded compile shown in place of one this machine cannot make
    # a preview (``compile_job(early=True)``): the compile's bundle, its measuring still running
    pending: "Pending | None" = None


class Pending:
    """A measuring job whose compiled bundle was handed out early (``Outcome.pending``): the
    measured bundle follows. ``done()`` does not block; ``result()`` is the final ``Outcome``
    (or raises the job's ``ExplorerError``, e.g. a measurement that ran out of time)."""

    def __init__(self, handle: "JobHandle", settle: Callable[[], "Outcome"]):
        self.handle, self._settle = handle, settle
        self._out: Outcome | None = None

    @property
    def phase(self) -> str | None:
        return self.handle.phase

    def done(self) -> bool:
        return self.handle.done()

    def release(self) -> None:
        """The preview is drawn: its worker may measure now (``JobHandle.release``)."""
        self.handle.release()

    @property
    def released(self) -> bool:
        return self.handle.released

    def result(self, timeout: float | None = None) -> "Outcome":
        if self._out is None:
            self.handle.release()  # whoever waits for the timings is not drawing the preview
            self.handle.wait(timeout)
            self._out = self._settle()
        return self._out

    def cancel(self) -> bool:
        return self.handle.cancel()


# ----------------------------------------------------------------------------- the queue


def client_of(session: str) -> str | None:
    """The client a session id names (``CLIENT/BROWSER``: ``app.guard.browser_session_id``), or
    None for an id without one (the CLI, a test, a benchmark)."""
    return session.split("/", 1)[0] if "/" in session else None


class JobHandle:
    """One submitted job: watch it, wait for it, or cancel it while it waits."""

    def __init__(self, queue: "JobQueue", job: Job, session: str, key: str | None):
        self.job, self.session, self.key = job, session, key
        self.status = QUEUED
        self.phase: str | None = None
        self.submitted = time.monotonic()
        self.started: float | None = None
        self.finished: float | None = None
        self.beside = 0  # the most other jobs that ran at the same time as this one
        self._queue = queue
        self._done = threading.Event()
        self._cancel = threading.Event()
        self._drawn = threading.Event()  # its preview drawn (``release``): its worker measures
        # set whenever a phase, a preview or the end comes (``wait_change``): whoever shows them
        # is woken at once, not at its next look
        self._changed = threading.Event()
        self._ran: Ran | None = None
        self._error: ExplorerError | None = None
        self._listeners: list[Callable[[str], None]] = []
        self.preview = None  # the compiled bundle a measuring job sent before measuring
        self.ahead: WorkAhead | None = None  # the submitter's work on a draft of the bundle (worker.EarlyParts)
        self.late_key: Callable[[], str | None] | None = None  # the cache key, known after the run

    def _preview(self, bundle) -> None:
        if not self._done.is_set():
            self.preview = bundle
            self._changed.set()

    @property
    def measure(self) -> bool:
        return is_measure(self.job)

    def position(self) -> int | None:
        """Jobs ahead of this one in its lane (0: next or running); None once finished."""
        return self._queue._position(self)

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the job is done or ``timeout`` passes; True if done."""
        return self._done.wait(timeout)

    def wait_change(self, timeout: float | None = None) -> bool:
        """Wait until a phase, a preview or the end comes (since the last call), or ``timeout``
        passes; True if done. What came is read off the handle after this returns (its state is
        set before it wakes the waiter, so nothing that comes meanwhile is missed)."""
        self._changed.wait(timeout)
        self._changed.clear()
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> Ran:
        """The worker's Bundle (``Ran``); raises the job's ExplorerError, or TimeoutError if not
        done in time."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"job not finished after {timeout} s (status {self.status})")
        if self._error is not None:
            raise self._error
        return self._ran

    def cancel(self) -> bool:
        """Stop the job: a queued one is dropped, a running one's worker is killed."""
        self._cancel.set()
        return self._queue._cancel(self)

    def release(self) -> None:
        """The page has drawn this job's preview (or no longer shows it): its worker, which
        waits for this after sending the preview (at most ``worker_main.PREVIEW_HOLD_S``),
        reads the rest of its dump and measures."""
        self._drawn.set()

    @property
    def released(self) -> bool:
        return self._drawn.is_set()

    def _progress(self, phase: str) -> None:
        self.phase = phase
        for fn in list(self._listeners):
            try:
                fn(phase)
            except Exception:  # noqa: BLE001 - a caller's callback must not break the job
                pass
        self._changed.set()

    def _finish(self, ran: Ran | None = None, error: ExplorerError | None = None) -> None:
        self._ran, self._error = ran, error
        self.status = DONE if error is None else (CANCELLED if self._cancel.is_set() else FAILED)
        self.finished = time.monotonic()
        # the callers' progress callbacks go: a finished handle outlives its page (a worker
        # thread's last job stays in its loop variable), and a callback holds the page's globals
        self._listeners = []
        self._done.set()
        self._changed.set()


class JobQueue:
    """Runs jobs in sandboxed workers: compile jobs in parallel, measurement jobs alone."""

    def __init__(self, limits: Limits | None = None, store=None, runner: Callable | None = None,
                 workers: int | None = None, measure_slots: int = 1, engine: str = "local"):
        """``workers``: compile jobs at once (default ``limits.workers``); ``measure_slots``:
        measuring jobs at once (1 on one machine; a cluster places each on its own node or GPU);
        ``engine`` names where the runner runs jobs, for the bundles and the status."""
        self.limits = limits or Limits.from_env()
        self.store = store
        self._runner = runner or run_job
        try:  # a runner that can hand on a worker's preview takes ``preview=`` (and may hold it: ``hold=``)
            params = inspect.signature(self._runner).parameters
            self._previews, self._holds = "preview" in params, "hold" in params
        except (TypeError, ValueError):
            self._previews = self._holds = False
        self.workers = max(1, workers or self.limits.workers)
        self.measure_slots = max(1, measure_slots)
        self.engine = engine
        self._cv = threading.Condition()
        self._lanes: dict[bool, collections.deque] = {False: collections.deque(), True: collections.deque()}
        self._running: list[JobHandle] = []
        self._inflight: dict[str, JobHandle] = {}
        self._last_start: dict[tuple, int] = {}  # client or session -> when it last started a job
        self._seq = 0
        self._threads: list[threading.Thread] = []
        self._closed = False
        # "beside": one more thread, for the measuring lane, so compile jobs keep all the workers
        n = self.workers + (self.measure_slots if self.limits.measure_mode == "beside" else 0)
        for i in range(n):
            t = threading.Thread(target=self._loop, name=f"xla-explorer-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    # -- submitting -------------------------------------------------------------------------

    def submit(self, job: Job, session: str = "default", key: str | None = None,
               progress: Callable[[str], None] | None = None,
               late_key: Callable[[], str | None] | None = None,
               ahead: WorkAhead | None = None) -> JobHandle:
        """Queue ``job``; with ``key`` (its cache key) a finished bundle is stored under it and an
        identical job already in flight is shared instead of run twice. ``late_key``: the key,
        known only once the job has run (a machine's first job, beside its probe); ``ahead``: the
        submitter's work on a draft of the bundle while the worker still runs (``run_job``)."""
        with self._cv:
            if self._closed:
                raise ExplorerError("run", "the job queue is shut down")
            if key is not None and key in self._inflight:
                h = self._inflight[key]
                if progress:
                    h._listeners.append(progress)
                return h
            mine = sum(1 for h in self._all() if h.session == session)
            if mine >= self.limits.session_jobs:
                raise ExplorerError("limit", f"this session already has {mine} jobs queued or running "
                                             f"(limit {self.limits.session_jobs}); wait for one to finish")
            client = client_of(session)
            theirs = sum(1 for h in self._all() if client is not None and client_of(h.session) == client)
            if theirs >= self.limits.client_jobs:
                raise ExplorerError("limit", f"this browser's address already has {theirs} jobs queued or running "
                                             f"(limit {self.limits.client_jobs}); wait for one to finish")
            h = JobHandle(self, job, session, key)
            h.late_key = late_key
            h.ahead = ahead
            if progress:
                h._listeners.append(progress)
            self._lanes[h.measure].append(h)
            if key is not None:
                self._inflight[key] = h
            self._cv.notify_all()
            return h

    def _all(self):
        return list(self._lanes[False]) + list(self._lanes[True]) + self._running

    def _position(self, h: JobHandle) -> int | None:
        with self._cv:
            if h.done():
                return None
            if h.status == RUNNING:
                return 0
            try:
                i = self._order(self._lanes[h.measure]).index(h)
            except ValueError:
                return None
            # A measurement job also waits for the running measurement job (and, measured alone,
            # for the running compile jobs too); a compile job waits for free workers.
            if h.measure:
                busy = sum(1 for r in self._running if r.measure or self.limits.measure_mode == "alone")
            else:
                busy = 0
            return i + busy

    def _cancel(self, h: JobHandle) -> bool:
        with self._cv:
            lane = self._lanes[h.measure]
            if h in lane:
                lane.remove(h)
                self._forget(h)
                h._finish(error=ExplorerError("run", "the job was cancelled", h.job.filename))
                self._cv.notify_all()
                return True
        return h.status == RUNNING  # the runner sees the cancel event and kills the worker

    def _forget(self, h: JobHandle) -> None:
        if h.key is not None and self._inflight.get(h.key) is h:
            del self._inflight[h.key]

    def stats(self) -> dict:
        with self._cv:
            return {"queued": len(self._lanes[False]), "queued_measure": len(self._lanes[True]),
                    "running": len(self._running), "workers": self.workers, "engine": self.engine}

    # -- running ----------------------------------------------------------------------------

    # -- round robin between clients and sessions ------------------------------------------
    # Each lane starts next a job of the client (address and user agent: ``client_of``) that
    # started one least recently (never: first), of that client's sessions the one that started
    # one least recently, in the order submitted within a session: one client's many jobs (fresh
    # cookie jars, each a session with a measuring job) delay another's by one job, not by all.

    @staticmethod
    def _turn(last: dict, h: JobHandle) -> tuple:
        return last.get(("client", client_of(h.session) or h.session), -1), last.get(("session", h.session), -1)

    def _started(self, last: dict, h: JobHandle, seq: int) -> None:
        last[("client", client_of(h.session) or h.session)] = last[("session", h.session)] = seq

    def _order(self, lane) -> list[JobHandle]:
        """Under the lock: ``lane`` in the order its jobs would start."""
        last = dict(self._last_start)
        seq, order, left = self._seq, [], list(lane)
        while left:
            h = min(left, key=lambda j: self._turn(last, j))  # (min: the first of equal ones)
            left.remove(h)
            order.append(h)
            seq += 1
            self._started(last, h, seq)
        return order

    def _take(self, lane) -> JobHandle:
        """Under the lock: the job of ``lane`` to start now (round robin), out of the lane."""
        h = min(lane, key=lambda j: self._turn(self._last_start, j))
        lane.remove(h)
        self._seq += 1
        self._started(self._last_start, h, self._seq)
        if len(self._last_start) > 4096:  # sessions come and go: keep those with jobs
            live = {j.session for j in self._all()} | {h.session}
            keep = {("session", s) for s in live} | {("client", client_of(s) or s) for s in live}
            self._last_start = {k: v for k, v in self._last_start.items() if k in keep}
        return h

    def _next(self) -> JobHandle | None:
        """Under the lock: the job this thread may start now, if any."""
        n_measuring = sum(1 for r in self._running if r.measure)
        measuring = n_measuring > 0
        if self.limits.measure_mode == "beside":
            # Measuring jobs (one at a time on one machine) beside the compile jobs, which never wait for them.
            compiling = sum(1 for r in self._running if not r.measure)
            if self._lanes[True] and n_measuring < self.measure_slots:
                return self._take(self._lanes[True])
            if self._lanes[False] and compiling < self.workers:
                return self._take(self._lanes[False])
            return None
        if measuring:
            return None
        if self._lanes[True]:
            # "alone": a measurement job waits for the running compile jobs, and blocks new ones.
            return self._take(self._lanes[True]) if not self._running else None
        if self._lanes[False] and len(self._running) < self.workers:
            return self._take(self._lanes[False])
        return None

    def _limits_for(self, h: JobHandle) -> Limits:
        """A measuring job has its own, shorter wall-clock budget."""
        if h.measure:
            return replace(self.limits, timeout_s=min(self.limits.timeout_s, self.limits.measure_timeout_s))
        return self.limits

    def _loop(self) -> None:
        while True:
            with self._cv:
                h = self._next()
                while h is None:
                    if self._closed:
                        return
                    self._cv.wait()
                    h = self._next()
                h.status, h.started = RUNNING, time.monotonic()
                self._running.append(h)
                for r in self._running:  # how many other jobs each running job shares the machine with
                    r.beside = max(r.beside, len(self._running) - 1)
            ran, error = None, None
            try:
                more = {"preview": h._preview} if self._previews and h.job.preview_kernels is not None else {}
                if more and self._holds:
                    more["hold"] = h._drawn
                if h.ahead is not None:
                    more["ahead"] = h.ahead
                ran = self._runner(h.job, h._progress, limits=self._limits_for(h), cancel=h._cancel, **more)
                if isinstance(ran.bundle.environment, dict):  # where it ran (not part of the cache key)
                    ran.bundle.environment.setdefault("engine", {"kind": self.engine, "node": platform.node()})
                if h.measure and isinstance(ran.bundle.timings, dict):
                    # Said beside the timings: other jobs ran on this machine while these were measured.
                    ran.bundle.timings["jobs_beside"] = h.beside
                key = h.key if h.key is not None or h.late_key is None else h.late_key()
                if self.store is not None and key is not None:
                    try:
                        self.store.put_bundle(key, ran.bundle)
                    except ExplorerError as e:
                        warnings.warn(f"bundle not cached: {e.one_line()}")
            except ExplorerError as e:
                error = e
            except Exception as e:  # noqa: BLE001 - a bug in a runner must still end the job, with a line
                error = ExplorerError("run", f"internal error: {type(e).__name__}: {e}", h.job.filename)
            with self._cv:
                self._running.remove(h)
                self._forget(h)
                h._finish(ran, error)
                h.preview = None  # the final bundle replaces it
                self._cv.notify_all()
            # an idle thread holds nothing of its last job: its bundle (through ``ran``, and the
            # handle through ``r`` and ``more``'s preview callback) stayed alive after the tab closed
            h = r = ran = error = more = None

    def shutdown(self, wait: bool = True) -> None:
        with self._cv:
            self._closed = True
            for lane in self._lanes.values():
                while lane:
                    h = lane.popleft()
                    self._forget(h)
                    h._finish(error=ExplorerError("run", "the job queue was shut down", h.job.filename))
            self._cv.notify_all()
        if wait:
            for t in self._threads:
                t.join(timeout=60)


_default_queue: JobQueue | None = None
_default_lock = threading.Lock()


def default_queue() -> JobQueue:
    """The process-wide queue (limits and engine from the settings, the default store), made on
    first use. With ``engine = "ray"`` its jobs run on the Ray cluster
    (``analysis.service.ray_engine``); a cluster that cannot be reached is an ``engine`` error
    (and the next call tries again)."""
    global _default_queue
    with _default_lock:
        if _default_queue is None:
            from analysis.service.settings import EngineSettings

            eng = EngineSettings.from_env()
            if eng.kind == "ray":
                from analysis.service.ray_engine import RayRunner

                _default_queue = JobQueue(Limits.from_env(), default_store(), runner=RayRunner(eng),
                                          workers=eng.inflight, measure_slots=eng.inflight, engine="ray")
            else:
                _default_queue = JobQueue(Limits.from_env(), default_store())
        return _default_queue


def reset_default_queue() -> None:
    """Shut the process-wide queue down and forget it (and the remembered device probes): the
    next ``default_queue()`` reads the settings again."""
    global _default_queue
    with _default_lock:
        q, _default_queue = _default_queue, None
    if q is not None:
        q.shutdown(wait=True)
    forget_probes()


# ----------------------------------------------------------------------------- the one call


STORE_WAIT = "Waiting for the store: another process is writing to it"


def store_waiting(store, say):
    """While the store is locked by another process, tell the caller (``progress``) once."""
    w = getattr(store, "waiting", None)
    return w(lambda: say(STORE_WAIT)) if w else contextlib.nullcontext()


def compile_job(job: Job, session: str = "default", progress: Callable[[str], None] | None = None,
                timeout: float | None = None, queue: JobQueue | None = None, use_cache: bool = True,
                on_submit: Callable[[JobHandle], None] | None = None, early: bool = False,
                ahead: WorkAhead | None = None) -> Outcome:
    """A Bundle for ``job``: from the cache if this exact job ran before on this kind of
    machine, else queued, run in a sandboxed worker and stored. Raises ``ExplorerError``.

    ``progress`` receives ``"cached"``, ``"queued:N"`` (N jobs ahead), then the worker's phases;
    ``on_submit`` receives the ``JobHandle`` (for a UI that shows the queue position).
    With ``early``, a measuring job with ``preview_kernels`` returns as soon as its compiled
    bundle is here, unmeasured, with ``Outcome.pending`` to collect the measured one.
    ``ahead``: work on a draft of the bundle made while the worker compiles (``run_job``).
    ``job`` is not changed. A GPU-target job where JAX's CUDA plugin is not installed gets the
    gallery's recorded compile (``analysis.service.recorded``), or one line saying what is."""
    if job.gpu_target and not cuda_plugin_installed():
        bundle, path = recorded_target_bundle(job)
        return Outcome(bundle, cached=True, recorded=path)
    engine_error = None
    if queue is None:
        try:
            queue = default_queue()
        except ExplorerError as e:
            if e.phase != "engine":
                raise
            engine_error = e  # the cluster is out of reach: a cached bundle is still served
    say = progress or (lambda p: None)
    key = None
    store = (queue.store if queue is not None else default_store()) if use_cache else None
    limits = queue.limits if queue is not None else Limits.from_env()
    late = None
    if store is not None and job.kind == "open":
        # an upload is read, not compiled: what this machine's devices are does not decide it
        key = _cached_upload(job, store, say)
        if isinstance(key, Outcome):
            return key
    elif store is not None and known_probe(store, unreadable={}) is None:
        late = LateKey(job, store, limits)  # the first job here: the probe runs beside it
        # (a store that cannot be read goes the usual way, which waits for it and says so)
    elif store is not None:
        try:
            with store_waiting(store, say):
                kind = device_kind_for(job.backend, device_probe(store, limits))
                key = cache_key(job, kind)
                found = store.get_bundle(key)
        except ExplorerError as e:
            if e.phase not in ("store", "limit", "run"):
                raise
            warnings.warn(f"cache not used: {e.one_line()}")
            found, key = None, (key if e.phase == "store" else None)
        if found is not None:
            say("cached")
            try:
                reanalyze(found)  # the compile is cached; the analysis is always this version's
            except HloParseError as e:
                warnings.warn(f"cached bundle not re-analyzed: {e}")
            return Outcome(found, cached=True)
    if engine_error is not None:
        raise engine_error
    peaks_key = None
    if store is not None and is_measure(job) and job.peaks is None:
        # A CPU calibration made by an earlier job on this machine, so the worker need not redo it
        # (only one made without user code, checked: analysis.service.peaks).
        peaks_key = peaks.key(probe_meta_key())
        try:
            known = peaks.checked(store.get_meta(peaks_key))
        except ExplorerError as e:
            known = None
            warnings.warn(e.one_line())
        if known is not None:
            job, peaks_key = replace(job, peaks=known), None
        elif not peaks.may_share(job):
            peaks_key = None  # this job's worker runs the user's code: its calibration stays its own
    # The worker's phases arrive on a queue thread; they are handed to ``progress`` here, in the
    # caller's thread (a UI can only draw from its own thread), with the queue position as it moves.
    phases: _queue.SimpleQueue = _queue.SimpleQueue()
    h = queue.submit(job, session=session, key=key, progress=phases.put, late_key=late.key if late else None,
                     ahead=ahead)
    if on_submit:
        on_submit(h)
    deadline = None if timeout is None else time.monotonic() + timeout
    shown_pos = None
    while True:
        # woken by each phase, the preview or the end; the timeout is for the queue's position
        # and the deadline (a look every 0.1 s had left a big program's preview waiting up to
        # 0.1 s before its page took it: docs/performance.md)
        done = h.wait_change(0.1)
        while not phases.empty():
            say(phases.get_nowait())
        if done:
            break
        if early and h.preview is not None:
            return Outcome(h.preview, cached=False, pending=Pending(h, lambda: _settle(h, store, peaks_key)))
        pos = h.position()
        if pos and pos != shown_pos and h.phase is None:
            say(f"queued:{pos}")
        shown_pos = pos
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"job not finished after {timeout} s (status {h.status})")
    return _settle(h, store, peaks_key)


def _cached_upload(job: Job, store, say) -> "str | Outcome | None":
    """An upload's bundle from the store (an ``Outcome``), else the key to store it under (None
    where the store cannot be read now)."""
    key = cache_key(job, UPLOAD_DEVICE)
    try:
        with store_waiting(store, say):
            found = store.get_bundle(key)
    except ExplorerError as e:
        if e.phase not in ("store", "limit", "run"):
            raise
        warnings.warn(f"cache not used: {e.one_line()}")
        return key if e.phase == "store" else None
    if found is None:
        return key
    say("cached")
    try:
        reanalyze(found)  # the reading is cached; the analysis is always this version's
    except HloParseError as e:
        warnings.warn(f"cached bundle not re-analyzed: {e}")
    return Outcome(found, cached=True)


# What an upload's cache key has for a device: the bundle of a file read is the same on any machine
UPLOAD_DEVICE = "upload"


def _settle(h: JobHandle, store, peaks_key: str | None) -> Outcome:
    """A finished job's Outcome; a CPU calibration it made is remembered for the next jobs."""
    ran = h.result(0)
    bundle = ran.bundle
    measured_peaks = peaks.checked((bundle.timings or {}).get("peaks"))
    if peaks_key and measured_peaks is not None:
        try:
            store.put_meta(peaks_key, measured_peaks)
        except ExplorerError as e:
            warnings.warn(e.one_line())
    return Outcome(bundle, cached=False, isolated=ran.isolated)


