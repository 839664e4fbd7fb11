"""The explorer page (``app/main.py`` is the entry point that names the pages).

The page: a sidebar to choose what to compile (gallery, pasted code, uploaded HLO or bundle),
the backend and compiler options; a summary strip; the pre- and post-optimization graphs side
by side with the selection linked across; the details of what is selected; kernels and
timings; the stage texts and the source. Compiles run in a worker process (``app.runner``);
this process only reads Bundles.
"""

from __future__ import annotations

import functools

from dataclasses import replace

import streamlit as st

from analysis import tuning
from analysis.bundle.core import Bundle, device_label
from analysis.errors import ExplorerError
from analysis.options import format_options, parse_options
from analysis.service.job import Job
from app import graph_payload, guard, queries, runner, safe, views
from app.page_helpers import PRESENT_CSS, as_text, presets_for, show_error, show_note, unexpected
from app.devices_view import devices_control
from app.uploads import choice_label, load_upload, open_choice, upload_choices
from sample_models import DEFAULT_MODEL, gallery

st.set_page_config(page_title="XLA Explorer", layout="wide")
st.markdown(views.CSS, unsafe_allow_html=True)

ss = st.session_state
ss.setdefault("bundle", None)
ss.setdefault("error", None)
ss.setdefault("sel", {})
ss.setdefault("expand", {"scopes": [], "fusions": [], "collapsed": []})
ss.setdefault("last_click", {})
ss.setdefault("session_id", guard.browser_session_id())  # per browser, not per tab

GALLERY = gallery()
TABS = {"kernels": "Kernels & timings", "text": "Text views", "source": "Source", "memory": "Memory",
        "devices": "Devices"}

if "link_applied" not in ss:
    # Opening a shared link: restore what it names (model or pasted code, backend, options,
    # selection, tab); the compile below comes from the cache when the bundle is there.
    from app import permalink

    ss.link_applied = True
    state = permalink.params_to_state(st.query_params.to_dict())
    ss.link_errors = list(state["errors"])
    ss.link_job = None
    if state.get("code"):
        try:
            from analysis.service.store import default_store

            src = permalink.resolve_code(state, default_store())
        except ExplorerError as e:
            src, _ = None, state["errors"].append(e.one_line())
        ss.link_errors = list(state["errors"])
        if src is not None:
            ss.code, ss.source_kind, ss.code_id = src, "Paste code", state["code"]
            ss.link_job = Job(kind="code", source=src, filename="<pasted code>", name="pasted")
    elif state.get("model"):
        ss.gallery_choice, ss.source_kind = state["model"], "Gallery"
        ss.link_job = Job(kind="gallery", name=state["model"], filename=str(GALLERY[state["model"]].path))
    if state.get("backend"):
        ss.backend = state["backend"]
    if state.get("options"):
        ss.free_options = format_options(state["options"])
    if state.get("measure") is not None:
        ss.measure = state["measure"]
    if state.get("compare") is not None:
        ss.compare = state["compare"]
    if state.get("devices") is not None:
        ss.devices = state["devices"]
    if ss.link_job is not None:
        ss.link_job.devices = state.get("devices")
        ss.link_job.backend = state.get("backend") or "auto"
        ss.link_job.compiler_options = dict(state.get("options") or {})
        ss.link_job.measure = state.get("measure") is not False
        ss.link_job.compare_fusion = bool(state.get("compare"))
    ss.link_sel = permalink.selection(state)
    ss.view = TABS.get(state.get("view") or "", None)
    ss.code_open = state.get("view") == "code"  # view=code: the graphs' Code pane, on the node's kernel


def _parse_free_options(text: str) -> dict:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return parse_options(lines)


