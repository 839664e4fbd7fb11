"""The Memory tab: live bytes over the schedule with the peak marked, the buffers live at the
peak (a table and bars, biggest first) and the fusion-off comparison, drawn from
``bundle.memory`` with ``analysis.render.memory``. Picking a buffer (table row or bar) selects
the kernel that writes it in the graph: the Explorer's ``sel = {"side": "post", "name": K}``
(``app.explorer_state``)."""

from __future__ import annotations

from analysis.bundle.core import Bundle
from analysis.render import memory as rm
from analysis.render.format import human_bytes
from app.explorer_state import explorer_state
from app.picks import picked_point, picked_row

COLUMNS = ["buffer", "size", "kind", "shape", "kernel", "line", "op", "shares with"]


def render_memory_view(bundle: Bundle, key_prefix: str = "mem", present: bool = False,
                       follows: str | None = None) -> None:
    """Draw the memory view; a newly picked buffer selects its kernel and reruns the page. In
    presentation mode its charts' text is 16 px and its tables are plain HTML tables (no row
    picking there: the graphs still select). ``follows``: why the bundle has no buffer
    assignment yet, where it was to come with its timings (a big program's graphs come first:
    ``ExplorerState.comes_with_timings``)."""
    import pandas as pd
    import streamlit as st

    from app.page_helpers import table

    font = 16 if present else 13
    ss = st.session_state
    mem = bundle.memory
    if not rm.usable(mem):
        st.info(follows if follows and mem is None else rm.why_missing(bundle))
        return
    h = rm.headline(mem)
    c = st.columns(4)
    c[0].metric("peak live memory", human_bytes(h["peak"]),
                help="the most bytes live at one step of the schedule (parameters, outputs, constants, temporaries)")
    c[1].metric("temporaries at the peak", human_bytes(h["temp_at_peak"]),
                help=f"of the peak at step {h['peak_step']} ({h['peak_instruction']}): the part fusion can change; "
                     "the rest is parameters, constants and outputs")
    c[2].metric("temporary allocation", human_bytes(h["temp"]),
                help=f"{human_bytes(h['temp_peak'])} of it live at most at one step")
    c[3].metric("arguments + outputs", human_bytes((h["argument"] or 0) + (h["output"] or 0)))
    note = rm.agreement_note(mem)
    if note:
        st.caption(note)
    if mem.get("live_ranges") == "schedule":
        st.caption("Live ranges read off the module's schedule (the dump had no live-range file).")
    st.plotly_chart(rm.curve_figure(mem, font_size=font), width="stretch", key=f"{key_prefix}_curve")

    state = explorer_state()
    selected = state.sel.get("name") if state.sel.get("side") == "post" else None
    rows = rm.peak_rows(mem)
    st.markdown(f"**Buffers live at the peak** ({len(rows)}, biggest first) — pick one to select the kernel "
                "that writes it in the graph")
    picks: list[str] = []
    if rows:
        shown = pd.DataFrame([{k: r[k] for k in COLUMNS} for r in rows])
        ev = table(shown, present, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                   key=f"{key_prefix}_table", height=min(420, 38 + 35 * len(rows)))
        p = picked_row(ev, [r["kernel"] or None for r in rows])
        if p:
            picks.append(p)
        ev = st.plotly_chart(rm.peak_figure(mem, selected=selected, font_size=font), width="stretch", key=f"{key_prefix}_bars",
                             on_select="rerun", selection_mode="points")
        p = picked_point(ev)
        if p:
            picks.append(p)

    cmp = (bundle.fusion_comparison or {}).get("memory")
    if cmp:
        st.markdown("**Fusion off vs on**")
        left, right = st.columns([2, 3])
        with left:
            table(pd.DataFrame(rm.comparison_rows(cmp)), present, hide_index=True, width="stretch")
        left.markdown(rm.comparison_sentence(cmp))
        right.plotly_chart(rm.comparison_figure(cmp, font_size=font), width="stretch", key=f"{key_prefix}_cmp")
        only = cmp.get("only_unfused") or []
        if only:
            table(pd.DataFrame([{"array": v["name"], "size": human_bytes(v["size"]),
                                 "shape": v["shape"].split("{")[0], "op": v.get("op_name") or ""}
                                for v in only]), present, hide_index=True, width="stretch",
                  key=f"{key_prefix}_only")
    else:
        st.caption("Compile with *compare fusion* on to see the same program's memory with fusion off.")

    # only a new pick moves the selection (a row left selected must not undo a click in the graph)
    state_key = f"{key_prefix}_last_picks"
    before = ss.get(state_key, [])
    ss[state_key] = list(dict.fromkeys(picks))
    new = next((p for p in picks if p not in before), None)
    if new and new != selected:
        state.sel = {"side": "post", "name": new}
        st.rerun()
