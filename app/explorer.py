"""The explorer page (``app/main.py`` is the entry point that names the pages).

The page: a sidebar to choose what to compile (gallery, pasted code, uploaded HLO or bundle),
the backend and compiler options; a summary strip; the pre- and post-optimization graphs side
by side with the selection linked across; the details of what is selected; kernels and
timings; the stage texts and the source. Compiles run in a worker process (``app.runner``);
this process only reads Bundles.

This script calls the page's parts in order: its state (``app.explorer_state``) and a shared
link (``app.explorer_link``), the sidebar (``app.explorer_sidebar``), the title row and the
compiles (``app.explorer_header``, ``app.explorer_compile``), the graphs
(``app.explorer_graphs``), and what is below them (``app.explorer_tabs``).
"""

from __future__ import annotations

import streamlit as st

from app import guard, views
from app.explorer_compile import adopt_measured, compile_choice, drawn, first_load
from app.explorer_graphs import graphs, payload, search
from app.explorer_header import code_editor, header, title_row
from app.explorer_link import open_link, show_link_notes
from app.explorer_sidebar import Sidebar
from app.explorer_state import explorer_state
from app.explorer_tabs import details, lesson, share, tabs
from app.page_helpers import show_error

st.set_page_config(page_title="XLA Explorer", layout="wide")
st.markdown(views.CSS, unsafe_allow_html=True)

state = explorer_state()
st.session_state.setdefault("session_id", guard.browser_session_id())  # per browser, not per tab
open_link(state)  # once per session: a shared link's model, options, selection and tab

# A session's first run ends with the graphs: the page below them (tabs, tables, charts) kept
# the browser from drawing them for seconds. The frame says when they are drawn and the page
# runs again, whole; any other rerun brings it too (docs/performance.md). Not without a browser
# (a run with no request headers: a test's AppTest), which has no frame to say so. The sidebar's
# widgets wait for that run too (``Sidebar``).
first_run = state.rest_deferred is None
if first_run:
    state.rest_deferred = bool(st.context.headers)
# the run that draws the graphs first: the session's first, or the one after its compile where
# the graphs' frame was made while it compiled (below; the sidebar's widgets were drawn then,
# and a run that leaves them out would lose their values)
drawing_first = first_run or state.frame_made_early
state.frame_made_early = False
sidebar = Sidebar(state, held=first_run and state.rest_deferred)
choice = sidebar.choice

top = title_row(sidebar)
# The page's slots under the title row, made before a compile holds this run up: the graphs'
# frame (and the editor) can then be made in their places while the worker compiles.
above_graphs, graphs_slot = st.container(), st.container()
with above_graphs:
    notes_slot, editor_slot = st.container(), st.container()
frame_early: list[bool] = []


def on_wait() -> None:
    """A compile to wait for: the sidebar held back drawn now; in a browser's first run, the
    graphs' frame too, and pasted code's editor (their pages and scripts load while the worker
    compiles, tenths of a second the graphs no longer wait for: docs/performance.md), filled by
    the run after."""
    sidebar.now()
    if first_run and state.rest_deferred and not frame_early:
        frame_early.append(True)
        if choice.source_kind == "Paste code":
            with editor_slot:
                code_editor(state, top.present)
        with graphs_slot:
            graphs(None, top.present, False)  # (the fragment that fills it: a frame drawn by another is made anew)


with top.status:
    if choice.pressed or top.pressed:
        compile_choice(state, choice, on_wait)
    if state.error and choice.source_kind != "Paste code" and state.bundle is not None:
        show_error(state.error)  # (pasted code shows it next to the editor)
    first_load(state, on_wait)
if frame_early:  # the graphs go to the frame made for them in the run after (or it goes: none came)
    state.frame_made_early = state.bundle is not None
    st.rerun()
with notes_slot:
    show_link_notes(state)

adopt_measured(state)
b = state.bundle
if b is None:
    top.title.markdown("### XLA Explorer")
if choice.source_kind == "Paste code":
    with editor_slot:
        code_editor(state, top.present)
if b is None:  # nothing compiled yet: the error (pasted code has it under the editor, above), and no graphs
    if not (state.error and choice.source_kind == "Paste code"):
        show_error(state.error or "Nothing compiled yet.")
    sidebar.now()
    st.stop()

with above_graphs:
    header(b, state, top, choice.source_kind)
    search(b, state)
    payload(b, state)
with graphs_slot:
    graphs(b, top.present, choice.source_kind == "Paste code" and not top.present)
if drawing_first and state.rest_deferred:
    st.stop()
state.rest_deferred = False

views.legend()
lesson(b)
details(b, state)
tabs(b, state, top.present)
share(b, state, top.present)
drawn(state)
