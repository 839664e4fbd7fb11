"""Below the Explorer's graphs: the legend, the lesson, the selection's details with the fusion
decisions, the tabs (kernels and timings, text views, source, memory, devices: only the open
one is made) and "Share and export" (the view's link, the report, the bundle, the graphs as
SVG/DOT). A pick in a tab selects its op or kernel in the graphs (``state.sel``) and reruns."""

from __future__ import annotations

import functools
from urllib.parse import urlencode

import streamlit as st

from analysis.bundle.core import Bundle
from analysis.render import report
from app import graph_payload, lecture_ui, permalink, queries, runner, safe, views
from app.decisions_view import render as render_decisions
from app.devices_view import render_devices_view
from app.explorer_link import TABS, view_link
from app.explorer_state import ExplorerState
from app.kernels_view import render_kernels_view
from app.memory_view import render_memory_view
from app.page_helpers import show_error, show_note
from sample_models import gallery
from sample_models.lessons import lesson as gallery_lesson


def lesson(b: Bundle) -> None:
    """The lesson of the model (the gallery's own, or the docstring of pasted code or a bundle,
    shown as text), what this compile shows of it, and for a gallery model on the CPU a link to
    the same model compiled for an H200."""
    desc = b.source.get("description")
    if not desc:
        return
    les_title, _, what_to_look_for = desc.partition("\n")
    les = gallery_lesson(b)
    entry = gallery().get(b.source.get("name")) if b.source.get("kind") == "gallery" else None
    shown_title = entry.title if entry is not None else safe.text(les_title.strip(), 120)
    with st.expander(f"Lesson: {shown_title}", expanded=False):
        if entry is not None:  # the gallery's own lesson, from its file here (Markdown of ours)
            st.markdown(entry.lesson)
        else:  # a docstring of pasted code, or a bundle's: the user's text, shown as text
            show_note(what_to_look_for.strip() or les_title.strip())
        if les is not None:
            st.markdown("**On this compile:** " + les.markdown())
        if b.source.get("kind") == "gallery" and b.platform == "cpu":
            h200 = urlencode({"model": b.source.get("name"), "backend": runner.APP_GPU_TARGET})
            st.markdown(f"**On a GPU:** the same model as XLA compiles it for an H200 — no GPU needed: "
                        f"[open it]({'?' + h200}), or put both side by side on the Compare page "
                        "(*One model, two backends*).")


def details(b: Bundle, state: ExplorerState) -> None:
    """The selection's full details (hooks add their lines here), then why it was (not) fused:
    its lines and the decisions table."""
    with st.container():
        if state.sel:
            cur = state.sel.get("name") or f"line {state.sel.get('line')}"
            side_word = {"pre": "before", "post": "after"}.get(state.sel.get("side"), "source")
            st.markdown(f"#### Details — {cur}")
            st.caption(f"Selected: **{cur}** ({side_word} optimization)")
        views.details_panel(b, state.sel)
        render_decisions(b, state)


def tabs(b: Bundle, state: ExplorerState, present: bool) -> None:
    """The tabs under the details, on the tab a link named."""
    # Only the open tab's content is made (``on_change="rerun"`` reruns the page on a switch): a
    # hidden tab's content is still in the page, and the page's tab panels look through their whole
    # content for something focusable on every rerun; a big program's text views (tens of thousands
    # of elements) made that a large part of every click and of every layer opened (docs/performance.md).
    tab_k, tab_t, tab_s, tab_m, tab_d = st.tabs(list(TABS.values()), default=state.link_tab or None, key="view_tab",
                                                on_change="rerun")
    with tab_k:
        if tab_k.open:
            kernels_tab(b, state, present)
    with tab_t:
        if tab_t.open:
            views.text_views(b, state.sel)
    with tab_m:  # the memory view: picking a buffer selects its kernel
        if tab_m.open:
            render_memory_view(b, present=present, follows=state.comes_with_timings("The buffer assignment"))
    with tab_d:  # many devices: what each holds, the collectives; picking one selects its kernel
        if tab_d.open:
            render_devices_view(b)
    with tab_s:
        if tab_s.open:
            source_tab(b, state)


def kernels_tab(b: Bundle, state: ExplorerState, present: bool = False) -> None:
    """Kernels and timings; a kernel picked is selected in the graphs."""
    try:
        picked = render_kernels_view(b, key_prefix="main",
                                     selected=state.sel.get("name") if state.sel.get("side") == "post" else None,
                                     measuring=state.pending is not None, present=present)
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # a damaged bundle's timings
        picked = None
        show_error(f"timings error: this bundle's measurements are malformed ({type(e).__name__}: {e})")
    if picked and picked != state.sel.get("name"):
        state.sel = {"side": "post", "name": picked}
        st.rerun()


