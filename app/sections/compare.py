"""Compare: two compiles side by side.

The same model with two sets of compiler options (default vs fusion disabled, or any
KEY=VALUE), two gallery models, or two saved bundles (e.g. one made on a CPU and one on a GPU).
Summary deltas, the kernel table matched across the two (``analysis.studies.compare``: by name, then
by the source ops they hold), and the two optimized graphs with matching kernels linked:
click a kernel on one side and the kernels doing its ops light up on the other.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from analysis.studies import compare
from analysis.bundle.core import Bundle, device_label
from analysis.errors import ExplorerError
from analysis.render.module_graphs import post_graph
from analysis.options import format_options
from analysis.render.format import human_bytes, human_seconds
from analysis.service import runtimes
from app.safe import plain
from app import inductor_view, lecture_ui, runner, views
from app.kernels_view import numbers_shown
from app import permalink
from app.uploads import open_files
from app.page_helpers import (
    backend_choice, code_job, code_source, compile_with_status, default_index, gallery_job, link_to_widgets,
    link_warning, presentation, presets_for, show_error, table as show_table,
)
from sample_models import DEFAULT_MODEL, gallery
from sample_models.lessons_versions import SHOWN_BY, versions_lesson

st.set_page_config(page_title="Compare · XLA Explorer", layout="wide")
st.markdown(views.CSS, unsafe_allow_html=True)
ss = st.session_state
GALLERY = gallery()
NAMES = list(GALLERY)
ss.setdefault("cmp_sel", {})
ss.setdefault("cmp_clicks", {})
present = presentation("cmp")
code_slot = st.container()  # pasted code is edited here, in the page (the sidebar is too narrow for code)


def _options(preset_key: str, free_key: str, pre: dict, default: str) -> dict:
    from analysis.options import parse_options  # pure helper; does not import jax

    names = list(pre)
    p = st.selectbox("Options", names, index=default_index(preset_key, names, default), key=preset_key)
    free = st.text_area("More (KEY=VALUE per line)", key=free_key, height=68, placeholder="xla_cpu_enable_fast_math=true")
    opts = dict(pre[p])
    opts.update(parse_options([ln.strip() for ln in free.splitlines() if ln.strip() and not ln.strip().startswith("#")]))
    return opts


def _two_option_sets(backend_key: str, prefix: str) -> tuple[str, dict, dict]:
    """The backend and the two option sets A and B (Default against the fusion passes off, to
    start with); ``prefix`` keeps each mode's widgets apart (``cmp_preset_<prefix>a``, ...)."""
    backend = backend_choice(backend_key, with_target=True)
    pre = presets_for(backend)
    st.markdown("**A**")
    oa = _options(f"cmp_preset_{prefix}a", f"cmp_free_{prefix}a", pre, "Default")
    st.markdown("**B**")
    ob = _options(f"cmp_preset_{prefix}b", f"cmp_free_{prefix}b", pre, "Fusion passes off")
    return backend, oa, ob


def _describe(b: Bundle) -> str:
    env = b.environment
    opts = (b.options or {}).get("compiler_options") or {}
    o = format_options(opts).replace("\n", ", ") if opts else "default options"
    jax = f" · jax {plain(str(env['jax'])[:40])}" if env.get("jax") else ""
    return f"**{b.title}** · {device_label(env)}{jax} · {o}"


def _num_rounds(b: Bundle) -> int:
    """How many alternated runs a measured side's times are taken over (1: one run's own)."""
    r = (b.timings or {}).get("rounds")
    return r if isinstance(r, int) and not isinstance(r, bool) and r > 0 else 1


def _load_upload(up) -> Bundle | None:
    b, _job, error = open_files(up)  # in the sandbox, as the Explorer's uploads
    if error:
        show_error(error)
    return b


# ----------------------------------------------------------------------------- links

# A link names the mode and that mode's choices: ?mode=backends&model=mlp&a=cpu&b=h200
MODES = {"options": "One model, two option sets", "backends": "One model, two backends",
         "devices": "One model, two device counts", "versions": "One model, two XLA (jax) versions",
         "models": "Two models", "inductor": "A PyTorch model: XLA beside Inductor"}
# the gallery's PyTorch models (their source imports torch): the ones Inductor can compile too
TORCH_NAMES = [n for n in NAMES if "import torch" in GALLERY[n].source]
VERSIONS = runtimes.offered()  # the jax releases a job may name here (analysis.service.runtimes)
BACKEND_CHOICES = ["auto", "cpu", "gpu", runner.APP_GPU_TARGET]


