"""How the Explorer page compiles: a job run in the worker (``app.runner``) with its phases in a
box (``page_helpers.WaitBox``), its outcome put on show, or its error beside the bundle kept;
the first load (the compile a shared link names, else the default model); and a big program's
measured bundle, adopted when its measuring job is done (its graphs were shown while it was
measured)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from analysis.errors import ExplorerError
from analysis.service.job import Job
from app import graph_payload, queries, runner
from app.explorer_sidebar import SidebarChoice
from app.explorer_state import ExplorerState, explorer_state
from app.page_helpers import WaitBox, phase_text, unexpected
from sample_models import DEFAULT_MODEL, gallery


def compile_job(state: ExplorerState, job: Job, on_wait: Callable[[], None]) -> None:
    """Run ``job`` in the worker with its phases in a box; keep the old bundle on error.
    A big program's measuring job comes back once compiled: its graphs are shown while it is
    measured (``state.pending``, collected by ``adopt_measured``). ``on_wait`` runs when there
    is a compile to wait for (the box is drawn): the page draws what it held back."""
    state.leave_pending()  # an earlier compile still being measured is no longer on show
    holder = st.empty()
    box: list = []  # the box of phases (``WaitBox``), drawn at the first phase that is not the cache's answer

    def status() -> WaitBox:
        if not box:
            box.append(WaitBox(holder, "Compiling…", lines=True))
            on_wait()
        return box[0]

    def progress(p: str) -> None:
        if p == "cached" and not box:  # a cached bundle (a shared link): no box, its graphs at once
            return
        status().update(phase_text(p) + "…")
        status().write(phase_text(p))

    try:
        outcome = runner.compile_bundle(job, session=st.session_state.session_id, progress=progress, early=True,
                                        ahead=graph_payload.PayloadAhead())
    except ExplorerError as e:
        state.error = e.full_text()
        state.error_at = (e.file, e.line, e.column, e.message)
        outcome = None
    except Exception as e:  # noqa: BLE001 - one line, never a traceback on the page
        state.error, state.error_at, outcome = unexpected(e, "compile"), None, None
    holder.empty()  # the box, where one was drawn, goes; an error is shown next to the code
    if outcome is not None:
        state.show(outcome, job)


def compile_choice(state: ExplorerState, choice: SidebarChoice, on_wait: Callable[[], None]) -> None:
    """The sidebar's compile, Compile pressed: its job, or the options' error."""
    if choice.options_error:
        state.error = choice.options_error
    elif choice.job is not None:
        compile_job(state, choice.job, on_wait)


def first_load(state: ExplorerState, on_wait: Callable[[], None]) -> None:
    """Nothing shown and nothing failed yet: the compile a link names, with its selection (a
    node the compile lacks becomes one of the link's notes), else the default model on the CPU,
    measured."""
    if state.bundle is not None or state.error is not None:
        return
    if state.link_job is not None:
        compile_job(state, state.link_job, on_wait)
    else:
        compile_job(state, Job(kind="gallery", name=DEFAULT_MODEL, filename=str(gallery()[DEFAULT_MODEL].path),
                               backend="cpu", measure=True), on_wait)
    if state.bundle is not None and state.link_sel:
        problem = queries.selection_problem(state.bundle, state.link_sel)
        state.sel = state.link_sel if problem is None else {}
        state.link_errors = list(state.link_errors) + ([problem] if problem else [])
    state.link_sel = None


def adopt_measured(state: ExplorerState) -> None:
    """The measured bundle of the compile on show, once its job is done: the same graphs, now
    with timings (the selection and the opened views stay). A failed measurement leaves the
    compile's bundle, with its one-line reason."""
    p = state.pending
    if p is None or not p.done():
        return
    state.pending = None
    try:
        state.bundle = p.result(0).bundle
    except ExplorerError as e:
        state.pending_error = e.one_line()
    except Exception as e:  # noqa: BLE001 - one line, never a traceback on the page
        state.pending_error = unexpected(e, "measure")


def drawn(state: ExplorerState) -> None:
    """The page is drawn (its graphs and what is below them): the compile on show, held after
    its preview, is measured now (``Pending.release``: its worker waited so as not to take the
    cores the page was drawn with, nor the page the cores its kernels are timed on)."""
    if state.pending is not None:
        state.pending.release()


@st.fragment(run_every=1.0)
def measuring_notice() -> None:
    """While the compile on show is measured: a line that says so, watching the job; the page
    reruns once its measured bundle is here."""
    p = explorer_state().pending
    if p is None:
        return
    if p.done():
        st.rerun(scope="app")
    st.info(f"{phase_text(p.phase or 'measure')}: these graphs are this compile's, and its kernel timings "
            "follow when every kernel has been timed.", icon=":material/timer:")
