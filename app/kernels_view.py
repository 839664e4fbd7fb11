"""Kernels & timings in the app: the table and the charts of ``analysis.render.charts`` drawn with
Streamlit. ``render_kernels_view`` returns the name of a kernel the user picked (table row or
chart point), so the caller can highlight it in the graph."""

from __future__ import annotations

from analysis.bundle import Bundle
from analysis.render.charts import (  # noqa: F401 - re-exported for callers of the view
    _label, figures, fusion_figure, fusion_table, kernel_rows, measured, roofline_figure, timeline_figure,
    top_kernels_figure, treemap_figure,
)
from analysis.render.format import human_bytes, human_seconds  # noqa: F401
from app.picks import picked_point, picked_row


# ----------------------------------------------------------------------------- Streamlit


def render_kernels_view(bundle: Bundle, key_prefix: str = "", selected: str | None = None) -> str | None:
    """Draw the kernels table, the notes and the charts; return the name of a kernel the user
    has just picked (a new table row or chart point), else None. ``selected`` (a kernel picked
    elsewhere, e.g. in the graph) is marked in the table and the charts."""
    import pandas as pd
    import streamlit as st

    kp = f"{key_prefix}_kv" if key_prefix else "kv"
    t = bundle.timings or {}
    picks: list[str] = []

    if t:
        c = st.columns(4)
        c[0].metric("step (median)", human_seconds(t.get("step_median_s")), help=f"wall-clock over {t.get('iterations')} calls")
        c[1].metric("kernels busy", human_seconds(t.get("device_busy_s")),
                    help="union of the kernels' spans in one step (median)")
        # busy comes from the profiled calls, which run a little slower than the unprofiled step
        # beside it: the share is against the profiled calls' own step, and says so
        traced = t.get("traced_step_median_s")
        c[2].metric("busy / profiled step", f"{t.get('busy_fraction', 0):.0%}",
                    help=f"kernels busy over the wall-clock step of the profiled calls ({human_seconds(traced)}); "
                         "profiling slows each call a little, so busy can exceed the unprofiled step")
        c[3].metric("attributed", f"{t.get('attributed_fraction', 0):.0%}",
                    help="share of the busy time in kernels of this module, matched by hlo_op")
        if t.get("coverage_note"):
            st.info(t["coverage_note"])
        if t.get("command_buffer_note"):
            st.caption(t["command_buffer_note"])
        peaks = t.get("peaks") or {}
        if peaks.get("memory_bytes_per_s"):
            fl = ", ".join(f"{k} {v / 1e12:.3g} TFLOP/s" for k, v in (peaks.get("flops_per_s") or {}).items())
            st.caption(f"Peaks ({peaks.get('note') or peaks.get('source')}): "
                       f"{peaks['memory_bytes_per_s'] / 1e9:.0f} GB/s memory, {fl}.")
        from analysis.profile import over_peak_note

        if over_peak_note(t):
            st.caption(over_peak_note(t))
    elif (bundle.environment or {}).get("deviceless"):
        st.caption("Not measured: compiled without its GPU, so there is nothing to run. Kernels, bytes and FLOPs "
                   "come from the optimized HLO.")
    else:
        st.caption("Not measured: kernels, bytes and FLOPs from the optimized HLO. Turn on measuring to time them.")

    rows = kernel_rows(bundle)
    if rows:
        df = pd.DataFrame([{
            "kernel": r["kernel"], "route": _label(r["route"]), "library": r["library"],
            "calls": r["calls"], "time (µs)": r["time_us"],
            "share": None if r["share"] is None else 100 * r["share"],
            "GB/s": r["gbps"], "GFLOP/s": r["gflops"], "% of peak": r["pct_of_peak"],
            "bytes": r["bytes"], "FLOPs": r["flops"], "inside": r["context"],
        } for r in rows])
        if not t:
            df = df[["kernel", "route", "library", "bytes", "FLOPs", "inside"]]
        config = {
            "time (µs)": st.column_config.NumberColumn(format="%.2f", help="median per step; control flow includes what it runs"),
            "share": st.column_config.ProgressColumn(format="%.1f%%", min_value=0, max_value=100, help="of the kernels' busy time"),
            "GB/s": st.column_config.NumberColumn(format="%.1f"),
            "GFLOP/s": st.column_config.NumberColumn(format="%.1f"),
            "% of peak": st.column_config.NumberColumn(format="%.0f%%", help="max of bandwidth and compute use vs the device's peaks"),
            "calls": st.column_config.NumberColumn(format="%g", help="executions per step"),
        }
        shown = df
        if selected and selected in set(df["kernel"]):
            shown = df.style.apply(lambda row: ["background-color: #FFE8D1" if row["kernel"] == selected else ""
                                                for _ in row], axis=1)
            st.caption(f"`{selected}` (selected in the graph) is marked in the table and the charts.")
        ev = st.dataframe(shown, hide_index=True, width="stretch", column_config=config,
                          on_select="rerun", selection_mode="single-row", key=f"{kp}_table")
        p = picked_row(ev, [r["kernel"] for r in rows])
        if p:
            picks.append(p)

    figs = figures(bundle, selected=selected)
    tabs = st.tabs(list(figs))
    for tab, (name, fig) in zip(tabs, figs.items()):
        with tab:
            if name == "Fusion off" and bundle.fusion_comparison:
                fc = bundle.fusion_comparison
                st.table(pd.DataFrame(fusion_table(bundle)).set_index(""))
                st.caption(f"Fusion off = the same program compiled with xla_disable_hlo_passes="
                           f"{','.join(fc['disabled_passes'])}. {fc.get('note', '')}")
            selectable = name in ("Top kernels", "Timeline", "Roofline")
            if selectable:
                ev = st.plotly_chart(fig, width="stretch", key=f"{kp}_fig_{name}",
                                     on_select="rerun", selection_mode="points")
                p = picked_point(ev)
                if p:
                    picks.append(p)
            else:
                st.plotly_chart(fig, width="stretch", key=f"{kp}_fig_{name}")

    from analysis.profile import trace_bytes

    raw = trace_bytes(t) if t else None
    if raw:
        st.download_button("Download the raw trace (Perfetto / chrome://tracing)", raw,
                           file_name=f"{bundle.title}.trace.json.gz", mime="application/gzip", key=f"{kp}_trace")
    elif t and t.get("trace_json_gz_bytes"):
        st.caption(f"The raw trace ({human_bytes(t['trace_json_gz_bytes'])}) was too large to keep in the bundle.")

    # Report a pick once: a selection that stays selected must not override later clicks elsewhere.
    state_key = f"{kp}_last_picks"
    before = set(st.session_state.get(state_key) or ())
    st.session_state[state_key] = list(dict.fromkeys(picks))
    return next((p for p in picks if p not in before), None)