def compile_job(job: Job) -> None:
    """Run a job in the worker with phase progress; keep the old bundle on error. A big
    program's measuring job comes back once compiled: its graphs are shown while it is measured
    (``ss.pending``, collected by ``adopt_measured``)."""
    from app.page_helpers import phase_text

    # an earlier compile still being measured is no longer what the page shows (its measured
    # bundle still reaches the cache)
    ss.pending, ss.pending_error = None, None
    holder = st.empty()
    box: list = []  # the status box, drawn at the first phase that is not the cache's answer

    def status():
        if not box:
            box.append(holder.status("Compiling…", expanded=True))
            sidebar_now()  # (a compile to wait for: the sidebar's widgets meanwhile)
        return box[0]

    def progress(p: str) -> None:
        if p == "cached" and not box:  # a cached bundle (a shared link): no box, its graphs at once
            return
        status().update(label=phase_text(p) + "…")
        status().write(phase_text(p))

    try:
        outcome = runner.compile_bundle(job, session=ss.session_id, progress=progress, early=True,
                                        ahead=graph_payload.payload_ahead)
    except ExplorerError as e:
        ss.error = e.full_text()
        ss.error_at = (e.file, e.line, e.column, e.message)
        outcome = None
    except Exception as e:  # noqa: BLE001 - one line, never a traceback on the page
        ss.error, ss.error_at, outcome = unexpected(e, "compile"), None, None
    holder.empty()  # the status box, where one was drawn, goes; an error is shown next to the code
    if outcome is None:
        return
    ss.pending = outcome.pending
    ss.bundle = outcome.bundle
    ss.shown_flags = {"measure": bool(job.measure), "compare": bool(job.compare_fusion)}  # for its link
    ss.recorded = outcome.recorded
    ss.error = None
    ss.error_at = None
    ss.sel = {}
    ss.expand = {"scopes": [], "fusions": [], "collapsed": []}


# ----------------------------------------------------------------------------- sidebar

# A session's first run ends with the graphs: the page below them (tabs, tables, charts) kept
# the browser from drawing them for seconds. The frame says when they are drawn and the page
# runs again, whole; any other rerun brings it too (docs/performance.md). Not without a browser
# (a run with no request headers: a test's AppTest), which has no frame to say so.
first_run = "rest_deferred" not in ss
if first_run:
    ss.rest_deferred = bool(st.context.headers)
if "present" not in ss:  # presentation mode: a toggle, and ?present=1 in a link
    ss.present = str(st.query_params.get("present", "")).lower() in ("1", "true", "yes", "on")


