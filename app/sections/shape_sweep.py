"""Shape specialization: every new input shape is a new compile; bucketing bounds them.

A sweep job (``analysis.compile.sweep``, run in the worker) calls a jitted model once per input length
and records the first call's trace/lower/compile time, a cached call's time and how many
executables the jitted function holds; then the same with the inputs zero-padded to a few
bucket sizes. The page plots both runs.
"""

from __future__ import annotations



import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from analysis.bundle.core import device_label
from analysis.errors import ExplorerError
from analysis.render.format import human_seconds
from analysis.studies.sweep import DEFAULT_BUCKETS, MIN_REPEATS, conclusions, parse_lengths
from analysis.service.job import Job, Sweep
from app import lecture_ui, safe, views
from app.explorer_state import explorer_state
from app.page_helpers import (backend_choice, compile_with_status, link_to_widgets, link_warning,
                              presentation, projector_fonts, show_error, table, wrapped_text)
from sample_models import gallery

st.set_page_config(page_title="Shape sweep · XLA Explorer", layout="wide")
st.markdown(views.CSS, unsafe_allow_html=True)
ss = st.session_state
present = presentation("sw")
ENTRY = gallery()["shape_sweep"]
PLAIN, BUCKET = "#D62728", "#2CA02C"

# A link names the sweep of the gallery model: ?lengths=100..1000 step 100&buckets=256, 512, 1024&backend=cpu
link_to_widgets("sweep", {"lengths": ("sw_lengths", None, None), "buckets": ("sw_buckets", None, None),
                          "backend": ("sw_backend", ["auto", "cpu", "gpu"], None)})
ss.setdefault("sw_lengths", "100..1000 step 100")
ss.setdefault("sw_buckets", ", ".join(map(str, DEFAULT_BUCKETS)))

with st.sidebar:
    st.markdown("## Shape sweep")
    link_warning("sweep")
    src = st.radio("Model", ["shape_sweep (gallery)", "Paste code"], key="sw_source")
    if src == "Paste code":
        ss.setdefault("sw_code", ENTRY.source)
        st.caption("Define `model(...)` and `example_inputs(n)` returning its arguments for length `n`.")
        code = st.text_area("Code", key="sw_code", height=300)
    else:
        code = None
        st.caption(ENTRY.title)
    lengths_text = st.text_input("Input lengths", key="sw_lengths",
                                 help="'100..1000 step 100', or a list: '100, 250, 300'")
    buckets_text = st.text_input("Buckets (pad up to)", key="sw_buckets",
                                 help="Each length is padded with zeros to the smallest bucket that holds it.")
    backend = backend_choice("sw_backend")
    go_btn = st.button("Run the sweep", type="primary", key="sw_go", width="stretch")
    if go_btn or ss.get("sw_bundle") is None:
        try:
            lengths, buckets = parse_lengths(lengths_text), parse_lengths(buckets_text, "buckets")
        except ExplorerError as e:
            show_error(e)
        else:
            if code is None:
                job = Job(kind="sweep", name="shape_sweep", source=ENTRY.source, filename=str(ENTRY.path), backend=backend,
                          measure=True, sweep=Sweep(lengths=lengths, buckets=buckets, repeats=MIN_REPEATS))
            else:
                job = Job(kind="sweep", name="pasted", source=code, filename="<pasted code>", backend=backend,
                          measure=True, sweep=Sweep(lengths=lengths, buckets=buckets, repeats=MIN_REPEATS))
            b = compile_with_status(job, f"Compiling for {len(lengths)} lengths, then bucketed…")
            if b is not None:
                ss.sw_bundle = b
                # pasted code has no link here (the main page links pasted code)
                ss.sw_link = None if code is not None else {"lengths": lengths_text, "buckets": buckets_text,
                                                            "backend": backend}
    st.query_params.from_dict(lecture_ui.address(ss.get("sw_link")))
    st.caption("The sweep runs as a measurement job (alone), so the call times are not disturbed by other compiles.")

b = ss.get("sw_bundle")
sw = (b.metrics or {}).get("shape_sweep") if b is not None else None
if not sw:
    st.title("Shape sweep")
    st.info("Run a sweep from the sidebar.")
    st.stop()

plain, bucketed, s = sw["plain"], sw["bucketed"], sw["summary"]
# the title and device come from a worker's bundle: escaped (app.safe), never HTML
st.markdown(f"### Shape specialization: {safe.text(b.title)} <span style='font-size:{0.95 if present else 0.8}rem;color:#666;"
            f"font-weight:normal'>{safe.text(device_label(b.environment))} · {len(plain)} lengths · "
            f"buckets {safe.text(', '.join(map(str, sw['buckets'])))}</span>", unsafe_allow_html=True)
st.markdown("XLA compiles for **exact shapes**: each new input length is traced, lowered and compiled again. "
            "Padding the inputs up to a few **bucket** sizes bounds the number of compiles — at the price of "
            "computing on the padding (and a model must mask it: zeros change a `mean`).")



def _pair(x: float | None, y: float | None) -> str:
    """Two durations in one unit, short enough for a metric: '224 → 75 ms'."""
    if x is None or y is None:
        return "–"
    top = max(x, y)
    scale, unit = (1, "s") if top >= 1 else (1e3, "ms") if top >= 1e-3 else (1e6, "µs")
    fmt = (lambda v: f"{v * scale:.0f}") if top * scale >= 20 else (lambda v: f"{v * scale:.1f}")
    return f"{fmt(x)} → {fmt(y)} {unit}"