def source_tab(b: Bundle, state: ExplorerState) -> None:
    """The source, each line tagged with its kernels; a line picked lights up its ops."""
    code = b.source.get("code")
    if not code:
        st.info("This input carries no source code (an imported HLO text or dump).")
        return
    n_lines = len(code.splitlines())
    lines_with_ops = {i: ops for i, ops in queries.ops_by_line(b).items() if 1 <= i <= n_lines and ops}
    opts = [None] + sorted(lines_with_ops)
    src_lines = code.splitlines()
    cur = state.sel.get("line")
    pick = st.selectbox("Source line", opts, index=opts.index(cur) if cur in opts else 0, key="src_line",
                        format_func=lambda i: "— pick a line to light up its ops —" if i is None else
                        f"line {i}: {src_lines[i - 1].strip()[:70]}  ({len(lines_with_ops[i])} ops)")
    if pick is not None and pick != cur:
        state.sel = {"line": pick}
        st.rerun()
    st.caption("The graphs' Source button shows these lines beside the graphs, each tagged with its kernels.")
    tags = graph_payload.line_tags(state.payload)
    st.markdown(views.code_html(code, {cur} if cur else set(), "s", tags=tags), unsafe_allow_html=True)
    st.download_button("Download source", code, file_name=f"{b.title}.py", key="dl_src")


def share(b: Bundle, state: ExplorerState, present: bool) -> None:
    """The view's link, in the address bar and shown for copying (a gallery model or pasted
    code; an upload has none), and the downloads."""
    st.markdown("#### Share and export")
    link = view_link(b, state, present)
    linkable = bool(link.get("model") or link.get("code"))
    if linkable:  # (a lecture on show keeps its own lecture= and slide= beside the view's)
        st.query_params.from_dict({**permalink.state_to_params(link), **lecture_ui.link_params()})
    share1, share2 = st.columns([3, 2])
    with share1:
        if linkable:
            public, public_problem = permalink.public_url()
            if public_problem:
                st.caption(public_problem)
            base = permalink.link_base(st.context.url, public)
            st.caption("Link to this view (model, options, measuring, presentation, selection and tab) — "
                       "copy with the button on the right:")
            st.code(base + permalink.query_string(link), language=None, wrap_lines=True)
        else:
            st.caption("Uploaded HLO and bundles have no link: share the bundle or the HTML report instead.")
    with share2:
        downloads(b, state)
    lecture_ui.editor(link if linkable else None)


def downloads(b: Bundle, state: ExplorerState) -> None:
    """The HTML report, the bundle, and the graphs' views as SVG and DOT."""
    # Every download is made when it is clicked, not on every rerun (a big program's bundle is
    # tens of MB, and its full graph a layout of minutes). The callables are a module's
    # functions, not lambdas or functions of the page's script: Streamlit keeps them past the
    # run, and one defined in the script would keep its whole run (upload, bundle, graphs) alive.
    # While a big program is measured the compile on show lacks its timings, buffer assignment and
    # code (they come together): a report or bundle of it would say it has none, so they wait
    later = ("Ready when measuring is done: the timings, the buffer assignment and the kernels' code come together."
             if state.pending is not None else None)
    st.download_button("Download HTML report (one file, works offline)", functools.partial(views.report_of, b),
                       file_name=f"{b.title}.report.html", mime="text/html", key="dl_report",
                       width="stretch", disabled=later is not None, help=later)
    st.download_button("Download bundle (JSON)", functools.partial(views.bundle_json, b),
                       file_name=f"{b.title}.bundle.json", mime="application/json", key="dl_bundle", width="stretch",
                       disabled=later is not None, help=later)
    layered = state.payload.get("open_variant") == "layers"
    with st.expander("Graphs as SVG / DOT" + (" (the layers view)" if layered else "")):
        # the view the graphs opened with, its layout from the app's cache
        slug = report.slug_of(b.title)
        for side, word in (("pre", "before"), ("post", "after")):
            if side not in state.payload.get("graphs", {}):
                continue
            for fmt, mime in (("dot", "text/vnd.graphviz"), ("svg", "image/svg+xml")):
                fname = f"{slug}.{word}.{fmt}"
                st.download_button(fname, functools.partial(views.graph_file, b, side, fmt, layered),
                                   file_name=fname, mime=mime, key=f"dl_{fname}")