def sidebar() -> tuple:
    """The sidebar: what to compile and how. (source kind, Compile pressed, the compile to run
    or None)."""
    with st.sidebar:
        st.markdown("## XLA Explorer")
        source_kind = st.radio("Model", ["Gallery", "Paste code", "Upload HLO / bundle"], key="source_kind",
                               horizontal=False)
        job = None
        pressed, run_compile = False, None
        if source_kind == "Gallery":
            names = list(GALLERY)
            choice = st.selectbox("Gallery model", names, key="gallery_choice",
                                  format_func=lambda n: f"{n} — {GALLERY[n].title.split(':')[0]}")
            st.caption(GALLERY[choice].title)
            job = Job(kind="gallery", name=choice, filename=str(GALLERY[choice].path))
        elif source_kind == "Paste code":
            ss.setdefault("code", GALLERY[DEFAULT_MODEL].source)
            if ss.get("ace") is not None:  # what the editor (in the main pane) holds now
                ss.code = ss.ace
            st.caption("Edit the code in the main pane: define `model(...)` and `example_inputs()` returning its "
                       "arguments, then Compile.")
            job = Job(kind="code", source=ss.code, filename="<pasted code>", name="pasted")
        else:
            up = st.file_uploader("HLO text (.hlo/.txt), a bundle (.json) or a zipped XLA dump folder (.zip)",
                                  type=["hlo", "txt", "json", "zip"], key="upload")
            tr = st.file_uploader("Your profiler trace: jax.profiler.trace's folder zipped, or its "
                                  ".xplane.pb or .trace.json.gz", type=["zip", "pb", "gz", "json"], key="upload_trace",
                                  help="The kernels' times from your own machine (a GPU, a TPU or a CPU) go onto the "
                                       "graphs and the table, labelled with the device the trace names. Alone, its "
                                       ".xplane.pb also gives the optimized HLO of the modules it ran")
            if (up is not None or tr is not None) and st.button("Open", key="open_upload", type="primary",
                                                                 width="stretch"):
                load_upload(up, tr)  # a trace alone: the modules it ran, from the HLO it carries
            choices, picked, what = upload_choices(ss.get("bundle"))
            if len(choices) > 1 and ss.get("upload_job") is not None:
                pick = st.selectbox(what, range(len(choices)), format_func=lambda i: choice_label(choices[i]),
                                    index=next((i for i, c in enumerate(choices) if c["name"] == picked), 0),
                                    key="upload_pick")
                if choices[pick]["name"] != picked and st.button("Show this module", key="upload_show") \
                        and open_choice(choices[pick]["name"]):
                    st.rerun()  # the page, and this box, of the module now shown

        if job is not None:
            gpu = runner.gpu_present()
            target = runner.APP_GPU_TARGET
            backend = st.radio("Backend", ["auto", "cpu", "gpu", target], key="backend", horizontal=True,
                               format_func=lambda v: f"{v.upper()} (no GPU)" if v == target else v,
                               help=f"auto = GPU when one is present, else CPU. {target.upper()} (no GPU) = XLA's GPU "
                                    f"compiler for an {target.upper()}, run here without one: the real GPU program "
                                    "(cuBLAS, cuDNN, Triton), compiled without autotuning and never run, so no timings.")
            on_target = backend == target
            if on_target:
                st.caption(f"{target.upper()} compile without a GPU: "
                           + ("live (JAX's CUDA plugin is installed)." if runner.cuda_plugin_present() else
                              "the gallery's recorded compiles (presets Default, Fusion + Triton rewrites off and Triton GEMM "
                              "off); install the `cuda` extra to compile anything."))
            else:
                st.caption("Present here: CPU" + (" and GPU" if gpu else " only"))
            devices = devices_control(GALLERY[job.name].source if job.kind == "gallery" else job.source)
            pre = presets_for(backend)
            preset = st.selectbox("Compiler options", list(pre), key="preset")
            free = st.text_area("More options (KEY=VALUE per line)", key="free_options", height=70,
                                placeholder="xla_cpu_enable_fast_math=true")
            if pre[preset]:
                st.caption("Preset sets: `" + format_options(pre[preset]).replace("\n", "`, `") + "`")
            if on_target:  # shown unticked, leaving the user's own choice for the other backends alone
                st.checkbox("Measure kernel timings", value=False, disabled=True, key="measure_off",
                            help="Needs the device: a compile without one cannot be run")
                measure = False
            else:
                ss.setdefault("measure", True)  # on unless a link said measure=0
                measure = st.checkbox("Measure kernel timings", key="measure",
                                      help="Run the compiled program and time every kernel with the profiler")
            compare = st.checkbox("Compare with the fusion passes off", key="compare", value=False)
            pressed = st.button("Compile", type="primary", key="compile", width="stretch", help="Ctrl+Enter")

            def run_compile(job=job, pre=pre, preset=preset, free=free, backend=backend, measure=measure,
                            compare=compare, devices=devices) -> None:
                try:
                    opts = dict(pre[preset])
                    opts.update(_parse_free_options(free))
                except ExplorerError as e:
                    ss.error = e.one_line()
                else:
                    compile_job(replace(job, backend=backend, compiler_options=opts, measure=measure,
                                        compare_fusion=compare, devices=devices))
        st.text_input("Find and select an op", key="find",
                      placeholder="a name, an op_name path (attention/dot) or a line",
                      help="The graphs' own search box (above them) finds as you type, without a round trip")
        isolated, why = runner.sandbox_state()
        if not isolated:
            st.warning(f"Pasted code is NOT isolated: {why}")
        st.caption(runner.engine_line())
    return source_kind, pressed, run_compile


