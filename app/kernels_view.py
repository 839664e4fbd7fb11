"""Kernels & timings in the app: the table and the charts of ``analysis.render.charts`` drawn with
Streamlit. ``render_kernels_view`` returns the name of a kernel the user picked (table row or
chart point), so the caller can highlight it in the graph."""

from __future__ import annotations

from analysis.bundle.content import ContentCache
from analysis.bundle.core import Bundle
from analysis.render.charts import (  # noqa: F401 - re-exported for callers of the view
    route_label, figure_makers, figures, fusion_figure, fusion_table, kernel_rows, measured, roofline_figure, timeline_figure,
    top_kernels_figure, treemap_figure,
)
from analysis.render.format import human_bytes, human_flops, human_seconds, peaks_sentence
from analysis.render.rows import fused_text
from analysis.render.summary import trace_source_text
from app.picks import picked_point, picked_row
from app.page_helpers import projector_fonts
from app.safe import plain  # a trace's file and device names, in captions

# ----------------------------------------------------------------------------- the table


MISSING = -1.0  # a number a row does not have: sorts below every real value, shown as "–"
# Rows the table shows unless asked for all: Streamlit styles each of its cells in Python (the
# project's units, "–" for a missing value), and a big program's whole table was much of
# every page run, the run that draws the graphs first included (docs/performance.md); the rows
# shown cost a fraction of that. The kernels left out are the least busy (by
# time, else by bytes); a kernel picked in the graph is always pinned above the table.
TABLE_ROWS = 500
# The kernel table's rows of the last few programs, by content: a rerun, a stored bundle opened
# again or the measured bundle after its preview's (other timings: made again) find theirs.
_ROWS = ContentCache(("before", "after", "timings"), size=6)


def _num(fmt):
    return lambda v: "–" if v is None or v != v or v < 0 else fmt(v)


def numbers_shown(df, formats: dict):
    """A Styler over ``df`` whose number columns (``formats``: column -> formatter of a real
    value) stay numbers for sorting, with missing values held as ``MISSING`` and shown "–"."""
    df = df.copy()
    for c in formats:
        if c in df.columns:
            df[c] = df[c].astype(float).fillna(MISSING)
    return df.style.format({c: _num(f) for c, f in formats.items() if c in df.columns})


