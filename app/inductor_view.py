"""The Compare page's "XLA beside Inductor": one PyTorch model's kernels from both compilers,
layer by layer, drawn from ``analysis.studies.inductor`` (the view model the CLI's
``compare --inductor`` prints too): the two whole calls with their spreads and a verdict only where
the spreads part, a table of each layer's kernels on both sides, and the sentences on where the two
compilers group the ops differently. Every name shown comes from the compile (a user's module
path, a kernel's name): written as text, never as markdown or HTML."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis.measures import spread_text
from analysis.render.format import human_seconds
from analysis.studies.inductor import ROOT, BesideInductor, beside_inductor, differences
from app.page_helpers import table as show_table
from app.safe import plain
from sample_models.lessons_torch import inductor_lesson


def _rows(r: BesideInductor) -> list[dict]:
    out = []
    for row in r.rows:
        for side, ks in (("XLA", row.xla), ("Inductor", row.inductor)):
            if not ks:
                out.append({"Layer": row.layer, "Compiler": side, "Kernel": "(none holds an op of this layer)",
                            "Runs as": "", "Torch ops of this layer": "", "Also holds ops of": "",
                            "Time per call": ""})
            for k in ks:
                t = spread_text(k.time, human_seconds) if k.time is not None else ""
                out.append({"Layer": row.layer, "Compiler": side, "Kernel": k.name, "Runs as": k.what,
                            "Torch ops of this layer": ", ".join(k.ops) or "–",
                            "Also holds ops of": ", ".join(k.also) or "",
                            "Time per call": (t if k.home else f"({t}: counted in its own layer)") if t else ""})
    return out


def show(b, present: bool) -> None:
    """The section for a bundle whose job compiled the model with Inductor too."""
    r = beside_inductor(b)
    if r is None:
        st.warning("This compile holds no Inductor compile: choose a PyTorch model and press Compare.")
        return
    title = plain(str(b.source.get("name") or b.title)[:80])
    st.markdown(f"### XLA beside Inductor: {title}")
    st.caption(f"torch {plain(r.torch or '?')}, on the CPU, Inductor's default mode ({r.graphs} graph"
               f"{'' if r.graphs == 1 else 's'} compiled); XLA through torchax. Layers are the module's own "
               f"(`named_modules()`); {ROOT} is the model's own forward.")
    c1, c2, c3 = st.columns(3)
    c1.metric("XLA kernels", r.xla_kernels)
    c2.metric("Inductor calls", r.inductor_kernels)
    c2.caption(f"{r.inductor_cpp} C++ kernel{'' if r.inductor_cpp == 1 else 's'}, {r.inductor_library} ATen "
               f"op{'' if r.inductor_library == 1 else 's'} run as library calls or as they are")
    if r.xla_call is not None and r.inductor_call is not None:
        c3.metric("Whole call, XLA → Inductor",
                  f"{human_seconds(r.xla_call.median)} → {human_seconds(r.inductor_call.median)}")
        c3.caption(f"medians and interquartile ranges of {r.xla_call.n} alternated calls each: XLA "
                   f"{spread_text(r.xla_call, human_seconds)}, Inductor {spread_text(r.inductor_call, human_seconds)}")
        st.markdown(f"**Verdict:** {plain(r.verdict)}.")
    else:
        c3.metric("Whole call", "not measured")
        c3.caption("Turn on *Measure both* in the sidebar: every kernel timed, and the two whole calls "
                   "alternated in one run.")
    diff = differences(r)
    st.markdown("#### Where the two compilers group the ops differently")
    if diff:
        st.markdown("\n".join(f"- {plain(d.replace('`', ''))}" for d in diff))
    else:
        st.markdown("Layer by layer, both compilers ran the ops in the same number of kernels, and neither fused "
                    "across a layer's border.")
    les = inductor_lesson(b, r)
    if les is not None:
        with st.expander(f"Lesson: {les.title}", expanded=True):
            st.markdown(les.text)
            st.markdown("**Checked on this compile:**\n\n" + "\n".join(
                f"- {'✔' if c.holds else '✘ not on this compile:'} {plain(c.claim.replace('`', ''))}"
                for c in les.checks))
    st.markdown("#### Layer by layer")
    st.caption("A kernel is listed under every layer it holds ops of; its time counts in one layer, its own. No "
               "verdict per layer: XLA's kernel times are the profiler's medians, without a spread.")
    show_table(pd.DataFrame(_rows(r)), present, hide_index=True, width="stretch", key="cmp_inductor_rows")