# A session's first run draws the sidebar's heading only: its widgets' scripts held the graphs
# back (docs/performance.md). They come with the run after the graphs, like the rest of the
# page, holding the session's (a link's) values; the heading keeps the sidebar's place, so the
# graphs do not move when they come. Where no graphs come soon (a compile to wait for, or none
# to show) they are drawn at once (``sidebar_now``).
sidebar_later = first_run and ss.rest_deferred
sidebar_pending = sidebar_later
if sidebar_later:
    st.sidebar.markdown("## XLA Explorer")
    source_kind, pressed, run_compile = ss.get("source_kind") or "Gallery", False, None
else:
    source_kind, pressed, run_compile = sidebar()


def sidebar_now() -> None:
    """The sidebar's widgets in a first run that held them back, once it is clear they would
    hold back nothing: the run compiles (seconds), or it ends without graphs."""
    global sidebar_pending
    if sidebar_pending:
        sidebar_pending = False
        sidebar()

# ----------------------------------------------------------------------------- top row

top_title, top_compile, top_present = st.columns([6, 1.6, 1.6], vertical_alignment="center")
with top_compile:
    pressed_main = st.button("Compile", key="compile_main", shortcut="Ctrl+Enter", width="stretch",
                             disabled=run_compile is None and not sidebar_later,  # (a click runs the page again, sidebar and all)
                             help="Compile what the sidebar (or the editor) holds")
with top_present:
    present = st.toggle("Presentation", key="present",
                        help="For a projector: no sidebar, the graphs fill the screen, labels at 14 px or more, "
                             "details beside them. Keys in the graphs: ] and [ step through the kernels, biggest first.")
if present:
    st.markdown(PRESENT_CSS, unsafe_allow_html=True)
status_slot = st.container()  # compiles show their progress here: one fixed place, so nothing below moves
if (pressed or pressed_main) and run_compile is not None:
    with status_slot:
        run_compile()
if ss.error and source_kind != "Paste code" and ss.bundle is not None:  # one place for it: pasted code
    with status_slot:  # shows it next to the editor
        show_error(ss.error)

# ----------------------------------------------------------------------------- first load

if ss.bundle is None and ss.error is None:
    first = ss.get("link_job") or Job(kind="gallery", name=DEFAULT_MODEL, filename=str(GALLERY[DEFAULT_MODEL].path),
                                      backend="cpu")
    with status_slot:
        compile_job(first if ss.get("link_job") else replace(first, measure=True))
    if ss.bundle is not None and ss.get("link_sel"):
        problem = queries.selection_problem(ss.bundle, ss.link_sel)  # a node= this compile lacks: a note
        ss.sel = ss.link_sel if problem is None else {}
        ss.link_errors = list(ss.get("link_errors") or []) + ([problem] if problem else [])
    ss.link_sel = None
for msg in ss.get("link_errors") or []:
    st.warning(as_text(msg))  # (a link's parameters in it: shown as text)



def adopt_measured() -> None:
    """The measured bundle of the compile on show, once its job is done: the same graphs, now
    with timings (the selection and the opened views stay). A failed measurement leaves the
    compile's bundle, with its one-line reason."""
    p = ss.get("pending")
    if p is None or not p.done():
        return
    ss.pending = None
    try:
        ss.bundle = p.result(0).bundle
    except ExplorerError as e:
        ss.pending_error = e.one_line()
    except Exception as e:  # noqa: BLE001 - one line, never a traceback on the page
        ss.pending_error = unexpected(e, "measure")


