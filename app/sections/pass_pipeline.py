"""Pass pipeline: every XLA pass that changed the module, in order, with what it did.

The model is compiled (in the worker) with ``xla_dump_to`` + ``xla_dump_hlo_pass_re=.*``, which
writes a snapshot of the module after every pass that changed it; the bundle's ``pass_log``
holds them. This page plots the instruction and kernel counts across the pipeline, steps
through the passes, and for the selected one shows the text diff against the previous
snapshot and the graph with what the pass added (or fused) highlighted. Snapshots are parsed
lazily: only the selected one and its predecessor.
"""

from __future__ import annotations



import hashlib

import plotly.graph_objects as go
import streamlit as st

from analysis.studies import passes
from analysis.bundle.core import device_label
from analysis.render.module_graphs import post_graph, pre_graph
from analysis.hlo import parse_module
from analysis.program.kernels import kernels as find_kernels
from app.uploads import open_files
from app import lecture_ui, views
from app import runner
from app import safe
from app.explorer_state import explorer_state
from app.page_helpers import (
    backend_choice, code_job, code_source, compile_with_status, default_index, gallery_job, link_to_widgets,
    link_warning, presentation, projector_fonts, show_error,
)
from sample_models import DEFAULT_MODEL, gallery

st.set_page_config(page_title="Pass pipeline · XLA Explorer", layout="wide")
st.markdown(views.CSS, unsafe_allow_html=True)
ss = st.session_state
GALLERY = gallery()
present = presentation("pp")
code_slot = st.container()  # pasted code is edited here, in the page


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@st.cache_resource(show_spinner=False, max_entries=16)
def _module(key: str, _text: str):
    """The parsed snapshot (cached by the text's hash; the text itself is not hashed again)."""
    return parse_module(_text)


@st.cache_data(show_spinner=False, max_entries=256)
def _counts(key: str, _text: str) -> dict:
    try:
        return passes.counts(_module(key, _text))
    except Exception:  # noqa: BLE001
        return {"instructions": None, "entry_instructions": None, "fusions": None, "kernels": None}


@st.cache_data(show_spinner=False, max_entries=32)
def _diff(key_prev: str, key: str, _prev: str, _text: str) -> str:
    return passes.snapshot_diff(_prev, _text)


@st.cache_data(show_spinner=False, max_entries=32)
def _change(key_prev: str, key: str, _prev: str, _text: str) -> dict:
    ch = passes.pass_change(_module(key_prev, _prev), _module(key, _text))
    return {"added": ch.added, "removed": ch.removed, "fused": ch.fused,
            "added_anywhere": ch.added_anywhere, "removed_anywhere": ch.removed_anywhere}


def _log_rows(log: list[dict]) -> list[dict]:
    """The log with counts (computed here for imported dumps, whose entries have none)."""
    rows = []
    for e in log:
        if not isinstance(e, dict):
            continue
        r = dict(e)
        if r.get("kernels") is None and r.get("text"):
            r.update(_counts(_h(r["text"]), r["text"]))
        rows.append(r)
    return rows


def _first_fusion(log: list) -> int:
    """Open on the first fusion pass that changed the kernel count (the interesting step)."""
    prev = None
    for j, r in enumerate(log):
        k = r.get("kernels") if isinstance(r, dict) else None
        if prev is not None and k is not None and k != prev and passes.is_fusion_pass(r.get("pass", "")):
            return j
        prev = k if k is not None else prev
    return 0


def _open_upload(up):
    """A bundle with a pass log from an upload (the first module of a dump with per-pass
    snapshots, or a bundle's JSON), opened in the sandbox; None after a one-line error naming the
    file."""
    b, _job, error = open_files(up, prefer="passes")
    if error:
        show_error(error)
        return None
    if not b.pass_log:
        show_error(f"load error at {up.name}: this bundle has no pass log (compile it here, or upload a dump "
                   "made with xla_dump_hlo_pass_re=.*)")
        return None
    return b


# ----------------------------------------------------------------------------- sidebar

# A link names the gallery model, the backend and the pass shown: ?model=softmax&backend=h200&step=3
link_to_widgets("passes", {"model": ("pp_model", list(GALLERY), None),
                           "backend": ("pp_backend", ["auto", "cpu", "gpu", runner.APP_GPU_TARGET], None),
                           "step": ("pp_link_step", None, lambda v: int(v) if v.isdigit() else None)})