def _link_spec() -> dict:
    q = st.query_params.to_dict()
    mode = q.get("mode")
    spec = {"mode": ("cmp_mode", MODES, None), "measure": ("cmp_measure", {"1": True, "0": False}, None)}
    if mode == "options":
        pre = list(presets_for(q.get("backend", "auto")))
        lines = lambda v: "\n".join(permalink.decode_options(v))  # noqa: E731
        spec.update(model=("cmp_model", NAMES, None), backend=("cmp_backend", BACKEND_CHOICES, None),
                    a=("cmp_preset_a", pre, None), b=("cmp_preset_b", pre, None),
                    a_opt=("cmp_free_a", None, lines), b_opt=("cmp_free_b", None, lines))
    elif mode == "backends":
        spec.update(model=("cmp_model_be", NAMES, None), a=("cmp_backend_a", BACKEND_CHOICES, None),
                    b=("cmp_backend_b", BACKEND_CHOICES, None))
    elif mode == "devices":
        counts = {str(n): n for n in range(1, 9)}
        spec.update(model=("cmp_model_dv", NAMES, None), a=("cmp_devices_a", counts, None),
                    b=("cmp_devices_b", counts, None))
    elif mode == "versions":
        spec.update(model=("cmp_model_jx", NAMES, None), a=("cmp_jax_a", VERSIONS, None),
                    b=("cmp_jax_b", VERSIONS, None))
    elif mode == "models":
        spec.update(a=("cmp_model_a", NAMES, None), b=("cmp_model_b", NAMES, None),
                    backend=("cmp_backend2", BACKEND_CHOICES, None))
    elif mode == "inductor":
        spec.update(model=("cmp_model_ind", TORCH_NAMES, None))
    return spec


link_to_widgets("compare", _link_spec())


def _last_model() -> str:
    """The model the previous mode showed: switching what to compare keeps the model (each mode's
    selectbox is its own widget, and Streamlit forgets a widget's value once it is not drawn)."""
    m = ss.get("cmp_last_model")
    return m if m in NAMES else DEFAULT_MODEL


# ----------------------------------------------------------------------------- sidebar