@st.fragment(run_every=1.0)
def measuring_notice() -> None:
    """While the compile on show is measured: a line that says so, watching the job; the page
    reruns once its measured bundle is here."""
    from app.page_helpers import phase_text

    p = ss.get("pending")
    if p is None:
        return
    if p.done():
        st.rerun(scope="app")
    st.info(f"{phase_text(p.phase or 'measure')}: these graphs are this compile's, and its kernel timings "
            "follow when every kernel has been timed.", icon=":material/timer:")


adopt_measured()
b: Bundle | None = ss.bundle
if b is None:
    top_title.markdown("### XLA Explorer")

# ----------------------------------------------------------------------------- the code editor

if source_kind == "Paste code":
    code_box = st.expander("Your code (Ctrl+Enter compiles)", expanded=not present)
    with code_box:
        try:
            from streamlit_ace import st_ace

            marks = []
            where = ss.get("error_at")
            if ss.error and where and where[0] == "<pasted code>" and where[1]:
                # the failing line marked in the editor's gutter
                marks = [{"row": where[1] - 1, "column": max((where[2] or 1) - 1, 0), "type": "error",
                          "text": str(where[3])[:300]}]
            typed = st_ace(value=ss.code, language="python", theme="tomorrow", key="ace", height=260, font_size=14,
                           show_gutter=True, auto_update=True, wrap=False, tab_size=4, annotations=marks)
            if typed is not None:
                ss.code = typed
        except ImportError:  # a plain text area if the editor component is missing
            ss.code = st.text_area("Code", ss.code, height=260, key="code_area")
        if ss.error:
            show_error(ss.error)
        st.caption("Runs in a sandboxed worker process (no network, limited time and memory), never in this server.")
if b is None:  # nothing compiled yet: the error (pasted code has it under the editor, above), and no graphs
    if not (ss.error and source_kind == "Paste code"):
        show_error(ss.error or "Nothing compiled yet.")
    sidebar_now()
    st.stop()

# ----------------------------------------------------------------------------- header

env = b.environment
title = b.title
desc = b.source.get("description")
if b.source.get("kind") == "code" and desc:  # pasted code: its docstring's first line is its title
    title = desc.partition("\n")[0].strip().rstrip(".:") or title
# the title and environment come from a bundle (a worker's or an upload's): escaped, never HTML
# (safe.text: HTML escaped and Markdown's characters too, so no image or link in it is fetched)
top_title.markdown(f"### {safe.text(title)} <span style='font-size:{0.95 if present else 0.8}rem;color:#666;font-weight:normal'>"
                   + safe.text(f"{device_label(env)} · {env.get('backend', '')}"
                               + (f" · jax {env['jax']}" if env.get("jax") else "")) + "</span>",
                   unsafe_allow_html=True)
notices = st.container()  # one fixed place for notices, so the graphs below never move in the page
with notices:
    stale = None
    if source_kind == "Paste code" and ss.get("code") is not None and ss.code != b.source.get("code"):
        stale = "the editor's text has changed since this compile"
    elif source_kind == "Gallery" and b.source.get("kind") == "gallery" and ss.get("gallery_choice") \
            and ss.gallery_choice != b.source.get("name"):
        stale = f"the sidebar names {ss.gallery_choice}"
    if ss.error and not stale:
        stale = "the last compile failed"
    if stale:
        st.warning(f"Stale: these graphs are from the last good compile ({b.title}); {stale}. "
                   "Press Compile (Ctrl+Enter).", icon=":material/history:")
    if ss.get("pending") is not None:
        measuring_notice()
    elif ss.get("pending_error"):
        st.warning(f"Not measured: {ss.pending_error}. The graphs are this compile's; Compile again to retry.",
                   icon=":material/timer_off:")
    from analysis.render.summary import state_note

    state = state_note(b)
    if state:
        show_note(state)
    if env.get("deviceless"):
        st.info(f"XLA:GPU's real program for an {env.get('device_kind', 'NVIDIA GPU')}, compiled without one"
                + (f" (recorded {b.created[:10]})" if ss.get("recorded") else "")
                + ": untuned and never run, so no timings.", icon=":material/memory:")