with st.sidebar:
    st.markdown("## Pass pipeline")
    link_warning("passes")
    cur = explorer_state().bundle
    have_current = cur is not None and bool(getattr(cur, "pass_log", None))
    sources = ["Gallery model", "Paste code", "Upload a dump (.zip) or bundle"] + (["Current bundle"] if have_current else [])
    src = st.radio("Model", sources, key="pp_source")
    if src == "Gallery model":
        names = list(GALLERY)
        model = st.selectbox("Gallery model", names, key="pp_model", index=default_index("pp_model", names, DEFAULT_MODEL),
                             format_func=lambda n: f"{n} — {GALLERY[n].title.split(':')[0]}")
        backend = backend_choice("pp_backend", with_target=True)
        go_btn = st.button("Compile and record passes", type="primary", key="pp_compile", width="stretch")
        want = (model, backend)
        if go_btn or (ss.get("pp_for") is None):
            b = compile_with_status(gallery_job(model, backend=backend, dump_passes=True),
                                    "Compiling with a snapshot after every pass…")
            if b is not None:
                ss.pp_bundle, ss.pp_for = b, want
                ss.pp_step = _first_fusion(b.pass_log or [])
                linked = ss.pop("pp_link_step", None)  # a link's pass, once
                if linked is not None and b.pass_log:
                    ss.pp_step = min(linked, len(b.pass_log) - 1)
        elif ss.get("pp_for") != want:
            st.caption("Press the button to compile this choice.")
    elif src == "Paste code":  # as the Explorer takes it; compiled with a snapshot after every pass
        with code_slot:
            with st.expander("Your code", expanded=not present):
                source = code_source("pp_code")
        backend = backend_choice("pp_backend_code", with_target=True)
        if st.button("Compile and record passes", type="primary", key="pp_compile_code", width="stretch"):
            b = compile_with_status(code_job(source, backend=backend, dump_passes=True),
                                    "Compiling with a snapshot after every pass…")
            if b is not None:
                ss.pp_bundle, ss.pp_for, ss.pp_step = b, ("code", _h(source), backend), _first_fusion(b.pass_log or [])
    elif src == "Upload a dump (.zip) or bundle":
        up = st.file_uploader("A zipped --xla_dump_to folder (with xla_dump_hlo_pass_re=.*) or a bundle (.json) with "
                              "a pass log", type=["zip", "json"], key="pp_upload")
        if up is not None and st.button("Open", type="primary", key="pp_open", width="stretch"):
            got = _open_upload(up)
            if got is not None:
                ss.pp_bundle, ss.pp_for, ss.pp_step = got, ("upload", up.name), _first_fusion(got.pass_log or [])
    else:
        st.caption(f"The bundle open on the main page: **{cur.title}** ({len(cur.pass_log)} snapshots).")
        if ss.get("pp_bundle") is not cur:
            ss.pp_bundle, ss.pp_for, ss.pp_step = cur, ("current", id(cur)), _first_fusion(cur.pass_log)
    st.caption("XLA writes a snapshot after every pass that changed the module "
               "(`xla_dump_hlo_pass_re=.*`); identical snapshots are left out.")

b = ss.get("pp_bundle")
if b is None:
    st.title("Pass pipeline")
    st.info("Compile a model to see its pass pipeline.")
    st.stop()
log = _log_rows(b.pass_log or [])
if not log:
    st.title(f"Pass pipeline: {b.title}")
    st.warning("This bundle has no pass log. Compile it here (the main page does not record passes).")
    st.stop()

# ----------------------------------------------------------------------------- header and chart

env = b.environment
st.markdown(f"### Pass pipeline: {safe.text(b.title)} <span style='font-size:{0.95 if present else 0.8}rem;color:#666;font-weight:normal'>"
            f"{safe.text(device_label(env))} · {len(log)} snapshots</span>",
            unsafe_allow_html=True)

# one count of instructions for the header and the chart: the entry computation's (every
# computation's grows as fusion moves ops into fused computations, beside kernels that fall)
ks = [r.get("kernels") for r in log]
ent = [r.get("entry_instructions") for r in log]
drops = [(i, (ks[i - 1] or 0) - (ks[i] or 0)) for i in range(1, len(log)) if ks[i] is not None and ks[i - 1] is not None]
big = max(drops, key=lambda t: t[1]) if drops else None
c = st.columns(4)
c[0].metric("Passes that changed the module", len(log) - 1)
c[1].metric("Kernels: first → last", f"{ks[0] if ks[0] is not None else '–'} → {ks[-1] if ks[-1] is not None else '–'}",
            help="Kernel-launching instructions as analysis.program.kernels counts them: before fusion every compute op "
                 "is one; after, every fusion, library call and unfused op.")
c[2].metric("Instructions in the entry: first → last", f"{ent[0] or '–'} → {ent[-1] or '–'}",
            help="Instructions of the entry computation (fused computations' own instructions left out), "
                 "as the chart draws them.")