with st.sidebar:
    st.markdown("## Compare")
    link_warning("compare")
    mode = st.radio("What to compare", ["One model, two option sets", "One model, two backends",
                                        "One model, two device counts", "One model, two XLA (jax) versions",
                                        "Two models", "A PyTorch model: XLA beside Inductor",
                                        "Your code, two option sets", "Two bundles (upload)"], key="cmp_mode",
                    help="Two backends: e.g. the CPU next to an H200 — which kernels each compiler makes of the "
                         "same ops")
    jobs = link = None
    try:
        if mode == "One model, two option sets":
            model = st.selectbox("Gallery model", NAMES, index=default_index("cmp_model", NAMES, _last_model()),
                                 key="cmp_model")
            ss.cmp_last_model = model
            backend, oa, ob = _two_option_sets("cmp_backend", "")
            jobs = (gallery_job(model, backend=backend, compiler_options=oa),
                    gallery_job(model, backend=backend, compiler_options=ob))
            link = {"mode": "options", "model": model, "backend": backend, "a": ss.cmp_preset_a,
                    "b": ss.cmp_preset_b}
            for side, key in (("a_opt", "cmp_free_a"), ("b_opt", "cmp_free_b")):
                from analysis.options import parse_options  # pure helper; does not import jax

                extra = [ln.strip() for ln in (ss.get(key) or "").splitlines()
                         if ln.strip() and not ln.strip().startswith("#")]
                if extra:  # parsed already (by _options) without error
                    link[side] = permalink.encode_options(parse_options(extra))
        elif mode == "Your code, two option sets":  # pasted code, as the Explorer takes it (no link: the code is not stored)
            with code_slot:
                with st.expander("Your code", expanded=not present):
                    source = code_source("cmp_code")
            backend, oa, ob = _two_option_sets("cmp_backend_code", "c")
            jobs = (code_job(source, backend=backend, compiler_options=oa),
                    code_job(source, backend=backend, compiler_options=ob))
            link = {}
        elif mode == "One model, two backends":
            model = st.selectbox("Gallery model", NAMES, index=default_index("cmp_model_be", NAMES, _last_model()),
                                 key="cmp_model_be")
            ss.cmp_last_model = model
            ba = backend_choice("cmp_backend_a", "Backend A", with_target=True, default="cpu")
            bb = backend_choice("cmp_backend_b", "Backend B", with_target=True, default=runner.APP_GPU_TARGET)
            jobs = (gallery_job(model, backend=ba), gallery_job(model, backend=bb))
            link = {"mode": "backends", "model": model, "a": ba, "b": bb}
        elif mode == "One model, two device counts":
            from analysis.devices.catalog import MAX_DEVICES, devices_in_source

            model = st.selectbox("Gallery model", NAMES, index=default_index("cmp_model_dv", NAMES, _last_model()),
                                 key="cmp_model_dv")
            ss.cmp_last_model = model
            counts = list(range(1, MAX_DEVICES + 1))
            own = devices_in_source(GALLERY[model].source) or 1
            da = st.selectbox("Devices A", counts, index=default_index("cmp_devices_a", counts, 1), key="cmp_devices_a")
            db = st.selectbox("Devices B", counts, index=default_index("cmp_devices_b", counts, own if own > 1 else 8),
                              key="cmp_devices_b", help="A model's mesh spans the devices it is given when it is "
                                                        "built from jax.device_count(), as dp_train_step's is")
            jobs = (gallery_job(model, backend="cpu", devices=da), gallery_job(model, backend="cpu", devices=db))
            link = {"mode": "devices", "model": model, "a": str(da), "b": str(db)}
        elif mode == "One model, two XLA (jax) versions":
            model = st.selectbox("Gallery model", NAMES, index=default_index("cmp_model_jx", NAMES, _last_model()),
                                 key="cmp_model_jx")
            ss.cmp_last_model = model
            help_jax = ("A release not on this machine yet is installed on first use (pip, minutes); "
                        "docs/runtimes.md")
            ja = st.selectbox("XLA (jax) version A", VERSIONS, key="cmp_jax_a", help=help_jax,
                              index=default_index("cmp_jax_a", VERSIONS, VERSIONS[-1]))
            jb = st.selectbox("XLA (jax) version B", VERSIONS, key="cmp_jax_b", help=help_jax,
                              index=default_index("cmp_jax_b", VERSIONS, VERSIONS[0]))
            jobs = (gallery_job(model, backend="cpu", jax=ja), gallery_job(model, backend="cpu", jax=jb))
            link = {"mode": "versions", "model": model, "a": ja, "b": jb}
            st.caption("Lessons on what changed between two releases: " + ", ".join(
                f"[{m}, jax {x} against {y}](?{urlencode({'mode': 'versions', 'model': m, 'a': x, 'b': y})})"
                for m, (x, y) in SHOWN_BY.items()) + " (the lesson is shown below the comparison)")
        elif mode == "Two models":
            ma = st.selectbox("Model A", NAMES, index=default_index("cmp_model_a", NAMES, _last_model()),
                              key="cmp_model_a")
            ss.cmp_last_model = ma
            mb = st.selectbox("Model B", NAMES, index=default_index("cmp_model_b", NAMES, "softmax_layernorm"),
                              key="cmp_model_b")
            backend = backend_choice("cmp_backend2", with_target=True)
            jobs = (gallery_job(ma, backend=backend), gallery_job(mb, backend=backend))
            link = {"mode": "models", "a": ma, "b": mb, "backend": backend}
        elif mode == "A PyTorch model: XLA beside Inductor":
            last = _last_model()
            model = st.selectbox("PyTorch model", TORCH_NAMES, key="cmp_model_ind",
                                 index=default_index("cmp_model_ind", TORCH_NAMES,
                                                     last if last in TORCH_NAMES else TORCH_NAMES[0]))
            st.caption("One job compiles the module with XLA (through torchax) and with PyTorch Inductor, on the CPU "
                       "(docs/pytorch.md).")
            jobs = (gallery_job(model, backend="cpu", inductor=True),)
            link = {"mode": "inductor", "model": model}
        else:
            ua = st.file_uploader("Bundle A (.json) or HLO text", type=["json", "txt", "hlo"], key="cmp_up_a")
            ub = st.file_uploader("Bundle B (.json) or HLO text", type=["json", "txt", "hlo"], key="cmp_up_b")
            if st.button("Open both", type="primary", key="cmp_open", width="stretch", disabled=not (ua and ub)):
                a, b = _load_upload(ua), _load_upload(ub)
                if a is not None and b is not None:
                    ss.cmp_pair, ss.cmp_sel, ss.cmp_link = (a, b), {}, None  # uploads have no link
    except ExplorerError as e:
        show_error(e)
        jobs = None
    if jobs is not None:
        can_measure = not any(j.gpu_target for j in jobs)
        measure_both = st.toggle("Measure both", key="cmp_measure", disabled=not can_measure,
                                 help=f"Run both compiles and time every kernel, the same way on each side: "
                                      f"{compare.ROUNDS} runs each, alternated (A B, B A, …), so both see the same "
                                      "machine; the steps and calls side by side, with a verdict only where their "
                                      "spreads part"
                                 if can_measure else "A compile for the GPU target without its GPU cannot run")
        measured = measure_both and can_measure
        if measured:
            jobs = tuple(replace(j, measure=True) for j in jobs)
            if link:  # pasted code has no link (the code is not stored)
                link["measure"] = "1"
        run_it = st.button("Compare", type="primary", key="cmp_go", width="stretch")
        if len(jobs) == 1:  # XLA beside Inductor: one job compiles (and with Measure both, times) both
            if run_it or ss.get("cmp_inductor") is None or (ss.get("cmp_link") or {}) != link:
                got = compile_with_status(jobs[0], "Compiling with XLA and Inductor…", use_cache=not measured)
                if got is not None:
                    ss.cmp_inductor, ss.cmp_link = got, link
        elif run_it or ss.get("cmp_pair") is None:
            if measured:  # the CLI's compare --measure: alternated runs, each run anew (never the cache's)
                got = compare.measured_alternately(
                    lambda s_, run: compile_with_status(
                        jobs[s_], f"Measuring {'AB'[s_]}, run {run} of {compare.ROUNDS}…", use_cache=False))
            else:
                a = compile_with_status(jobs[0], "Compiling A…")
                b = compile_with_status(jobs[1], "Compiling B…") if a is not None else None
                got = (a, b) if a is not None and b is not None else None
            if got is not None:
                ss.cmp_pair, ss.cmp_sel, ss.cmp_link = got, {}, link