if not present:  # presentation mode shows the same cards, large, in the graphs' details panel
    views.summary_strip(b)

# ----------------------------------------------------------------------------- search from the sidebar

query = ss.get("find") or ""
if query != ss.get("find_done"):
    ss.find_done = query
    hits = queries.search(b, query) if query else []
    if hits:
        s_, n_, _ = hits[0]
        ss.sel = {"line": int(query.strip())} if query.strip().isdigit() else {"side": s_, "name": n_}
    elif query:
        st.sidebar.caption(f"No op matches {query!r}.")

# ----------------------------------------------------------------------------- graphs, details, source

payload_key = (id(b), b.created, b.title)
if ss.get("payload_for") != payload_key:
    ss.payload = graph_payload.graph_payload(b)
    ss.payload_for = payload_key
    if "packed" in ss.payload:  # a big program: the heap its bundle and views were built in, back now
        tuning.return_free_memory(collect=False)
if ss.payload.get("error"):
    show_error(ss.payload["error"])


@st.fragment
def graphs_fragment(b, present: bool, show_source: bool) -> None:
    """The graphs, on their own: what they send reruns only this (a view asked for is laid out
    and sent back without running the rest of the page); a new selection reruns the page, whose
    details, tables and text views follow it."""
    # a view the graphs asked for that is not laid out yet (a big program opens with its layers
    # only): laid out now, before the graphs are drawn, so this run already sends it
    asked = ss.get("graphs")
    # (no st.spinner: the panes say "Laying out …" themselves, and a spinner inserted before
    # the graphs made the page's focus handling walk its whole DOM, seconds of a layer's opening:
    # docs/performance.md)
    if isinstance(asked, dict) and isinstance(asked.get("want"), str) and asked["want"] in ss.payload.get("lazy", ()):
        graph_payload.add_variant(b, ss.payload, asked["want"])
    code_was = bool(ss.get("code_open"))
    ss.code_open = views.code_pane_open(b, ss.payload, asked, code_was)  # and its code, when first opened
    picked = views.explorer_graphs(b, ss.payload, ss.sel, key="graphs", present=present, show_source=show_source,
                                   tell_drawn=bool(ss.get("rest_deferred")), show_code=bool(ss.get("code_open")))
    if bool(ss.get("code_open")) != code_was:
        st.rerun(scope="app")  # the link below names the pane (view=code)
    if isinstance(picked, dict) and picked.get("n") != ss.last_click.get("graphs"):
        ss.last_click["graphs"] = picked.get("n")
        if picked.get("drawn"):  # the graphs are up: now the rest of the page (no selection in it)
            if ss.get("rest_deferred"):
                ss.rest_deferred = False
                st.rerun(scope="app")
            return
        if isinstance(picked.get("row"), int) and not isinstance(picked.get("row"), bool):
            ss.fd_focus = picked["row"]  # "why not fused": its row of the decisions table, shown below
            st.rerun(scope="app")
        if "want" not in picked and "need" not in picked:  # asking for a view or the data is no selection
            new = dict(picked.get("sel") or {})
            if new != ss.sel:
                ss.sel = new
                st.rerun(scope="app")


graphs_fragment(b, present, source_kind == "Paste code" and not present)
if first_run and ss.rest_deferred:
    st.stop()
ss.rest_deferred = False

# ----------------------------------------------------------------------------- below the graphs