if big and big[1] > 0:  # the pass name goes under the number: long names do not fit the big value font
    c[3].metric("Biggest kernel drop", f"−{big[1]} kernels", delta=passes.label(log[big[0]]).split(" / ")[-1],
                delta_color="off", delta_arrow="off")
else:
    c[3].metric("Biggest kernel drop", "–")

n = len(log)
ss.setdefault("pp_step", 0)
if ss.pp_step >= n:
    ss.pp_step = n - 1

fig = go.Figure()
hover = [f"#{i} {passes.label(r)}" for i, r in enumerate(log)]
fig.add_trace(go.Scatter(x=list(range(n)), y=ks, name="kernels", mode="lines+markers", line=dict(color="#1f77b4", width=3),
                         hovertext=hover, hovertemplate="%{hovertext}<br>%{y} kernels<extra></extra>"))
fig.add_trace(go.Scatter(x=list(range(n)), y=ent, name="instructions (entry)", mode="lines+markers",
                         line=dict(color="#7f7f7f", dash="dot"), hovertext=hover,
                         hovertemplate="%{hovertext}<br>%{y} entry instructions<extra></extra>"))
for i in range(1, n):
    r = log[i]
    if passes.is_fusion_pass(r.get("pass", "")) and ks[i] is not None and ks[i - 1] is not None and ks[i] != ks[i - 1]:
        fig.add_vrect(x0=i - 0.5, x1=i + 0.5, fillcolor="#FF7F0E", opacity=0.15, line_width=0)
        fig.add_annotation(x=i, y=ks[i], text=f"{r['pass']}<br>{ks[i - 1]}→{ks[i]} kernels", showarrow=True,
                           arrowhead=2, ax=40, ay=-45, font=dict(size=12, color="#B35806"), bgcolor="white")
fig.add_vline(x=ss.pp_step, line=dict(color="#D62728", width=2))
if present:  # readable from the back row: the chart's text 16 px, its ticks 14
    projector_fonts(fig)
fig.update_layout(height=320, margin=dict(l=10, r=10, t=10, b=10), hovermode="x unified",
                  legend=dict(orientation="h", y=1.12, x=0), yaxis_title="count")
if n <= 40:  # name the passes on the axis while they fit
    fig.update_xaxes(tickvals=list(range(n)), ticktext=[f"{j} {r.get('pass', '')[:22]}" for j, r in enumerate(log)],
                     tickangle=-35, tickfont=dict(size=14 if present else 11))
else:
    fig.update_xaxes(title_text="pass (in the order XLA ran them)")
st.plotly_chart(fig, width="stretch", key="pp_chart")

# ----------------------------------------------------------------------------- scrubber

s1, s2, s3 = st.columns([1, 8, 1])
if s1.button("◀ prev", key="pp_prev", width="stretch", disabled=ss.pp_step <= 0):
    ss.pp_step -= 1
    st.rerun()
if s3.button("next ▶", key="pp_next", width="stretch", disabled=ss.pp_step >= n - 1):
    ss.pp_step += 1
    st.rerun()
s2.slider("Pass", 0, max(n - 1, 1), key="pp_step", label_visibility="collapsed",
          help="Step through the passes", disabled=n < 2)
i = min(ss.pp_step, n - 1)
# the address bar names what is shown: a gallery compile's model, backend and pass (the bundle of
# the main page has no link of its own here)
pp_for = ss.get("pp_for")
if isinstance(pp_for, tuple) and pp_for and pp_for[0] != "current":
    st.query_params.from_dict(lecture_ui.address({"model": pp_for[0], "backend": pp_for[1], "step": str(i)}))
else:
    st.query_params.from_dict(lecture_ui.address(None))
e = log[i]
prev = log[i - 1] if i > 0 else None

with st.expander(f"All {n} snapshots", expanded=False):
    import pandas as pd

    df = pd.DataFrame([{"#": j, "index": r.get("index"), "pipeline": r.get("pipeline"), "pass": r.get("pass"),
                        "instructions": r.get("instructions"), "kernels": r.get("kernels"),
                        "Δ kernels": (ks[j] - ks[j - 1]) if j and ks[j] is not None and ks[j - 1] is not None else None,
                        "fusion pass": "yes" if passes.is_fusion_pass(r.get("pass", "")) else ""}
                       for j, r in enumerate(log)])
    st.dataframe(df, width="stretch", hide_index=True, height=min(420, 38 + 35 * n))

# ----------------------------------------------------------------------------- the selected pass

dk = (ks[i] - ks[i - 1]) if prev is not None and ks[i] is not None and ks[i - 1] is not None else None
title = f"#### #{i} · <code>{safe.text(e.get('pass'))}</code> <span style='color:#666;font-size:{1 if present else 0.85}rem'>pipeline " \
        f"{safe.text(e.get('pipeline'))} · snapshot {safe.text(e.get('index'))}</span>"
