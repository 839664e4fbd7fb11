"""The Explorer page's own state: what it shows and what it remembers from one run of the page to
the next, as one typed object kept in the session under one key (``KEY``), made on first use
(``explorer_state``).

Widget values are not in it: Streamlit keeps each widget's value under the widget's key
(``source_kind``, ``gallery_choice``, ``backend``, ``preset``, ``free_options``, ``measure``,
``compare``, ``devices``, ``find``, ``present``, ``view_tab``, ``graphs``, ...), and a shared
link's values go there (``app.explorer_link``). The visitor's ``session_id`` is the whole app's,
not this page's. The other pages read this state too: the Pass pipeline offers the bundle shown
here, the Shape sweep opens its compile here, and their code editors start from the code pasted
here (``app.page_helpers.code_source``).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from analysis.bundle.core import Bundle
from analysis.service.job import Job
from analysis.service.job_queue import Outcome, Pending

KEY = "explorer"


@dataclass
class ExplorerState:
    """What the Explorer page holds besides its widgets' values."""

    # the compile on show
    bundle: Bundle | None = None
    recorded: str | None = None  # a recorded compile shown in place of one this machine cannot make
    flags: dict[str, bool] = field(default_factory=dict)  # how it was compiled (measure, compare): its link says so
    pending: Pending | None = None  # its measuring job, still running: a big program's graphs come first
    pending_error: str | None = None  # why that measuring failed, in one line
    error: str | None = None  # the last compile's or upload's error, shown beside the bundle kept
    error_at: tuple | None = None  # (file, line, column, message) of that error: the editor marks the line
    sel: dict[str, Any] = field(default_factory=dict)  # {"side", "name"} or {"line"}: linked across every view

    # the graphs and what they sent
    payload: dict | None = None  # what the graph component is sent (app.graph_payload), for ``payload_for``
    payload_for: tuple | None = None  # the bundle the payload was made for
    code_open: bool = False  # the graphs' Code pane is open (a link's view=code opens it)
    graphs_click: Any = None  # the counter of the graphs' last message: each message is acted on once
    decision_focus: int | None = None  # the fusion decision the graphs' "why not fused" linked to
    find_done: str | None = None  # the sidebar's search last acted on (a search selects once)
    # A session's first run draws the graphs and stops; the page's rest comes in the run after
    # (None: the first run has not started yet; app/explorer.py says why).
    rest_deferred: bool | None = None
    # the graphs' frame was made while the first run's compile ran: the run after draws them first
    frame_made_early: bool = False

    # pasted code and its link
    code: str | None = None  # what the editor holds
    code_id: str | None = None  # its id in the store, for the link
    code_id_for: str | None = None  # the code ``code_id`` is the id of

    upload_job: Job | None = None  # the upload's job, to open another module of the same file

    # a shared link, opened once per session
    link_applied: bool = False
    link_errors: list[str] = field(default_factory=list)  # what the link asked that is not there
    link_job: Job | None = None  # the compile it names, run as the first load
    link_sel: dict | None = None  # the selection it names, made once that compile is shown
    link_tab: str | None = None  # the tab it opens on (its label)
    # the sidebar's values it set (widget key -> value), set again as the sidebar's widgets are
    # first drawn (``explorer_sidebar.draw``): until then the browser may still hold the widgets of
    # the page before (a lecture's previous step), whose values would otherwise win
    link_widgets: dict | None = None

    def show(self, outcome: Outcome, job: Job) -> None:
        """A compile's outcome on show (its measuring may still be running: ``pending``), with
        nothing selected and no error."""
        self.pending, self.pending_error = outcome.pending, None
        self.bundle = outcome.bundle
        self.flags = {"measure": bool(job.measure), "compare": bool(job.compare_fusion)}
        self.recorded = outcome.recorded
        self.error = None
        self.error_at = None
        self.sel = {}

    def comes_with_timings(self, what: str) -> str | None:
        """Why the compile on show lacks ``what`` (its buffer assignment, its kernels' code)
        where that comes with its timings: a big program's graphs are shown first, and what the
        worker reads after them follows with the measurement
        (``analysis.service.messages.MEASURED_FIELDS``). None when no measurement is awaited or
        failed."""
        if self.pending is not None:
            return f"{what} comes with the kernel timings: this compile is being measured (its graphs come first)."
        if self.pending_error:
            return f"{what} was to come with the kernel timings, and measuring failed: Compile again to see it."
        return None

    def show_upload(self, bundle: Bundle, job: Job) -> None:
        """An upload's bundle on show; its job kept to open another of its modules. A compile's
        measuring still running is left behind: its bundle, when done, must not replace this one."""
        self.upload_job = job
        self.bundle, self.error, self.sel, self.recorded = bundle, None, {}, None
        self.leave_pending()

    def leave_pending(self) -> None:
        """The compile being measured is no longer what the page shows: its measured bundle still
        reaches the cache, measured now (nothing of it is drawn: ``Pending.release``)."""
        if self.pending is not None:
            self.pending.release()
        self.pending, self.pending_error = None, None


def explorer_state(session: MutableMapping | None = None) -> ExplorerState:
    """The Explorer's state in ``session`` (this session's ``st.session_state``; a test passes its
    AppTest's), made on first use."""
    ss = st.session_state if session is None else session
    if KEY not in ss:
        ss[KEY] = ExplorerState()
    return ss[KEY]