# the address bar names what is shown (a link to it reopens the same comparison)
st.query_params.from_dict(lecture_ui.address(ss.get("cmp_link")))
if mode == "A PyTorch model: XLA beside Inductor":
    if ss.get("cmp_inductor") is not None and (ss.get("cmp_link") or {}).get("mode") == "inductor":
        inductor_view.show(ss.cmp_inductor, present)
    else:
        st.title("Compare")
        st.info("Choose a PyTorch model in the sidebar and press Compare.")
    st.stop()
pair = ss.get("cmp_pair")
if not pair:
    st.title("Compare")
    st.info("Choose two compiles in the sidebar.")
    st.stop()
A, B = pair

# ----------------------------------------------------------------------------- summary

st.markdown("### Compare")
h1, h2 = st.columns(2)
h1.markdown("A: " + _describe(A))
h2.markdown("B: " + _describe(B))
# the linked graphs come first, as tall as the window (graph_view.js): drawn here once the
# kernel table below has said what is selected
graphs_box = st.container()

rows = compare.summary_deltas(A, B)


def _fmt(v, kind):
    if v is None:
        return "–"
    return {"bytes": human_bytes, "seconds": human_seconds, "fraction": lambda x: f"{x:.0%}",
            "count": lambda x: f"{x:,}"}[kind](v)


shown = [r for r in rows if r["a"] is not None or r["b"] is not None]


def _change(r) -> str:
    if r["delta"] is None:
        return ""
    if r["delta"] == 0:
        return "same"
    if r["kind"] == "fraction":
        return f"{r['delta'] * 100:+.0f} points"
    if r["kind"] == "count":
        return f"{r['delta']:+,}" + (f"  ({r['ratio']:.2f}×)" if r["ratio"] else "")
    return f"{r['ratio']:.2f}×" if r["ratio"] else ""


sl, sr = st.columns([3, 2])
with sl:
    show_table(pd.DataFrame([{"": r["metric"], "A": _fmt(r["a"], r["kind"]), "B": _fmt(r["b"], r["kind"]),
                              "B vs A": _change(r)} for r in shown]), present,
               hide_index=True, width="stretch", key="cmp_summary")
