"""XLA Explorer — the Streamlit app. Run with ``streamlit run app/main.py``.

The page: a sidebar to choose what to compile (gallery, pasted code, uploaded HLO or bundle),
the backend and compiler options; a summary strip; the pre- and post-optimization graphs side
by side with the selection linked across; the details of what is selected; kernels and
timings; the stage texts and the source. Compiles run in a worker process (``app.runner``);
this process only reads Bundles.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import streamlit as st  # noqa: E402

from analysis.bundle import Bundle, bundle_from_hlo  # noqa: E402
from analysis.errors import ExplorerError  # noqa: E402
from analysis.options import format_options, presets  # noqa: E402
from analysis.worker import Job  # noqa: E402
from app import runner, views  # noqa: E402
from sample_models import DEFAULT_MODEL, gallery  # noqa: E402

st.set_page_config(page_title="XLA Explorer", layout="wide")
st.markdown(views.CSS, unsafe_allow_html=True)

ss = st.session_state
ss.setdefault("bundle", None)
ss.setdefault("error", None)
ss.setdefault("sel", {})
ss.setdefault("expand", {"scopes": [], "fusions": [], "collapsed": []})
ss.setdefault("last_click", {})
ss.setdefault("session_id", os.urandom(6).hex())

GALLERY = gallery()


def _parse_free_options(text: str) -> dict:
    from analysis.run import parse_options  # pure helper; importing run does not import jax

    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return parse_options(lines)


def compile_job(job: Job) -> None:
    """Run a job in the worker with phase progress; keep the old bundle on error."""
    phases = {"load": "Loading the code", "trace": "Tracing to a jaxpr", "lower": "Lowering to StableHLO / HLO",
              "compile": "Compiling with XLA", "analyze": "Analyzing kernels", "measure": "Measuring kernels",
              "compare": "Compiling and measuring with fusion disabled", "queued": "Waiting in the queue"}
    holder = st.empty()
    with holder.status("Compiling…", expanded=True) as status:
        def progress(p: str) -> None:
            status.update(label=phases.get(p, p) + "…")
            status.write(phases.get(p, p))

        try:
            b = runner.compile_bundle(job, session=ss.session_id, progress=progress)
        except ExplorerError as e:
            ss.error = e.one_line()
            status.update(label="Failed", state="error", expanded=False)
            return
        status.update(label="Compiled", state="complete", expanded=False)
    holder.empty()
    ss.bundle = b
    ss.error = None
    ss.sel = {}
    ss.expand = {"scopes": [], "fusions": [], "collapsed": []}


def load_upload(upload) -> None:
    data = upload.getvalue()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        ss.error = f"load error at {upload.name}: not a UTF-8 text file"
        return
    try:
        if text.lstrip().startswith("{"):
            b = Bundle.from_json(text)
        else:
            b = bundle_from_hlo(text, os.path.splitext(upload.name)[0], upload.name)
    except ExplorerError as e:
        if not e.file:
            e.file = upload.name
        ss.error = ExplorerError(e.phase, e.message, upload.name, e.line, e.column).one_line()
        return
    ss.bundle, ss.error, ss.sel = b, None, {}


# ----------------------------------------------------------------------------- sidebar

with st.sidebar:
    st.markdown("## XLA Explorer")
    source_kind = st.radio("Model", ["Gallery", "Paste code", "Upload HLO / bundle"], key="source_kind",
                           horizontal=False)
    job = None
    if source_kind == "Gallery":
        names = list(GALLERY)
        choice = st.selectbox("Gallery model", names, key="gallery_choice",
                              format_func=lambda n: f"{n} — {GALLERY[n].title.split(':')[0]}")
        st.caption(GALLERY[choice].title)
        job = Job(kind="gallery", name=choice, filename=str(GALLERY[choice].path))
    elif source_kind == "Paste code":
        ss.setdefault("code", GALLERY[DEFAULT_MODEL].source)
        st.caption("Define `model(...)` and `example_inputs()` returning its arguments.")
        try:
            from streamlit_ace import st_ace

            typed = st_ace(value=ss.code, language="python", theme="tomorrow", key="ace",
                           height=360, font_size=13, show_gutter=True, auto_update=True, wrap=False)
            if typed is not None:
                ss.code = typed
        except ImportError:  # plain text area if the editor component is missing
            ss.code = st.text_area("Code", ss.code, height=360, key="code_area")
        job = Job(kind="code", source=ss.code, filename="<pasted code>", name="pasted")
    else:
        up = st.file_uploader("HLO text (.hlo/.txt) or a bundle (.json)", type=["hlo", "txt", "json", "mlir"],
                              key="upload")
        if up is not None and st.button("Open", key="open_upload", type="primary", use_container_width=True):
            load_upload(up)

    if job is not None:
        gpu = runner.gpu_present()
        backend = st.radio("Backend", ["auto", "cpu", "gpu"], key="backend", horizontal=True,
                           help="auto = GPU when one is present, else CPU")
        st.caption("Present here: CPU" + (" and GPU" if gpu else " only"))
        platform = "gpu" if backend == "gpu" or (backend == "auto" and gpu) else "cpu"
        pre = presets(platform)
        preset = st.selectbox("Compiler options", list(pre), key="preset")
        free = st.text_area("More options (KEY=VALUE per line)", key="free_options", height=70,
                            placeholder="xla_cpu_enable_fast_math=true")
        if pre[preset]:
            st.caption("Preset sets: `" + format_options(pre[preset]).replace("\n", "`, `") + "`")
        measure = st.checkbox("Measure kernel timings", key="measure", value=False)
        compare = st.checkbox("Compare with fusion disabled", key="compare", value=False)
        if st.button("Compile", type="primary", key="compile", use_container_width=True):
            try:
                opts = dict(pre[preset])
                opts.update(_parse_free_options(free))
            except ExplorerError as e:
                ss.error = e.one_line()
            else:
                job.backend = backend
                job.compiler_options = opts
                job.measure = measure
                job.compare_fusion = compare
                compile_job(job)
    if ss.error:
        st.error(ss.error)
    isolated, why = runner.sandbox_state()
    if not isolated:
        st.warning(f"Pasted code is NOT isolated: {why}")

# ----------------------------------------------------------------------------- first load

if ss.bundle is None and ss.error is None:
    compile_job(Job(kind="gallery", name=DEFAULT_MODEL, filename=str(GALLERY[DEFAULT_MODEL].path), backend="cpu"))

b: Bundle | None = ss.bundle
if b is None:
    st.title("XLA Explorer")
    st.error(ss.error or "Nothing compiled yet.")
    st.stop()

# ----------------------------------------------------------------------------- header

env = b.environment
st.markdown(f"### {b.title} <span style='font-size:0.8rem;color:#666;font-weight:normal'>"
            f"{env.get('device_kind') or env.get('platform', '')} · {env.get('backend', '')}"
            + (f" · jax {env['jax']}" if env.get("jax") else "") + "</span>", unsafe_allow_html=True)
desc = b.source.get("description")
if desc:
    from sample_models.lessons import lesson as gallery_lesson

    title, _, what_to_look_for = desc.partition("\n")
    les = gallery_lesson(b)
    with st.expander(f"Lesson: {title}", expanded=les is not None):
        st.markdown(what_to_look_for.strip())
        if les is not None:
            st.markdown("**On this compile:** " + les.markdown())
views.summary_strip(b)
views.legend()

# ----------------------------------------------------------------------------- search & selection

c1, c2, c3 = st.columns([3, 2, 1])
query = c1.text_input("Find an op", key="find", placeholder="name, op_name (e.g. attention/dot) or source line (e.g. 14)")
hits = views.search(b, query) if query else []
if query:
    if hits:
        labels = [f"{'before' if s == 'pre' else 'after'}: {n} — {d}" for s, n, d in hits]
        pick = c2.selectbox("Matches", range(len(hits)), format_func=lambda i: labels[i], key="find_pick")
        s, n, _ = hits[pick]
        if query.strip().isdigit():
            ss.sel = {"line": int(query.strip())}
        elif ss.sel.get("name") != n:
            ss.sel = {"side": s, "name": n}
    else:
        c2.caption("No op matches.")
focus = c3.toggle("Focus", key="focus", help="Show only the neighbourhood (2 steps) of the selection")
if ss.sel:
    cur = ss.sel.get("name") or f"line {ss.sel.get('line')}"
    cc1, cc2 = st.columns([5, 1])
    cc1.caption(f"Selected: **{cur}** ({'before' if ss.sel.get('side') == 'pre' else 'after' if ss.sel.get('side') else 'source'} optimization)")
    if cc2.button("Clear", key="clear_sel", help="Clear the selection"):
        ss.sel = {}
        st.rerun()

# ----------------------------------------------------------------------------- graphs side by side

pre_spec, post_spec = views.build_graphs(b, ss.sel, ss.expand, 2 if focus else None)


def handle_click(side: str, value) -> None:
    if not value or not isinstance(value, dict):
        return
    key = f"{side}_click"
    if ss.last_click.get(key) == value.get("n"):
        return
    ss.last_click[key] = value.get("n")
    nid = value.get("id", "")
    kind, _, name = nid.partition(":")
    if kind == "s":  # collapsed scope: expand it
        ss.expand["scopes"] = list(set(ss.expand["scopes"]) | {name})
    elif kind == "op":
        ss.sel = {"side": "pre", "name": name}
    elif kind in ("k", "f"):
        ss.sel = {"side": "post", "name": name}
        k = b.kernel(name)
        if kind == "k" and k is not None and k.opcode == "fusion" and name in (post_spec.collapsed if post_spec else []):
            ss.expand["fusions"] = list(set(ss.expand["fusions"]) | {name})
    elif kind == "x":
        owner = views.kernel_containing(b, name)
        if owner:
            ss.sel = {"side": "post", "name": owner}
    elif kind == "p":
        ss.sel = {"side": side, "name": name}
    else:
        return
    st.rerun()


left, right = st.columns(2)
with left:
    if pre_spec is not None:
        v = views.graph_widget(pre_spec, "g_pre", focus=views.focus_id(pre_spec, ss.sel, "pre"))
        handle_click("pre", v)
        if pre_spec.collapsed:
            st.caption(f"{len(pre_spec.collapsed)} name scope(s) collapsed (large graph): click one to open it.")
    else:
        st.info("No pre-optimization HLO in this input.")
with right:
    if post_spec is not None:
        v = views.graph_widget(post_spec, "g_post", focus=views.focus_id(post_spec, ss.sel, "post"))
        handle_click("post", v)
        if post_spec.collapsed:
            st.caption(f"{len(post_spec.collapsed)} fusion(s) drawn collapsed: click one to open it.")
    else:
        st.info("No optimized HLO in this input.")

# ----------------------------------------------------------------------------- below the graphs

st.markdown("#### Details")
views.details_panel(b, ss.sel)

tab_k, tab_t, tab_s = st.tabs(["Kernels & timings", "Text views", "Source"])
with tab_k:
    try:
        from app.kernels_view import render_kernels_view
    except ImportError:
        render_kernels_view = None
    if render_kernels_view is not None:
        picked = render_kernels_view(b, key_prefix="main")
        if picked and picked != ss.sel.get("name"):
            ss.sel = {"side": "post", "name": picked}
            st.rerun()
    else:
        import pandas as pd

        st.dataframe(pd.DataFrame([{"kernel": k.name, "route": k.route, "library": k.library, "bytes": k.bytes,
                                    "flops": k.flops} for k in b.kernels]), use_container_width=True)
with tab_t:
    views.text_views(b, ss.sel)
with tab_s:
    code = b.source.get("code")
    if code:
        from app.views import ops_on_line

        lines_with_ops = {}
        for i in range(1, len(code.splitlines()) + 1):
            ops = ops_on_line(b, i)
            if ops:
                lines_with_ops[i] = ops
        opts = [None] + sorted(lines_with_ops)
        src_lines = code.splitlines()
        cur = ss.sel.get("line")
        pick = st.selectbox("Source line", opts, index=opts.index(cur) if cur in opts else 0, key="src_line",
                            format_func=lambda i: "— pick a line to light up its ops —" if i is None else
                            f"line {i}: {src_lines[i - 1].strip()[:70]}  ({len(lines_with_ops[i])} ops)")
        if pick is not None and pick != cur:
            ss.sel = {"line": pick}
            st.rerun()
        st.markdown(views.code_html(code, {cur} if cur else set(), "s"), unsafe_allow_html=True)
        st.download_button("Download source", code, file_name=f"{b.title}.py", key="dl_src")
    else:
        st.info("This input carries no source code (an imported HLO text or dump).")
    st.download_button("Download bundle (JSON)", b.to_json(), file_name=f"{b.title}.bundle.json", key="dl_bundle")