def table(rows: list[dict], measured: bool, selected: str | None = None, columns: list[str] | None = None):
    """The kernel table as a pandas Styler (a DataFrame underneath) and its Streamlit column
    settings.

    Numbers stay numbers, so a click on a header sorts them, and are shown in human units by
    the project's own formatters (``analysis.render.format``: 1.6 MiB, 67.1 MFLOP, 570 µs).
    Streamlit shows a missing value as "None" whatever it is told, so a number a row does not
    have is held as ``MISSING`` and shown as "–". Columns with nothing in any row are dropped.
    ``selected`` is the kernel picked in the graph: its row is shaded. ``columns`` keeps exactly
    those (another table's, for a row pinned above it)."""
    import pandas as pd
    import streamlit as st

    data = []
    for r in rows:
        lines = ", ".join(f"L{n}" for n in r["lines"])
        if r["other_lines"]:
            lines = ", ".join(x for x in (lines, ", ".join(r["other_lines"][:2])) if x)
        row = {
            "kernel": r["kernel"], "route": route_label(r["route"]), "library": r["library"],
            "what": r["what"], "ops": r["absorbed"], "fused instructions": fused_text(r["fused_ops"]),
            "source": lines, "inside": r["context"] or "",
            "bytes": r["bytes"], "FLOPs": r["flops"] or None,  # no floating-point work: "–"
        }
        if measured:
            row.update({
                "calls": r["calls"], "time": None if r["time_us"] is None else r["time_us"] / 1e6,
                "share": 100 * (r["share"] or 0),
                "own time": None if r.get("own_us") is None else r["own_us"] / 1e6,
                "GiB/s": r["gib_s"], "GFLOP/s": r["gflops"], "% of roof": r["pct_of_roof"],
                "roof": r["roof"] or "",
            })
        data.append(row)
    order = ["kernel", "route", "library", "what", "ops", "fused instructions", "source"]
    if measured:
        order += ["calls", "time", "share", "own time", "GiB/s", "GFLOP/s", "% of roof", "roof"]
    order += ["bytes", "FLOPs", "inside"]
    df = pd.DataFrame(data, columns=order)
    text = ["route", "library", "what", "fused instructions", "source", "inside", "roof"]
    numbers = [c for c in order if c not in text and c != "kernel"]

    def has(c):
        col = df[c]
        return bool((col.fillna("") != "").any()) if c in text else bool((col.fillna(0) > 0).any())

    keep = list(columns) if columns is not None else [c for c in order if c == "kernel" or has(c)]
    df = df[keep].copy()
    for c in numbers:
        if c in df.columns:
            df[c] = df[c].astype(float).fillna(MISSING)
    formats = {
        "ops": _num(lambda v: f"{v:g}"), "calls": _num(lambda v: f"{v:g}"),
        "time": _num(human_seconds), "share": _num(lambda v: f"{v:.1f}%"), "own time": _num(human_seconds),
        "GiB/s": _num(lambda v: f"{v:.3g}"), "GFLOP/s": _num(lambda v: f"{v:,.4g}"),
        "% of roof": _num(lambda v: f"{v:.0f}%"), "bytes": _num(human_bytes), "FLOPs": _num(human_flops),
    }
    styler = df.style.format({c: f for c, f in formats.items() if c in df.columns})
    if selected and selected in set(df["kernel"]):
        styler = styler.apply(lambda row: ["background-color: #FFE8D1" if row["kernel"] == selected else ""
                                           for _ in row], axis=1)
    config = {
        "kernel": st.column_config.TextColumn(pinned=True),
        "what": st.column_config.TextColumn(help="what runs it: library call, Triton tiles, or fusion kind and ops"),
        "ops": st.column_config.NumberColumn(help="ops of the program this kernel does (the graph's 'N ops', "
                                             "through provenance)"),
        "fused instructions": st.column_config.TextColumn(help="the optimized HLO instructions inside the kernel"),
        "source": st.column_config.TextColumn(help="lines of the model's file the kernel came from"),
        "inside": st.column_config.TextColumn(help="the control flow (loop, conditional) that runs it"),
        "time": st.column_config.NumberColumn(help="its share of the step, as time: share x step (kernels running "
                                              "at once split the time they share; docs/numbers.md)"),
        "share": st.column_config.ProgressColumn(format="%.1f%%", min_value=0, max_value=100,
                                                 help="its part of the step (the middle traced steps)"),
        "own time": st.column_config.NumberColumn(help="the time it ran, kernels beside it counted in full (control "
                                                  "flow: with the kernels it runs); shown where it differs from time"),
        "GiB/s": st.column_config.NumberColumn(help="bytes it moves per step over its own time (the time it ran)"),
        "GFLOP/s": st.column_config.NumberColumn(help="FLOPs per step over its own time (the time it ran)"),
        "% of roof": st.column_config.NumberColumn(help="of the roof named beside it: the cache its working set fits "
                                                        "in, memory, or a compute peak (docs/numbers.md); never above "
                                                        "100%: a kernel faster than every roof measured shows none"),
        "calls": st.column_config.NumberColumn(help="executions per step"),
        "bytes": st.column_config.NumberColumn(help="read and written by the kernel (from the optimized HLO)"),
        "FLOPs": st.column_config.NumberColumn(help="floating-point operations (from the optimized HLO)"),
    }
    return styler, {k: v for k, v in config.items() if k in df.columns}


# ----------------------------------------------------------------------------- Streamlit


