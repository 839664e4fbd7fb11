"""The spare worker: one worker started ahead of its job, so that the job does not wait for it.

A worker spends its first seconds starting Python and importing JAX before it can read its job
(docs/performance.md). With spares kept (the app turns them on), one worker is started ahead,
for a job of the kind the last one was (or the app's default), and waits, having run nothing
but this project's code, for the next job: that job skips the wait. Each worker still serves
exactly one job in a sandbox of its own and exits after it (nothing of one job reaches the
next); the spare holds a slot (a uid) and, idle, its memory (docs/performance.md). It is
started a moment after a job ends (``SPARE_DELAY_S``) so that its imports do not compete with
the page that shows that job's result, and it is replaced after ``SPARE_MAX_AGE_S``.

``SparePool`` is that one worker's life: off until ``keep(True)``; a worker for ``kind``
started after each job (``after``); taken by a job of its kind (``take``: any other kind ends
it); ended by ``drop``, by ``keep(False)``, and at the process's exit. With spares off, one
worker can still be started for a job about to be handed over (``start_now``: the command line
starts its compile's worker before its own imports) and ended if no job took it (``discard``).
It starts workers with the function it is given (``analysis.service.worker_process`` gives it
one), so it knows of a worker only its kind (``kind.key()``, ``kind.use_bwrap``), ``token``,
``born``, ``alive()`` and ``close()``."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from analysis.errors import ExplorerError

SPARE_DELAY_S = 0.5
SPARE_MAX_AGE_S = 900.0
SPARE_ENV = "XLA_EXPLORER_SPARE"  # set in a spare's environment (the worker then prepares for its job)


class SparePool:
    """At most one worker waiting for the next job (see the module's docstring)."""

    def __init__(self, start: Callable[[Any], Any], start_now: Callable[[Any], Any] | None = None):
        self._start = start  # kind -> a started worker that waits for its job; raises ExplorerError
        # kind -> a started worker whose job follows in a moment (``start_now``): it reads the job
        # at once rather than preparing for it first
        self._start_now = start_now or start
        self._lock = threading.Lock()
        self._worker = None  # the spare waiting now
        self._timer: threading.Timer | None = None  # the spare about to be started
        self._timer_key = None  # the kind it is about to be started for
        self._on = False

    @property
    def kept(self) -> bool:
        """Whether spares are on."""
        return self._on

    def keep(self, on: bool) -> None:
        """Spares on (started by ``after``) or off (the spare ended)."""
        self._on = on
        if not on:
            self.drop()

    def drop(self) -> None:
        """End the spare worker, if there is one (and the one about to be started)."""
        with self._lock:
            w, self._worker = self._worker, None
            if self._timer is not None:
                self._timer.cancel()
                self._timer, self._timer_key = None, None
        if w is not None:
            w.close()

    def token(self) -> str | None:
        """The job token of the spare worker waiting now (None: none)."""
        with self._lock:
            return self._worker.token if self._worker is not None and self._worker.alive() else None

    def start_now(self, kind):
        """A worker for jobs of ``kind`` started now and made the spare (the one before it ended),
        whether spares are kept or not: it serves the next job of its kind, and none is started
        after it unless they are kept. Returns it (for ``discard``), or None where it could not be
        started (no slot free: the job starts its own)."""
        try:
            w = self._start_now(kind)
        except ExplorerError:
            return None
        with self._lock:
            old, self._worker = self._worker, w
        if old is not None:
            old.close()
        return w

    def discard(self, w) -> None:
        """End ``w`` if it is still the spare, waiting (no job took it)."""
        if w is None:
            return
        with self._lock:
            if self._worker is not w:
                return
            self._worker = None
        w.close()

    def take(self, kind):
        """The spare, for a job of ``kind``, if it was started for that kind and is alive and
        young enough; else None (and a spare of another kind is ended)."""
        with self._lock:
            w, self._worker = self._worker, None
        if w is None:
            return None
        if w.kind.key() == kind.key() and w.alive() and time.monotonic() - w.born < SPARE_MAX_AGE_S:
            return w
        w.close()
        return None

    def after(self, kind, delay: float | None = None) -> None:
        """A spare for jobs of ``kind``, started after ``delay`` (``SPARE_DELAY_S``) unless one
        of that kind is waiting or about to be started; one about to be started for another kind
        is not (the latest job's kind is the next one's best guess). Only with the bubblewrap
        sandbox: without it a worker's limits depend on the moment it starts."""
        if not self._on or not kind.use_bwrap:
            return
        with self._lock:
            if self._waiting_for(kind) or (self._timer is not None and self._timer_key == kind.key()):
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer_key = kind.key()
            self._timer = threading.Timer(SPARE_DELAY_S if delay is None else delay, self._replace, (kind,))
            self._timer.daemon = True
            self._timer.start()

    def _waiting_for(self, kind) -> bool:
        """A live spare for jobs of ``kind`` is waiting (called with the lock held)."""
        return self._worker is not None and self._worker.alive() and self._worker.kind.key() == kind.key()

    def _replace(self, kind) -> None:
        """The timer's work: the spare (of another kind, or dead) replaced by one for ``kind``."""
        with self._lock:
            if self._timer_key != kind.key():  # superseded by a request for another kind
                return
            self._timer, self._timer_key = None, None
            if not self._on or self._waiting_for(kind):
                return
            old, self._worker = self._worker, None
        if old is not None:
            old.close()
        try:
            w = self._start(kind)
        except ExplorerError:  # no slot free now: the next job starts its own
            return
        with self._lock:
            if self._worker is None and self._on:
                self._worker = w
                return
        w.close()