views.legend()
if desc:
    from sample_models.lessons import lesson as gallery_lesson

    les_title, _, what_to_look_for = desc.partition("\n")
    les = gallery_lesson(b)
    entry = GALLERY.get(b.source.get("name")) if b.source.get("kind") == "gallery" else None
    shown_title = entry.title if entry is not None else safe.text(les_title.strip(), 120)
    with st.expander(f"Lesson: {shown_title}", expanded=False):
        if entry is not None:  # the gallery's own lesson, from its file here (Markdown of ours)
            st.markdown(entry.lesson)
        else:  # a docstring of pasted code, or a bundle's: the user's text, shown as text
            show_note(what_to_look_for.strip() or les_title.strip())
        if les is not None:
            st.markdown("**On this compile:** " + les.markdown())
        if b.source.get("kind") == "gallery" and b.platform == "cpu":
            from urllib.parse import urlencode

            h200 = urlencode({"model": b.source.get("name"), "backend": runner.APP_GPU_TARGET})
            st.markdown(f"**On a GPU:** the same model as XLA compiles it for an H200 — no GPU needed: "
                        f"[open it]({'?' + h200}), or put both side by side on the Compare page "
                        "(*One model, two backends*).")

details_box = st.container()  # the selection's full details (hooks add their lines here)
with details_box:
    if ss.sel:
        cur = ss.sel.get("name") or f"line {ss.sel.get('line')}"
        side_word = {"pre": "before", "post": "after"}.get(ss.sel.get("side"), "source")
        st.markdown(f"#### Details — {cur}")
        st.caption(f"Selected: **{cur}** ({side_word} optimization)")
    views.details_panel(b, ss.sel)
    from app.decisions_view import render as render_decisions  # why (not) fused: lines + the table

    render_decisions(b, ss)

# Only the open tab's content is made (``on_change="rerun"`` reruns the page on a switch): a
# hidden tab's content is still in the page, and the page's tab panels look through their whole
# content for something focusable on every rerun; a big program's text views (tens of thousands
# of elements) made that a large part of every click and of every layer opened (docs/performance.md).
tab_k, tab_t, tab_s, tab_m, tab_d = st.tabs(list(TABS.values()), default=ss.get("view") or None, key="view_tab",
                              on_change="rerun")
with tab_k:
    if tab_k.open:
        try:
            from app.kernels_view import render_kernels_view
        except ImportError:
            render_kernels_view = None
        if render_kernels_view is not None:
            try:
                picked = render_kernels_view(b, key_prefix="main",
                                             selected=ss.sel.get("name") if ss.sel.get("side") == "post" else None,
                                             measuring=ss.get("pending") is not None)
            except (KeyError, TypeError, ValueError, AttributeError) as e:  # a damaged bundle's timings
                picked = None
                show_error(f"timings error: this bundle's measurements are malformed ({type(e).__name__}: {e})")
            if picked and picked != ss.sel.get("name"):
                ss.sel = {"side": "post", "name": picked}
                st.rerun()
        else:
            import pandas as pd

            st.dataframe(pd.DataFrame([{"kernel": k.name, "route": k.route, "library": k.library, "bytes": k.bytes,
                                        "flops": k.flops} for k in b.kernels]), width="stretch")
with tab_t:
    if tab_t.open:
        views.text_views(b, ss.sel)
with tab_m:  # the memory view: picking a buffer selects its kernel
    if tab_m.open:
        from app.memory_view import render_memory_view

        render_memory_view(b, present=present)
with tab_d:  # many devices: what each holds, the collectives; picking one selects its kernel
    if tab_d.open:
        from app.devices_view import render_devices_view

        render_devices_view(b)
with tab_s:
    if tab_s.open:
        code = b.source.get("code")
        if code:
            n_lines = len(code.splitlines())
            lines_with_ops = {i: ops for i, ops in queries.ops_by_line(b).items() if 1 <= i <= n_lines and ops}
            opts = [None] + sorted(lines_with_ops)
            src_lines = code.splitlines()
            cur = ss.sel.get("line")
            pick = st.selectbox("Source line", opts, index=opts.index(cur) if cur in opts else 0, key="src_line",
                                format_func=lambda i: "— pick a line to light up its ops —" if i is None else
                                f"line {i}: {src_lines[i - 1].strip()[:70]}  ({len(lines_with_ops[i])} ops)")
            if pick is not None and pick != cur:
                ss.sel = {"line": pick}
                st.rerun()
            st.caption("The graphs' Source button shows these lines beside the graphs, each tagged with its kernels.")
            tags = graph_payload.line_tags(ss.payload)
            st.markdown(views.code_html(code, {cur} if cur else set(), "s", tags=tags), unsafe_allow_html=True)
            st.download_button("Download source", code, file_name=f"{b.title}.py", key="dl_src")
        else:
            st.info("This input carries no source code (an imported HLO text or dump).")

