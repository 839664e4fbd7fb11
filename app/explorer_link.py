"""The Explorer's links (``app.permalink`` turns them into query parameters and back): a shared
link opened, once per session, into the sidebar's widgets and the page's state; and the link of
the view on show, put in the address bar and shown for copying (``view_link``)."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from analysis.bundle.core import Bundle
from analysis.errors import ExplorerError
from analysis.options import format_options
from analysis.service import runtimes
from analysis.service.job import Job
from analysis.service.store import default_store
from app import permalink
from app.explorer_state import ExplorerState
from app.page_helpers import as_text
from sample_models import gallery

# The tabs below the graphs: a link's ``view`` -> the tab's label.
TABS = {"kernels": "Kernels & timings", "text": "Text views", "source": "Source", "memory": "Memory",
        "devices": "Devices"}


# The sidebar's widgets a link sets (under their keys), re-applied at the sidebar's first drawing
WIDGETS = ("source_kind", "gallery_choice", "backend", "free_options", "measure", "compare", "devices", "jax")


def open_link(state: ExplorerState) -> None:
    """Opening a shared link: what it names (model or pasted code, backend, options, measuring,
    the fusion-off compile, devices, selection, tab) restored, once per session. The sidebar's
    widgets get its values under their keys; the compile it names (``state.link_job``) is the
    page's first load, which comes from the cache when the bundle is there."""
    if state.link_applied:
        return
    ss = st.session_state
    state.link_applied = True
    asked = permalink.params_to_state(st.query_params.to_dict())
    state.link_errors = list(asked["errors"])
    state.link_job = None
    if asked.get("code"):
        try:
            src = permalink.resolve_code(asked, default_store())
        except ExplorerError as e:
            src, _ = None, asked["errors"].append(e.one_line())
        state.link_errors = list(asked["errors"])
        if src is not None:
            state.code, state.code_id = src, asked["code"]
            ss.source_kind = "Paste code"
            state.link_job = Job(kind="code", source=src, filename="<pasted code>", name="pasted")
    elif asked.get("model"):
        ss.gallery_choice, ss.source_kind = asked["model"], "Gallery"
        state.link_job = Job(kind="gallery", name=asked["model"], filename=str(gallery()[asked["model"]].path))
    if asked.get("backend"):
        ss.backend = asked["backend"]
    if asked.get("options"):
        ss.free_options = format_options(asked["options"])
    if asked.get("measure") is not None:
        ss.measure = asked["measure"]
    if asked.get("compare") is not None:
        ss.compare = asked["compare"]
    if asked.get("devices") is not None:
        ss.devices = asked["devices"]
    jax = link_jax(asked.get("jax"), state)
    if asked.get("jax"):
        ss.jax = jax or runtimes.own().jax  # the sidebar's select (app.explorer_sidebar)
    if state.link_job is not None:
        state.link_job = replace(state.link_job, jax=jax, devices=asked.get("devices"),
                                 backend=asked.get("backend") or "auto",
                                 compiler_options=dict(asked.get("options") or {}),
                                 measure=asked.get("measure") is not False, compare_fusion=bool(asked.get("compare")))
    state.link_widgets = {k: ss[k] for k in WIDGETS if k in ss}
    state.link_sel = permalink.selection(asked)
    state.link_tab = TABS.get(asked.get("view") or "", None)
    state.code_open = asked.get("view") == "code"  # view=code: the graphs' Code pane, on the node's kernel


def link_jax(version: str | None, state: ExplorerState) -> str | None:
    """The runtime a link's ``jax`` names, when this machine has it and it is not the app's own
    (``Job.jax``); a release not here is one of the link's notes, and the app's own jax is used."""
    if not version:
        return None
    have, own = [r.jax for r in runtimes.available()], runtimes.own().jax
    if version not in have:
        state.link_errors.append(f"link: jax {version} is not on this server (it has {', '.join(have)}); "
                                 f"compiled with jax {own}")
        return None
    return None if version == own else version


def compiled_jax(b: Bundle, state: ExplorerState) -> str | None:
    """The jax release this page compiled ``b`` with, for its link: None when it is the app's own,
    or the bundle is an upload or a recorded compile (their jax is not a choice made here)."""
    jax = b.environment.get("jax")
    if state.recorded or b.source.get("kind") not in ("gallery", "code") or jax == runtimes.own().jax:
        return None
    return jax


def view_link(b: Bundle, state: ExplorerState, present: bool) -> dict:
    """The link state (``app.permalink``) of what the page shows: the compile (a gallery model,
    or pasted code by its id in the store: stored now, once per code), its options and jax, the tab or
    the Code pane, the selection, presentation. Pasted code the store refuses gets a caption
    saying why, and no link."""
    ss = st.session_state
    link = {"backend": b.environment.get("gpu_target") or b.options.get("backend"),
            "options": b.options.get("compiler_options") or {},
            "view": "code" if state.code_open else next((k for k, v in TABS.items() if v == ss.get("view_tab")), None),
            "node": state.sel.get("name"), "side": state.sel.get("side"), "line": state.sel.get("line"),
            "present": present, **state.flags,
            "devices": b.options.get("devices") if ss.get("devices") else None,  # 0: the file's own
            "jax": compiled_jax(b, state)}
    kind = b.source.get("kind")
    if kind == "gallery":
        link["model"] = b.source.get("name")
    elif kind == "code" and b.source.get("code"):
        if state.code_id_for != b.source["code"]:
            try:
                state.code_id = default_store().put_code(b.source["code"])
                state.code_id_for = b.source["code"]
            except ExplorerError as e:
                state.code_id = None
                st.caption(f"Pasted code cannot be linked: {e.one_line()}")
        link["code"] = state.code_id
    return link


def show_link_notes(state: ExplorerState) -> None:
    """What the opened link asked that is not there, one warning each (its words shown as text)."""
    for msg in state.link_errors:
        st.warning(as_text(msg))