st.markdown(title, unsafe_allow_html=True)
facts = [f"{e.get('instructions') or '–'} instructions", f"{e.get('kernels') if e.get('kernels') is not None else '–'} kernels"
         + (f" ({dk:+d})" if dk else "")]
if i + 1 < n:  # the next point of the chart; XLA's own "next pass" names only its sub-pipeline's next
    facts.append(f"next pass that changed the module: #{i + 1} `{str(log[i + 1].get('pass') or '?').replace('`', '')[:80]}`")
else:
    facts.append("no pass changed the module after this one")
if i == 0:
    facts.append("the module as the pipeline received it")
st.markdown(" · ".join(facts))

text = e.get("text")
if not text:
    st.info("The snapshot texts were not kept (they total more than 20 MB): only the counts are available.")
    st.stop()
key = _h(text)
mod = _module(key, text)
change = None
if prev is not None and prev.get("text"):
    pkey = _h(prev["text"])
    change = _change(pkey, key, prev["text"], text)
    parts = []
    if change["fused"]:
        parts.append(f"fused {sum(len(v) for v in change['fused'].values())} instruction(s) into "
                     f"{len(change['fused'])} fusion(s): " + ", ".join(f"`{k}`" for k in change["fused"]))
    if change["added"]:
        parts.append(f"added {len(change['added'])} entry instruction(s)")
    if change["removed"]:
        parts.append(f"removed {len(change['removed'])}")
    if not (change["added"] or change["removed"]):
        parts.append(f"changed instructions in place ({change['added_anywhere']} new names in sub-computations)"
                     if change["added_anywhere"] else "changed attributes, layouts or order only (see the diff)")
    st.markdown("**What it did:** " + "; ".join(parts))

tab_g, tab_d, tab_t = st.tabs(["Graph", "Diff against the previous snapshot", "Snapshot text"])
with tab_g:
    highlight = set(change["added"]) if change else set()
    has_fusion = any(inst.opcode == "fusion" for inst in mod.entry.instructions)
    try:
        if has_fusion:
            spec = post_graph(mod, find_kernels(mod), highlight=highlight)
        else:
            spec = pre_graph(mod, highlight=highlight)
    except Exception as ex:  # noqa: BLE001 - an odd intermediate module: say so, keep the page
        st.warning(f"This snapshot cannot be drawn: {type(ex).__name__}: {ex}")
        spec = None
    if spec is not None:
        spec.title = f"after {e.get('pass')} ({'kernels and fusions' if has_fusion else 'ops'})"
        gl, gr = st.columns([3, 1])
        with gl:
            clicked = views.graph_widget(spec, f"pp_graph_{i}", height=560, focus=views.focus_id(spec, {}, ""),
                                         present=present)
        with gr:
            st.markdown("<span style='background:#FFF1D6;border:2px solid #FF7F0E;padding:0 6px'>highlighted</span>"
                        " = new after this pass", unsafe_allow_html=True)
            if change and change["fused"]:
                st.markdown("**Fused**")
                for fname, got in list(change["fused"].items())[:20]:
                    st.markdown(f"- `{fname}` ← " + ", ".join(f"`{g}`" for g in got[:8]) + (" …" if len(got) > 8 else ""))
            if change and change["removed"]:
                st.markdown(f"**Removed** ({len(change['removed'])})")
                st.markdown(", ".join(f"`{r}`" for r in change["removed"][:60]) + (" …" if len(change["removed"]) > 60 else ""))
            if isinstance(clicked, dict) and clicked.get("id"):
                name = clicked["id"].split(":", 1)[-1]
                for comp in mod.computations:
                    inst = comp.by_name.get(name)
                    if inst is not None:
                        st.markdown("**Clicked**")
                        st.code(inst.text, language=None, wrap_lines=True)
                        break
        if spec.collapsed:
            st.caption(f"{len(spec.collapsed)} part(s) drawn collapsed (large graph).")
with tab_d:
    if prev is None or not prev.get("text"):
        st.info("The first snapshot: nothing to compare with.")
    else:
        d = _diff(_h(prev["text"]), key, prev["text"], text)
        added = sum(1 for ln in d.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
        removed = sum(1 for ln in d.splitlines() if ln.startswith("-") and not ln.startswith("---"))
        st.caption(f"{added} line(s) added, {removed} removed, against #{i - 1} ({passes.label(prev)})")
        st.code(d or "(no textual difference)", language="diff")
with tab_t:
    st.download_button("Download this snapshot", text, file_name=e.get("file") or f"{b.title}.{i}.txt", key="pp_dl")
    st.code(text, language=None, line_numbers=True)
