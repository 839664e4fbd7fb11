"""The Explorer's sidebar: what to compile (a gallery model, pasted code, or an upload, opened
from here) and how (backend, devices, compiler options, measuring, the fusion-off comparison),
the op search box, and where the jobs run. It gives the page a ``SidebarChoice``: the source
kind, whether its Compile was pressed, and the job Compile runs.

A session's first run draws the sidebar's heading only (``Sidebar`` with ``held``): its widgets'
scripts held the graphs back (docs/performance.md). They come with the run after the graphs,
like the rest of the page, holding the session's (a link's) values; the heading keeps the
sidebar's place, so the graphs do not move when they come. Where no graphs come soon (a compile
to wait for, or none to show) they are drawn at once (``Sidebar.now``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from analysis.errors import ExplorerError
from analysis.options import format_options, parse_options
from analysis.service import runtimes
from analysis.service.job import Job
from app import runner
from app.devices_view import devices_control
from app.explorer_state import ExplorerState
from app.page_helpers import presets_for
from app.uploads import choice_label, load_upload, open_choice, upload_choices
from sample_models import DEFAULT_MODEL, gallery

SOURCES = ["Gallery", "Paste code", "Upload HLO / bundle"]


@dataclass
class SidebarChoice:
    """What the sidebar asks of the page."""

    source_kind: str  # one of SOURCES
    pressed: bool = False  # its Compile button
    # what Compile runs: the model or the code, with the backend, devices and options chosen
    # (None for an upload, which the sidebar opens itself)
    job: Job | None = None
    options_error: str | None = None  # the options box cannot be read: Compile says this instead


def free_options(text: str) -> dict:
    """The options box's ``KEY=VALUE`` lines (blank lines and ``#`` comments left out)."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return parse_options(lines)


class Sidebar:
    """The sidebar of one run of the page: drawn now, or (``held``) its heading only until
    ``now``. ``choice`` is what it asks; a held sidebar asks for nothing but names the source
    kind the session had."""

    def __init__(self, state: ExplorerState, held: bool):
        self.state, self.held, self.waiting = state, held, held
        if held:
            st.sidebar.markdown("## XLA Explorer")
            self.choice = SidebarChoice(st.session_state.get("source_kind") or "Gallery")
        else:
            self.choice = draw(state)

    def now(self) -> None:
        """The widgets of a sidebar held back, once it is clear they would hold back nothing:
        the run compiles (seconds), or it ends without graphs. (Their choice is the next run's.)"""
        if self.waiting:
            self.waiting = False
            draw(self.state, heading=False)  # the held sidebar has it


def draw(state: ExplorerState, heading: bool = True) -> SidebarChoice:
    """The sidebar's widgets (under its heading, unless a held sidebar drew that), and what they ask."""
    ss = st.session_state
    models = gallery()
    # A link's values, once, before its widgets exist in this run. A session's first run holds
    # the widgets back (``Sidebar``): where the page before was this page (a lecture's previous
    # step), the browser still shows that page's widgets meanwhile, and a rerun it sends then
    # (the graphs saying they are drawn) carries their old values, which Streamlit would give
    # the widgets drawn next; a value the script sets in the run wins over the browser's.
    for k, v in (state.link_widgets or {}).items():
        ss[k] = v
    state.link_widgets = None
    with st.sidebar:
        if heading:
            st.markdown("## XLA Explorer")
        source_kind = st.radio("Model", SOURCES, key="source_kind", horizontal=False)
        job = None
        if source_kind == "Gallery":
            choice = st.selectbox("Gallery model", list(models), key="gallery_choice",
                                  format_func=lambda n: f"{n} — {models[n].title.split(':')[0]}")
            st.caption(models[choice].title)
            job = Job(kind="gallery", name=choice, filename=str(models[choice].path))
        elif source_kind == "Paste code":
            if state.code is None:
                state.code = models[DEFAULT_MODEL].source
            if ss.get("ace") is not None:  # what the editor (in the main pane) holds now
                state.code = ss.ace
            st.caption("Edit the code in the main pane: define `model(...)` and `example_inputs()` returning its "
                       "arguments, then Compile.")
            job = Job(kind="code", source=state.code, filename="<pasted code>", name="pasted")
        else:
            upload_boxes(state)
        out = SidebarChoice(source_kind)
        if job is not None:
            out = compile_settings(job, source_kind, models)
        st.text_input("Find and select an op", key="find",
                      placeholder="a name, an op_name path (attention/dot) or a line",
                      help="The graphs' own search box (above them) finds as you type, without a round trip")
        isolated, why = runner.sandbox_state()
        if not isolated:
            st.warning(f"Pasted code is NOT isolated: {why}")
        st.caption(runner.engine_line())
    return out


def upload_boxes(state: ExplorerState) -> None:
    """The upload boxes (an HLO text, a bundle or a dump zip; a profiler trace), opened here as
    the page's bundle; then, where the file holds several modules, a choice of the one shown."""
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
    choices, picked, what = upload_choices(state.bundle)
    if len(choices) > 1 and state.upload_job is not None:
        pick = st.selectbox(what, range(len(choices)), format_func=lambda i: choice_label(choices[i]),
                            index=next((i for i, c in enumerate(choices) if c["name"] == picked), 0),
                            key="upload_pick")
        if choices[pick]["name"] != picked and st.button("Show this module", key="upload_show") \
                and open_choice(choices[pick]["name"]):
            st.rerun()  # the page, and this box, of the module now shown


def compile_settings(job: Job, source_kind: str, models: dict) -> SidebarChoice:
    """How ``job`` is compiled: backend, devices, compiler options, measuring, the fusion-off
    comparison; and the Compile button."""
    ss = st.session_state
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
    jax = jax_control()
    devices = devices_control(models[job.name].source if job.kind == "gallery" else job.source)
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
    try:
        opts = dict(pre[preset])
        opts.update(free_options(free))
    except ExplorerError as e:
        return SidebarChoice(source_kind, pressed, job, e.one_line())
    return SidebarChoice(source_kind, pressed, replace(job, backend=backend, compiler_options=opts, measure=measure,
                                                       compare_fusion=compare, devices=devices, jax=jax))


def jax_versions() -> list[str]:
    """The jax releases present on this machine (``analysis.service.runtimes.available``), newest
    first: the app's own and the runtimes found beside it or made here. None is made from here."""
    return [r.jax for r in runtimes.available()]


def jax_control() -> str | None:
    """The "XLA (jax) version" select: the runtime Compile's job runs in (None: the app's own,
    the default)."""
    ss = st.session_state
    versions, own = jax_versions(), runtimes.own().jax
    if ss.get("jax") not in versions:
        ss["jax"] = own  # the default, or a version no longer here
    chosen = st.selectbox("XLA (jax) version", versions, key="jax",
                          format_func=lambda v: f"jax {v}" + (" (this app's)" if v == own else ""),
                          help="The jax release, and its XLA, that compiles the program: the runtimes on this "
                               "machine. `xla-explorer runtimes` lists them; `xla-explorer runtimes --make VERSION` "
                               "adds one (docs/runtimes.md).")
    return None if chosen == own else chosen
