"""The Explorer's "Fusion decisions": for the selected op or kernel, the lines "fused with ...
because ..." / "not fused with ... because ..." (XLA's words), and a table of every decision
of the compile, filtered by decision and reason; picking a row selects its op on both graphs.

Reads ``bundle.fusion_decisions`` (``analysis.fusion.decisions``); drawing is plain text and
dataframes: the strings came from a compile's log and are never rendered as HTML.
"""

from __future__ import annotations

import streamlit as st

from analysis.fusion.decisions import op_lines
from analysis.fusion.log import DECISIONS
from analysis.render.decisions import rows as decision_rows, summary_line
from app.explorer_state import ExplorerState
from app.picks import picked_row

ALL = "(all)"
MAX_ROWS = 2000  # rows of the decisions table drawn at once


def details_lines(bundle, sel: dict | None) -> list[str]:
    """The details panel's lines for a selection (an op before optimization or a kernel)."""
    name = (sel or {}).get("name")
    if not name or not bundle.fusion_decisions:
        return []
    return op_lines(bundle.fusion_decisions, name)


def render(bundle, state: ExplorerState, key_prefix: str = "fd") -> None:
    """The details lines for ``state.sel`` and, in an expander, the table. A picked row selects its
    producer (an op before optimization; else its kernel) and reruns."""
    ss = st.session_state
    fd = bundle.fusion_decisions
    lines = details_lines(bundle, state.sel)
    if lines:
        st.markdown("**Fusion decisions** (XLA's words)")
        st.text("\n".join(lines[:40]) + (f"\n... {len(lines) - 40} more" if len(lines) > 40 else ""))
    if not fd:
        return
    recs = fd.get("records", [])
    focus = state.decision_focus  # a row the graphs' "why" panel linked to
    if not (isinstance(focus, int) and 0 <= focus < len(recs)):
        focus = None
    with st.expander(f"Fusion decisions ({len(recs)}): why XLA fused ops, or did not", expanded=focus is not None):
        st.caption(summary_line(fd))
        if focus is not None:
            import pandas as pd

            box = st.container(key=f"{key_prefix}_focus_box")  # the graphs' frame scrolls the page to it
            box.markdown(f"**Row #{focus}**, from the graphs:")
            box.dataframe(pd.DataFrame(decision_rows({"records": [recs[focus]]})[0]).assign(**{"#": focus}),
                         hide_index=True, width="stretch", key=f"{key_prefix}_focus_row")
        c1, c2 = st.columns([1, 3])
        decision = c1.selectbox("Decision", [ALL, *DECISIONS], key=f"{key_prefix}_decision")
        reasons = sorted(fd.get("reasons", {}), key=lambda r: -fd["reasons"][r])
        reason = c2.selectbox("Reason", [ALL, *reasons], key=f"{key_prefix}_reason",
                              format_func=lambda r: r if r == ALL else f"{r} ({fd['reasons'][r]})")
        shown, matched = decision_rows(fd, None if decision == ALL else decision,
                                       None if reason == ALL else reason, limit=MAX_ROWS)
        if not shown:
            st.info("No decision matches these filters.")
            return
        if matched > len(shown):
            # a big program logs tens of thousands: the table is for reading, the filters narrow it
            st.caption(f"The first {len(shown):,} of {matched:,} decisions: choose a decision or a reason to see others.")
        import pandas as pd

        ev = st.dataframe(pd.DataFrame(shown), hide_index=True, width="stretch", on_select="rerun",
                          selection_mode="single-row", key=f"{key_prefix}_table",
                          height=min(420, 38 + 35 * len(shown)))
        i = picked_row(ev, [r["#"] for r in shown])
        if i is not None and ss.get(f"{key_prefix}_last") != i:
            ss[f"{key_prefix}_last"] = i
            r = recs[i]
            if r.get("producer_pre"):
                state.sel = {"side": "pre", "name": r["producer_pre"][0]}
            elif r.get("producer_kernels"):
                state.sel = {"side": "post", "name": r["producer_kernels"][0]}
            st.rerun()
        no = [e for e in fd.get("edges", []) if not e.get("records")]
        if no:
            st.caption(f"No decision logged for {len(no)} edge(s) across a kernel boundary: "
                       + ", ".join(f"{e['producer']} -> {e['consumer']}" for e in no[:12])
                       + (" ..." if len(no) > 12 else ""))