with sr:
    kk = next(r for r in rows if r["metric"] == "kernels")
    by = next(r for r in rows if r["metric"] == "bytes moved by kernels (per device)")
    if kk["a"] is not None and kk["b"] is not None:
        same = kk["delta"] == 0  # no arrow for "same": Streamlit draws any text delta as a rise
        st.metric("Kernels A → B", f"{kk['a']} → {kk['b']}", delta=None if same else (_change(kk) or None),
                  delta_color="inverse")
    if by["ratio"]:
        # the sizes as a caption, not a delta: Streamlit draws any text delta with a rising arrow
        st.metric("Bytes moved A → B", f"{by['ratio']:.2f}×")
        st.caption(f"{human_bytes(by['a'])} → {human_bytes(by['b'])}")
if A.timings is None or B.timings is None:
    st.caption("Step times appear when both sides are measured (*Measure both* in the sidebar, or two measured "
               "bundles uploaded).")
else:
    from analysis import measures
    rounds = min(_num_rounds(A), _num_rounds(B))
    over = f" of {rounds} alternated runs' medians" if rounds > 1 else ""
    for what, get in (("Call, no profiler", measures.call), ("Step, traced", measures.step)):
        sa, sb = get(A.timings), get(B.timings)
        if sa is None or sb is None:
            continue
        v = measures.verdict(sa, sb)
        said = {"faster": "B is faster", "slower": "B is slower"}.get(v, "no verdict: the spreads overlap")
        st.markdown(f"**{what}** (median, interquartile range{over}): A {measures.spread_text(sa, human_seconds)} · "
                    f"B {measures.spread_text(sb, human_seconds)} · "
                    f"{measures.change_text(sa.median, sb.median, human_seconds)} · **{said}**")

# ----------------------------------------------------------------------------- two releases

if (A.environment or {}).get("jax") != (B.environment or {}).get("jax"):
    diff = compare.versions_diff(A, B)
    ja, jb = ((x.environment or {}).get("jax", "?") for x in (A, B))
    st.markdown(f"#### What changed from jax {plain(str(ja)[:40])} to jax {plain(str(jb)[:40])}")
    st.caption(f"A: {plain(diff['a'])} · B: {plain(diff['b'])}")
    c = diff["counts"]
    st.markdown("Kernels matched by provenance: " + ", ".join(
        f"**{c.get(k, 0)}** {k}" for k in ("same", "changed", "only in A", "only in B")))
    changed = [r for r in diff["kernels"] if r["status"] != "same"]
    if changed:
        show_table(pd.DataFrame([{"": r["status"], "A kernel": r["a"] or "–",
                                  "A route": (r["a_library"] or r["a_route"] or "–"), "A result": r["a_shape"] or "–",
                                  "B kernel": r["b"] or "–", "B route": (r["b_library"] or r["b_route"] or "–"),
                                  "B result": r["b_shape"] or "–"}
                                 for r in changed]), present, hide_index=True, width="stretch", key="cmp_versions")
    for key, title, one, many in (("formed", "Fusion formed in B", "b", "a"), ("broken", "Fusion broken in B", "a", "b")):
        for f in diff[key]:
            st.markdown(f"**{title}:** {one.upper()} {plain(f[one])} does the ops of {many.upper()} "
                        + ", ".join(plain(x) for x in f[many]))
            for s_ in (one, many):
                for line in f[f"reasons_{s_}"]:
                    st.text(f"{s_.upper()}: {line}")
    p_ = diff["passes"]
    if p_["recorded"] and (p_["only_a"] or p_["only_b"]):
        st.markdown("Passes in one release only — A: " + plain(", ".join(p_["only_a"]) or "none") + " · B: "
                    + plain(", ".join(p_["only_b"]) or "none"))
    # the gallery's lesson on what changed between the releases for this model (its text quotes
    # names from the two compiles: shown for the page's own compiles, never for uploads)
    les = versions_lesson(A, B) if (ss.get("cmp_link") or {}).get("mode") == "versions" else None
    if les is not None:
        with st.expander(f"Lesson: {les.title}", expanded=True):
            st.markdown(les.text)
            st.markdown("**Checked on these two compiles:**\n\n" + "\n".join(
                f"- {'✔' if c.holds else '✘ not on these compiles:'} {c.claim}" for c in les.checks))

