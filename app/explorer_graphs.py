"""The Explorer's graphs: the pre- and post-optimization graphs side by side, one component with
their details and the source, the selection linked across (``graphs``, a fragment of its own);
what the component is sent (``payload``: made once per compile); and the sidebar's op search,
which selects what it finds."""

from __future__ import annotations

import streamlit as st

from analysis import tuning
from analysis.bundle.core import Bundle
from app import graph_payload, queries, views
from app.explorer_state import ExplorerState, explorer_state
from app.page_helpers import show_error


def search(b: Bundle, state: ExplorerState) -> None:
    """The sidebar's "Find and select an op", once per new query: its first hit selected (a
    line number selects the line)."""
    query = st.session_state.get("find") or ""
    if query == state.find_done:
        return
    state.find_done = query
    hits = queries.search(b, query) if query else []
    if hits:
        s_, n_, _ = hits[0]
        state.sel = {"line": int(query.strip())} if query.strip().isdigit() else {"side": s_, "name": n_}
    elif query:
        st.sidebar.caption(f"No op matches {query!r}.")


def payload(b: Bundle, state: ExplorerState) -> None:
    """What the graph component is sent for ``b`` (``state.payload``), made when ``b`` is new;
    the error of one that cannot be made."""
    payload_key = (id(b), b.created, b.title)
    if state.payload_for != payload_key:
        state.payload = graph_payload.graph_payload(b)
        state.payload_for = payload_key
        if "packed" in state.payload:  # a big program: the heap its bundle and views were built in, back now
            tuning.return_free_memory(collect=False)
    if state.payload.get("error"):
        show_error(state.payload["error"])


@st.fragment
def graphs(b: Bundle | None, present: bool, show_source: bool) -> None:
    """The graphs, on their own: what they send reruns only this (a view asked for is laid out
    and sent back without running the rest of the page); a new selection reruns the page, whose
    details, tables and text views follow it. With no bundle (its compile still running), their
    frame alone, waiting for them (``views.waiting_graphs``)."""
    if b is None:
        views.waiting_graphs(key="graphs", present=present)
        return
    state = explorer_state()
    # a view the graphs asked for that is not laid out yet (a big program opens with its layers
    # only): laid out now, before the graphs are drawn, so this run already sends it
    asked = st.session_state.get("graphs")
    # (no st.spinner: the panes say "Laying out …" themselves, and a spinner inserted before
    # the graphs made the page's focus handling walk its whole DOM, seconds of a layer's opening:
    # docs/performance.md)
    want = asked.get("want") if isinstance(asked, dict) else None
    if isinstance(want, str) and want in state.payload.get("lazy", ()):
        graph_payload.add_variant(b, state.payload, want)
    if present:
        # presentation mode's drawing of the view open (the one the frame asks for, else the one
        # it opens with), laid out for a projector's pane before the graphs are sent
        view = want[len("present:"):] if isinstance(want, str) and want.startswith("present:") else None
        graph_payload.add_present(b, state.payload, view or state.payload.get("open_variant", "default"))
    code_was = state.code_open
    # and its code, when first opened
    state.code_open = views.code_pane_open(b, state.payload, asked, code_was,
                                           follows=state.comes_with_timings("The kernels' code"))
    picked = views.explorer_graphs(b, state.payload, state.sel, key="graphs", present=present, show_source=show_source,
                                   tell_drawn=bool(state.rest_deferred), show_code=state.code_open)
    if state.code_open != code_was:
        st.rerun(scope="app")  # the link below names the pane (view=code)
    if not isinstance(picked, dict) or picked.get("n") == state.graphs_click:
        return
    state.graphs_click = picked.get("n")
    if picked.get("drawn"):  # the graphs are up: now the rest of the page (no selection in it)
        if state.rest_deferred:
            state.rest_deferred = False
            st.rerun(scope="app")
        return
    if isinstance(picked.get("row"), int) and not isinstance(picked.get("row"), bool):
        state.decision_focus = picked["row"]  # "why not fused": its row of the decisions table, shown below
        st.rerun(scope="app")
    if "want" not in picked and "need" not in picked:  # asking for a view or the data is no selection
        new = dict(picked.get("sel") or {})
        if new != state.sel:
            state.sel = new
            st.rerun(scope="app")