# ----------------------------------------------------------------------------- share & export

st.markdown("#### Share and export")
link_state = {"backend": b.environment.get("gpu_target") or b.options.get("backend"),
              "options": b.options.get("compiler_options") or {},
              "view": "code" if ss.get("code_open") else next((k for k, v in TABS.items() if v == ss.get("view_tab")), None),
              "node": ss.sel.get("name"), "side": ss.sel.get("side"), "line": ss.sel.get("line"),
              "present": present, **(ss.get("shown_flags") or {}),
              "devices": b.options.get("devices") if ss.get("devices") is not None else None}
kind = b.source.get("kind")
if kind == "gallery":
    link_state["model"] = b.source.get("name")
elif kind == "code" and b.source.get("code"):
    if ss.get("code_id_for") != b.source["code"]:
        try:
            from analysis.service.store import default_store

            ss.code_id = default_store().put_code(b.source["code"])
            ss.code_id_for = b.source["code"]
        except ExplorerError as e:
            ss.code_id = None
            st.caption(f"Pasted code cannot be linked: {e.one_line()}")
    link_state["code"] = ss.get("code_id")
from app import permalink  # noqa: E402
from analysis.render import report  # noqa: E402

linkable = bool(link_state.get("model") or link_state.get("code"))
if linkable:
    st.query_params.from_dict(permalink.state_to_params(link_state))
share1, share2 = st.columns([3, 2])
with share1:
    if linkable:
        public, public_problem = permalink.public_url()
        if public_problem:
            st.caption(public_problem)
        base = permalink.link_base(st.context.url, public)
        st.caption("Link to this view (model, options, measuring, presentation, selection and tab) — "
                   "copy with the button on the right:")
        st.code(base + permalink.query_string(link_state), language=None, wrap_lines=True)
    else:
        st.caption("Uploaded HLO and bundles have no link: share the bundle or the HTML report instead.")


with share2:
    # Every download is made when it is clicked, not on every rerun (a big program's bundle is
    # tens of MB, and its full graph a layout of minutes). The callables are a module's
    # functions, not lambdas or functions of this script: Streamlit keeps them past the run, and
    # one defined here would keep this whole run (upload, bundle, graphs) alive.
    st.download_button("Download HTML report (one file, works offline)", functools.partial(views.report_of, b),
                       file_name=f"{b.title}.report.html", mime="text/html", key="dl_report",
                       width="stretch")
    st.download_button("Download bundle (JSON)", functools.partial(views.bundle_json, b),
                       file_name=f"{b.title}.bundle.json", mime="application/json", key="dl_bundle", width="stretch")
    layered = ss.payload.get("open_variant") == "layers"
    with st.expander("Graphs as SVG / DOT" + (" (the layers view)" if layered else "")):
        # the view the graphs opened with, its layout from the app's cache
        slug = report.slug_of(b.title)
        for side, word in (("pre", "before"), ("post", "after")):
            if side not in ss.payload.get("graphs", {}):
                continue
            for fmt, mime in (("dot", "text/vnd.graphviz"), ("svg", "image/svg+xml")):
                fname = f"{slug}.{word}.{fmt}"
                st.download_button(fname, functools.partial(views.graph_file, b, side, fmt, layered),
                                   file_name=fname, mime=mime, key=f"dl_{fname}")