# ----------------------------------------------------------------------------- kernels matched

matches = compare.pair_kernels(A.kernels, B.kernels)
rel_ab = compare.related(A, B)  # by instruction, through provenance (analysis.program.links)
rel_ba = compare.related(B, A)
n_name = sum(1 for m in matches if m.how == "name")
n_ops = sum(1 for m in matches if m.how == "ops")
only_a = sum(1 for m in matches if m.how == "only a")
only_b = sum(1 for m in matches if m.how == "only b")
st.markdown(f"#### Kernels matched: {n_name} by name, {n_ops} by their ops; {only_a} only in A, {only_b} only in B")
table = pd.DataFrame(compare.kernel_table(A, B, matches)).rename(columns={"A time (s)": "A time",
                                                                          "B time (s)": "B time"})
if not any(table[c].notna().any() for c in ("A time", "B time")):
    table = table.drop(columns=["A time", "B time"])
shown = numbers_shown(table, {"A ops": lambda v: f"{v:g}", "B ops": lambda v: f"{v:g}", "A bytes": human_bytes,
                              "B bytes": human_bytes, "A time": human_seconds, "B time": human_seconds})
ev = show_table(shown, present, width="stretch", hide_index=True, height=min(360, 38 + 35 * len(table)),
                on_select="rerun", selection_mode="single-row", key="cmp_table",
                column_config={"A kernel": st.column_config.TextColumn(width="medium"),
                               "B kernel": st.column_config.TextColumn(width="medium")})
try:
    picked = ev.selection.rows if ev is not None else []
except AttributeError:
    picked = []
if picked:
    m = matches[picked[0]]
    want = {"side": "a", "name": m.a} if m.a else {"side": "b", "name": m.b}
    if ss.get("cmp_table_pick") != picked[0]:
        ss.cmp_table_pick = picked[0]
        ss.cmp_sel = want

# ----------------------------------------------------------------------------- graphs linked

sel = ss.cmp_sel
side, name = sel.get("side"), sel.get("name")
hl_a: set[str] = set()
hl_b: set[str] = set()
if side == "a" and name:
    hl_a, hl_b = {name}, set(rel_ab.get(name, []))
elif side == "b" and name:
    hl_b, hl_a = {name}, set(rel_ba.get(name, []))


with graphs_box:
    if name:
        other = hl_b if side == "a" else hl_a
        st.markdown(f"Selected **{'A' if side == 'a' else 'B'}: `{name}`** — its ops are done by "
                    + (", ".join(f"`{x}`" for x in sorted(other)[:12]) + (" …" if len(other) > 12 else "")
                       if other else "no kernel") + f" on the {'B' if side == 'a' else 'A'} side.")
        if st.button("Clear selection", key="cmp_clear"):
            ss.cmp_sel = {}
            st.rerun()
    else:
        st.caption("Click a kernel in either graph (or a row of the table): the kernels doing its ops light up on the "
                   "other side.")
    views.legend()
    specs = {}
    for which, b in (("a", A), ("b", B)):
        mod = b.module("hlo_after")
        if mod is None:
            specs[which] = None
            continue
        spec = post_graph(mod, b.kernels)  # no selection drawn in: the browser marks it
        spec.title = f"{which.upper()}: {b.title} — {b.metrics.get('kernels_after', '?')} kernels"
        specs[which] = spec
    v = views.pair_widget(specs, related={"a": rel_ab, "b": rel_ba},
                          fused={"a": {k.name: list(k.fused_ops) for k in A.kernels if k.fused_ops},
                                 "b": {k.name: list(k.fused_ops) for k in B.kernels if k.fused_ops}},
                          selected={"side": side, "name": name} if name else {}, key="cmp_graphs",
                          missing={"a": "A has no optimized HLO.", "b": "B has no optimized HLO."}, present=present)
    if isinstance(v, dict) and ss.cmp_clicks.get("pair") != v.get("n"):
        # the browser already lit it up; the server follows for the text above and the link
        ss.cmp_clicks["pair"] = v.get("n")
        got = v.get("sel") or {}
        known = {"a": {k.name for k in A.kernels}, "b": {k.name for k in B.kernels}}
        want = {"side": got["side"], "name": got["name"]} \
            if got.get("side") in known and got.get("name") in known[got["side"]] else {}
        if want != ss.cmp_sel:
            ss.cmp_sel = want
            st.rerun()
