"""The top of the Explorer's main pane: the title row (the compile's title, a Compile button
and the Presentation toggle) with the slot compiles show their progress in, the pasted code's
editor, and, for the compile on show, its notices (stale, measuring, recorded, deviceless) and
the summary strip."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from analysis.bundle.core import Bundle, device_label
from analysis.render.summary import empty_note, program_notes
from app import safe, views
from app.explorer_compile import measuring_notice
from app.explorer_sidebar import Sidebar
from app.explorer_state import ExplorerState
from app.page_helpers import PRESENT_CSS, PRESENT_WORDS, show_error, show_note, wrapped_text

try:
    from streamlit_ace import st_ace
except ImportError:  # a plain text area if the editor component is missing
    st_ace = None


@dataclass
class TitleRow:
    """The title row's parts, and the slot below it."""

    title: DeltaGenerator  # where the compile's title goes
    pressed: bool  # its Compile button
    present: bool  # presentation mode
    status: DeltaGenerator  # compiles show their progress here: one fixed place, so nothing below moves


def title_row(sidebar: Sidebar) -> TitleRow:
    """The title's place, Compile (what the sidebar or the editor holds; Ctrl+Enter) and the
    Presentation toggle (on when a link says ``present=1``)."""
    ss = st.session_state
    if "present" not in ss:
        ss.present = str(st.query_params.get("present", "")).lower() in PRESENT_WORDS
    top_title, top_compile, top_present = st.columns([6, 1.6, 1.6], vertical_alignment="center")
    with top_compile:
        pressed = st.button("Compile", key="compile_main", shortcut="Ctrl+Enter", width="stretch",
                            # a held sidebar's job is the next run's: a click runs the page again, sidebar and all
                            disabled=sidebar.choice.job is None and not sidebar.held,
                            help="Compile what the sidebar (or the editor) holds")
    with top_present:
        present = st.toggle("Presentation", key="present",
                            help="For a projector: no sidebar, the graphs fill the screen, labels at 14 px or more, "
                                 "details beside them. Keys in the graphs: ] and [ step through the kernels, biggest "
                                 "first.")
    if present:
        st.markdown(PRESENT_CSS, unsafe_allow_html=True)
    return TitleRow(top_title, pressed, present, st.container())


def code_editor(state: ExplorerState, present: bool) -> None:
    """Pasted code's editor (the line of a compile's error marked in its gutter), and that error
    under it."""
    with st.expander("Your code (Ctrl+Enter compiles)", expanded=not present):
        if st_ace is not None:
            marks = []
            where = state.error_at
            if state.error and where and where[0] == "<pasted code>" and where[1]:
                # the failing line marked in the editor's gutter
                marks = [{"row": where[1] - 1, "column": max((where[2] or 1) - 1, 0), "type": "error",
                          "text": str(where[3])[:300]}]
            typed = st_ace(value=state.code, language="python", theme="tomorrow", key="ace", height=260, font_size=14,
                           show_gutter=True, auto_update=True, wrap=False, tab_size=4, annotations=marks)
            if typed is not None:
                state.code = typed
        else:
            state.code = st.text_area("Code", state.code, height=260, key="code_area")
        if state.error:
            show_error(state.error)
        st.caption("Runs in a sandboxed worker process (no network, limited time and memory), never in this server.")


def bundle_title(b: Bundle) -> str:
    """The compile's title: pasted code's is its docstring's first line."""
    desc = b.source.get("description")
    if b.source.get("kind") == "code" and desc:
        return desc.partition("\n")[0].strip().rstrip(".:") or b.title
    return b.title


def header(b: Bundle, state: ExplorerState, row: TitleRow, source_kind: str) -> None:
    """The compile's title and environment in the title row; its notices under it, in one
    fixed place so the graphs below never move in the page; the summary strip (presentation
    mode shows the same cards, large, in the graphs' details panel)."""
    env = b.environment
    # the title and environment come from a bundle (a worker's or an upload's): escaped, never HTML
    # (safe.text: HTML escaped and Markdown's characters too, so no image or link in it is fetched)
    row.title.markdown(f"### {safe.text(bundle_title(b))} <span style='font-size:{0.95 if row.present else 0.8}rem;"
                       "color:#666;font-weight:normal'>"
                       + safe.text(f"{device_label(env)} · {env.get('backend', '')}"
                                   + (f" · jax {env['jax']}" if env.get("jax") else "")) + "</span>",
                       unsafe_allow_html=True)
    with st.container():
        notices(b, state, source_kind)
    if not row.present:
        views.summary_strip(b)


def notices(b: Bundle, state: ExplorerState, source_kind: str) -> None:
    """What to know about the graphs shown: stale (the sidebar or the editor names something
    else, or the last compile failed), measuring or not measured, the bundle's own state, a
    GPU compile made without one."""
    ss = st.session_state
    env = b.environment
    stale = None
    if source_kind == "Paste code" and state.code is not None and state.code != b.source.get("code"):
        stale = "the editor's text has changed since this compile"
    elif source_kind == "Gallery" and b.source.get("kind") == "gallery" and ss.get("gallery_choice") \
            and ss.gallery_choice != b.source.get("name"):
        stale = f"the sidebar names {ss.gallery_choice}"
    if state.error and not stale:
        stale = "the last compile failed"
    if stale:
        st.warning(f"Stale: these graphs are from the last good compile ({b.title}); {stale}. "
                   "Press Compile (Ctrl+Enter).", icon=":material/history:")
    if state.pending is not None:
        measuring_notice()
    elif state.pending_error:
        st.warning(f"Not measured: {state.pending_error}. The graphs are this compile's; Compile again to retry.",
                   icon=":material/timer_off:")
    empty = empty_note(b)
    if empty:
        st.warning(wrapped_text(empty), icon=":material/block:")
    for note in program_notes(b):
        if note != empty:
            show_note(note)
    if env.get("deviceless"):
        st.info(f"XLA:GPU's real program for an {env.get('device_kind', 'NVIDIA GPU')}, compiled without one"
                + (f" (recorded {b.created[:10]})" if state.recorded else "")
                + ": untuned and never run, so no timings.", icon=":material/memory:")