c = st.columns(4)
c[0].metric("Executables", f"{s['executables']} → {s['executables_bucketed']}",
            help=f"Compiled programs the jitted function holds at the end, without → with bucketing "
                 f"(counted by {sw.get('count_method', 'jit cache size')}).")
c[1].metric("Total compile time", _pair(s["compile_s"], s["compile_s_bucketed"]),
            help="XLA compile time summed over the sweep (JAX's backend_compile events); tracing and lowering "
                 "are in the table.")
mc, mcb = s.get("mean_cached_call_s"), s.get("mean_cached_call_s_bucketed")
c[2].metric("Mean cached call", _pair(mc, mcb),
            help=f"Median of {sw.get('repeats', MIN_REPEATS)} calls per length once compiled (the two runs "
                 "interleaved call by call), averaged over the lengths.")
c[3].metric("Padding overhead", f"{s['padding_overhead']:.0%}",
            help="Extra elements computed with bucketing: sum of padded lengths / sum of lengths − 1.")

x = [r["length"] for r in plain]
fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.07,
                    subplot_titles=("First call: trace + lower + compile (ms)", "Cached call (ms)",
                                    "Executables compiled so far"))
for rows, name, color in ((plain, "exact shapes", PLAIN), (bucketed, "bucketed", BUCKET)):
    first = [(r["trace_s"] + r["lower_s"] + r["compile_s"]) * 1e3 for r in rows]
    hover = [f"length {r['length']}" + (f" → padded to {r['padded_to']}" if r["padded_to"] != r["length"] else "")
             + (" · compiled" if r["compiled"] else " · cache hit") for r in rows]
    fig.add_trace(go.Bar(x=x, y=first, name=name, marker_color=color, legendgroup=name, hovertext=hover,
                         hovertemplate="%{hovertext}<br>%{y:.1f} ms<extra>" + name + "</extra>"), row=1, col=1)
    med = [r["cached_call_s"] * 1e3 for r in rows]
    # the middle half of the repeated calls as the error bar (older sweeps have no spread)
    has_spread = all(r.get("cached_q1_s") is not None for r in rows)
    err = dict(type="data", symmetric=False, array=[r["cached_q3_s"] * 1e3 - m for r, m in zip(rows, med)],
               arrayminus=[m - r["cached_q1_s"] * 1e3 for r, m in zip(rows, med)], color=color,
               thickness=1.5, width=4) if has_spread else None
    fig.add_trace(go.Scatter(x=x, y=med, name=name, mode="lines+markers", error_y=err,
                             line=dict(color=color), legendgroup=name, showlegend=False, hovertext=hover,
                             hovertemplate="%{hovertext}<br>%{y:.3f} ms (median)<extra>" + name + "</extra>"),
                  row=1, col=2)
    fig.add_trace(go.Scatter(x=x, y=[r["executables"] for r in rows], name=name, mode="lines+markers",
                             line=dict(color=color, shape="hv", width=3), legendgroup=name, showlegend=False,
                             hovertext=hover, hovertemplate="%{hovertext}<br>%{y} executables<extra>" + name + "</extra>"),
                  row=1, col=3)
fig.update_layout(height=360, barmode="group", margin=dict(l=10, r=10, t=40, b=10),
                  legend=dict(orientation="h", y=-0.18, x=0.35))
for col in (1, 2, 3):
    fig.update_xaxes(title_text="input length", row=1, col=col)
fig.update_yaxes(rangemode="tozero", row=1, col=3)
if present:  # readable from the back row: the chart's text 16 px, its ticks 14
    projector_fonts(fig)
st.plotly_chart(fig, width="stretch", key="sw_chart")
st.caption(f"Cached call: the median of {sw.get('repeats', MIN_REPEATS)} calls per length; the bar spans the "
           "middle half of them (first to third quartile).")
if sw.get("verdict"):
    st.markdown("**What this sweep measured**")
    for line in conclusions(sw):  # Markdown without HTML: each mark backslash-escaped, shown as written
        st.markdown(f"- {wrapped_text(line[:800])}")

with st.expander("Every call", expanded=False):
    rows = []
    for which, rs in (("exact", plain), ("bucketed", bucketed)):
        for r in rs:
            rows.append({"run": which, "length": r["length"], "padded to": r["padded_to"],
                         "compiled": "yes" if r["compiled"] else "cache hit",
                         "trace (ms)": round(r["trace_s"] * 1e3, 2), "lower (ms)": round(r["lower_s"] * 1e3, 2),
                         "compile (ms)": round(r["compile_s"] * 1e3, 2),
                         "first call (ms)": round(r["first_call_s"] * 1e3, 2),
                         "cached call (ms)": round(r["cached_call_s"] * 1e3, 4),
                         "middle half (ms)": (f"{r['cached_q1_s'] * 1e3:.4f}–{r['cached_q3_s'] * 1e3:.4f}"
                                              if r.get("cached_q1_s") is not None else "–"),
                         "executables": r["executables"]})
    table(pd.DataFrame(rows), present, width="stretch", hide_index=True)
st.caption(f"The sweep took {human_seconds(sw.get('seconds'))} in the worker. The bundle is the ordinary compile at "
           f"length {plain[0]['length']}; open it on the main page to see its graphs.")
if st.button("Open this compile on the main page", key="sw_open"):
    shown = explorer_state()
    shown.bundle, shown.error, shown.sel = b, None, {}
    st.switch_page("main.py")