def render_kernels_view(bundle: Bundle, key_prefix: str = "", selected: str | None = None,
                        measuring: bool = False, present: bool = False) -> str | None:
    """Draw the kernels table, the notes and the charts; return the name of a kernel the user
    has just picked (a new table row or chart point), else None. ``selected`` (a kernel picked
    elsewhere, e.g. in the graph) is marked in the table and the charts."""
    import pandas as pd
    import streamlit as st

    kp = f"{key_prefix}_kv" if key_prefix else "kv"
    t = bundle.timings or {}
    picks: list[str] = []

    if t:
        from analysis import measures as numbers

        c = st.columns(4)
        sp, cl, bf = numbers.step(t), numbers.call(t), numbers.busy_fraction(t)
        c[0].metric("step (median)", human_seconds(sp.median if sp else None),
                    help=f"first kernel's start to last kernel's end, median of {t.get('traced_steps')} traced "
                         f"steps; middle half {numbers.spread_text(sp, human_seconds)}. Every kernel's time and "
                         "share below is of this step (docs/numbers.md)")
        c[1].metric("kernels busy", f"{bf:.0%} of the step" if bf is not None else "–",
                    help="the part of the step in which at least one kernel ran (the union of their intervals, "
                         f"{human_seconds(t.get('device_busy_s'))}); kernels running at once count once")
        c[2].metric("call, no profiler", human_seconds(cl.median if cl else None),
                    help=f"wall clock of one call without the profiler, host dispatch included, median of "
                         f"{t.get('iterations')} calls ({numbers.spread_text(cl, human_seconds)}). The profiler "
                         "costs time per kernel event, so a traced step can be longer than an untraced call")
        c[3].metric("attributed", f"{t.get('attributed_fraction', 0):.0%}",
                    help="share of the busy time in kernels of this module, matched by hlo_op")
        if t.get("source") == "trace":
            st.caption(f"Timings from {plain(trace_source_text(t))}.")
        if t.get("coverage_note"):
            st.info(t["coverage_note"])
        if t.get("command_buffer_note"):
            st.caption(t["command_buffer_note"])
        if peaks_sentence(t.get("peaks")):
            st.caption(plain(peaks_sentence(t.get("peaks"))))
        elif t.get("peaks_note"):
            st.caption(plain(str(t["peaks_note"])[:300]))
        if numbers.roof_note(t):
            st.caption(numbers.roof_note(t))
    elif measuring:
        st.caption("Measuring: every kernel is being timed; the timings fill in here when that is done. "
                   "Until then, kernels, bytes and FLOPs from the optimized HLO.")
    elif (bundle.environment or {}).get("deviceless"):
        st.caption("Not measured: compiled without its GPU, so there is nothing to run. Kernels, bytes and FLOPs "
                   "come from the optimized HLO.")
    else:
        st.caption("Not measured: kernels, bytes and FLOPs from the optimized HLO. Turn on measuring to time them.")

    rows = _ROWS.get(bundle, lambda: kernel_rows(bundle))
    if rows:
        shown = rows
        if len(rows) > TABLE_ROWS:
            by = "time" if t else "bytes read and written"
            if not st.toggle(f"All {len(rows):,} kernels (slower to draw)", key=f"{kp}_all",
                             help=f"The table shows the {TABLE_ROWS} kernels with the most {by}; this shows every one"):
                shown = rows[:TABLE_ROWS] if t else sorted(rows, key=lambda r: -(r["bytes"] or 0))[:TABLE_ROWS]
                st.caption(f"The {TABLE_ROWS} kernels with the most {by}, of {len(rows):,}.")
        styled, config = table(shown, measured=bool(t), selected=selected)
        df = styled.data
        if selected and any(r["kernel"] == selected for r in rows):
            # A Streamlit table cannot be scrolled from Python: the selected kernel is pinned
            # above it (same columns), and shaded in the table itself.
            where = "shaded in the table" if selected in set(df["kernel"]) else "not among the rows shown"
            st.caption(f"Selected in the graph: `{selected}` ({where}, outlined in the charts)")
            pinned, _ = table([r for r in rows if r["kernel"] == selected], measured=bool(t),
                              columns=list(df.columns))
            st.dataframe(pinned, hide_index=True, width="stretch", column_config=config, key=f"{kp}_pinned")
        import pandas as pd

        # pandas refuses to style more than 262,144 cells by default (a program of 25,000
        # kernels has more): the table is this program's, so the limit is its size
        with pd.option_context("styler.render.max_elements", max(262144, df.size + 1)):
            ev = st.dataframe(styled, hide_index=True, width="stretch", column_config=config,
                              on_select="rerun", selection_mode="single-row", key=f"{kp}_table")
        p = picked_row(ev, list(df["kernel"]))
        if p:
            picks.append(p)
        st.caption("Click a column's header to sort by it; pick a row to light its kernel up in the graph.")

    # Only the open chart is made and sent (``on_change="rerun"`` reruns on a switch): a big
    # program's roofline and timeline took a second of every click's rerun to build.
    makers = figure_makers(bundle, selected=selected)
    tabs = st.tabs(list(makers), key=f"{kp}_charts", on_change="rerun")
    for tab, (name, make) in zip(tabs, makers.items()):
        if not tab.open:
            continue
        fig = make()
        if present:
            projector_fonts(fig)  # 16 px, the ticks 14: readable on a projector
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

    from analysis.timing.profiles import trace_bytes

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
