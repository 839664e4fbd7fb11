"""What the extra pages (app/sections/) share: the session defaults, compiling a job with its
phases in a box (``WaitBox``), and the model picker. Every compile goes through ``app.runner``
(the worker and its queue); nothing here imports JAX."""

from __future__ import annotations

import logging
import re

import streamlit as st

from analysis.errors import ExplorerError, from_parse_error
from analysis.hlo import HloParseError
from analysis.service.job import PHASES, Job
from app import runner
from app.explorer_state import explorer_state
from app.safe import plain



def as_text(text: str) -> str:
    """``text`` as Markdown that shows it exactly as written: a fenced block (longer than any run
    of backticks in it), so ``__dict__`` stays ``__dict__``, ``>=`` stays ``>=`` and nothing in an
    error, a note or a name from a bundle is formatted, linked or fetched."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def unexpected(e: BaseException, phase: str, file: str | None = None) -> str:
    """The one line a page shows for an error that is not an ``ExplorerError`` (a bug, or a
    resource an input exhausted: MemoryError): its kind and where it happened (``phase``, the
    user's ``file``); the traceback goes
    to the server's log, never to the page."""
    logging.getLogger("xla_explorer").error("unexpected error (%s)", phase, exc_info=e)
    if isinstance(e, HloParseError):  # a text nothing checked before: where it is bad
        return from_parse_error(e).one_line()
    where = f"{phase} error" + (f" at {' '.join(str(file).split())[:100]}" if file else "")
    if isinstance(e, MemoryError):
        return f"{where}: out of memory (the input needs more than this server has)"
    msg = " ".join(str(e).split())[:200]
    return f"{where}: internal error: {type(e).__name__}{': ' + msg if msg else ''}"


def show_error(error: "ExplorerError | str") -> None:
    """An error, whole and as text (its one line, then what the raised text says beyond it)."""
    st.error(as_text(error.full_text() if isinstance(error, ExplorerError) else str(error)),
             icon=":material/error:")


def wrapped_text(text: str) -> str:
    """``text`` as Markdown that shows it as written and wraps like prose (a note, a lesson's
    line): each line's Markdown marks backslash-escaped (``safe.plain``), its line breaks kept.
    A fenced block (``as_text``) keeps a traceback's columns but runs off a projector's edge."""
    return "  \n".join(plain(line) for line in text.splitlines())


def show_note(text: str) -> None:
    """A note made from a bundle's data, as text."""
    st.info(wrapped_text(text), icon=":material/info:")


def link_to_widgets(page: str, spec: dict) -> None:
    """Opening a link to this page: its query parameters go into the widgets they name, once per
    session (later runs leave the user's choices alone). ``spec``: parameter -> (widget key,
    allowed values — a list, a dict from link value to widget value, or None for free text —,
    and a function that turns the link's text into the widget's value, or None). A value that is
    not a choice is reported (see ``link_warning``) and ignored."""
    ss = st.session_state
    flag = f"_link_read_{page}"
    if ss.get(flag):
        return
    ss[flag] = True
    params = st.query_params.to_dict()
    bad = []
    for param, (key, allowed, convert) in spec.items():
        if param not in params:
            continue
        value = params[param]
        if allowed is not None and value not in allowed:
            bad.append(f"{param}={value[:40]}")
            continue
        if isinstance(allowed, dict):
            value = allowed[value]
        ss[key] = convert(value) if convert else value
    if bad:
        ss[f"_link_warn_{page}"] = ("This link asks for " + ", ".join(bad) + ", which is not a choice here; "
                                    "the page's defaults are used instead.")


def link_warning(page: str) -> None:
    msg = st.session_state.pop(f"_link_warn_{page}", None)
    if msg:
        st.warning(as_text(msg))  # the link's own values are in it: shown as text, nothing fetched


def default_index(key: str, options: list, default) -> int:
    """The index for a widget's default: 0 when a link already put a value under ``key`` (a
    widget given both a default and a session value makes Streamlit show a warning)."""
    if key in st.session_state or default not in options:
        return 0
    return options.index(default)


def session_id() -> str:
    """The id the job queue counts this visitor's jobs by: bound to the browser, so a new tab does
    not reset the per-session limit (``app.guard``)."""
    from app.guard import browser_session_id

    if "session_id" not in st.session_state:
        st.session_state["session_id"] = browser_session_id()
    return st.session_state["session_id"]


def phase_text(p: str) -> str:
    """A worker/queue progress message (``trace``, ``queued:2``, ``sweep:300``) in words."""
    head = p.split(":", 1)[0]
    text = PHASES.get(head, p)
    if head == "sweep" and ":" in p:
        text = f"Sweeping: length {p.split(':', 1)[1]}"
    elif head == "queued":
        text = f"Waiting in the queue ({p.split(':', 1)[1]} ahead)"
    elif head == "node":  # the Ray engine: the node the job started on (a name Ray reports)
        text = f"Running on node {p.split(':', 1)[1][:60]}"
    return text


class WaitBox:
    """What a page says while a job runs in the worker: a bordered box in ``holder`` (an
    ``st.empty``) with the phase it is in and, with ``lines``, each phase it went through. It
    has no animation: Streamlit's status box and spinner turn an icon for as long as the job
    runs, which in a browser drawing without a GPU took about a tenth of a core from a compile
    sharing the machine (0.4-0.5 s of the browser's CPU over 3.7 s of a 96-layer compile,
    0.1 s without: docs/performance.md), and from the kernels a job times. The phases say that
    it is alive. ``label`` is shown as written (``plain``: it may name a user's file)."""

    def __init__(self, holder, label: str, lines: bool = False):
        self._box = holder.container(border=True)
        self._title = self._box.empty()
        self._lines = lines
        self.update(label)

    def update(self, label: str) -> None:
        self._title.markdown(f":material/hourglass_top: **{plain(label)}**")

    def write(self, line: str) -> None:
        if self._lines:
            self._box.caption(plain(line))


def compile_with_status(job: Job, label: str = "Compiling…", use_cache: bool = True):
    """Run ``job`` through the worker, its phase in a ``WaitBox``; returns the Bundle, or None
    after showing the error (``use_cache=False``: run anew, ``runner.compile_bundle``)."""
    holder = st.empty()
    failed = None
    box = WaitBox(holder, label)
    try:
        b = runner.compile_bundle(job, session=session_id(), progress=lambda p: box.update(phase_text(p) + "…"),
                                  use_cache=use_cache).bundle
    except ExplorerError as e:
        failed = e
    except Exception as e:  # noqa: BLE001 - one line, never a traceback on the page
        failed = unexpected(e, "compile")
    holder.empty()
    if failed is not None:
        show_error(failed)
        return None
    return b


def gallery_job(name: str, **kw) -> Job:
    from sample_models import gallery

    entry = gallery()[name]
    return Job(kind="gallery", name=name, filename=str(entry.path), **kw)


def backend_choice(key: str, label: str = "Backend", with_target: bool = False, default: str = "auto") -> str:
    """The backend radio; ``with_target`` adds the GPU target compiled without a GPU (compile-only
    views: nothing is run)."""
    gpu = runner.gpu_present()
    target = runner.APP_GPU_TARGET
    options = ["auto", "cpu", "gpu"] + ([target] if with_target else [])
    help_text = "auto = GPU when one is present, else CPU" + ("" if gpu else " (CPU only here)")
    if with_target:
        help_text += (f". {target.upper()} (no GPU) = XLA's GPU compiler for an {target.upper()} without one "
                      "(compile only; without JAX's CUDA plugin, the gallery's recorded compiles)")
    return st.radio(label, options, key=key, horizontal=True, index=default_index(key, options, default),
                    format_func=lambda v: f"{v.upper()} (no GPU)" if v == target else v, help=help_text)


def presets_for(backend: str) -> dict[str, dict]:
    """The compiler-option presets that mean something for ``backend``: a compile for the GPU
    target without the device is never autotuned, so "Autotuning off" is left out there."""
    from analysis.options import presets

    pre = presets(platform_for(backend))
    if backend == runner.APP_GPU_TARGET:
        pre.pop("Autotuning off", None)
    return pre


def platform_for(backend: str) -> str:
    """The platform a backend choice compiles for (``auto``: the GPU where one is here)."""
    if backend == runner.APP_GPU_TARGET:
        return "gpu"
    return "gpu" if backend == "gpu" or (backend == "auto" and runner.gpu_present()) else "cpu"


# ----------------------------------------------------------------------------- presentation and sources

# Presentation mode: no sidebar, no toolbar, little padding, large summary numbers.
PRESENT_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
header[data-testid="stHeader"] { display: none !important; }
.block-container { padding: 0.6rem 1.2rem 1rem 1.2rem !important; max-width: 100% !important; }
[data-testid="stMetricValue"] { font-size: 2.3rem; }
[data-testid="stMetricLabel"] p { font-size: 1.05rem; }
.xe-routes { font-size: 1.05rem; }
.xe-chip { font-size: 1rem; }
[data-testid="stMarkdownContainer"] code { font-size: 0.95em; }
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] p { font-size: 1rem !important; }
</style>
"""


# Presentation mode on a page of app/sections/: what PRESENT_CSS does for the Explorer (no
# sidebar, the width of the screen), and the page's own text at 16 px or more
PAGE_PRESENT_CSS = """
<style>
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.15rem; }
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] p { font-size: 1rem !important; }
[data-testid="stTable"] table, [data-testid="stTable"] th, [data-testid="stTable"] td { font-size: 1rem !important; }
[data-testid="stWidgetLabel"] p, [data-testid="stExpander"] summary p { font-size: 1rem !important; }
[data-testid="stTooltipHoverTarget"] { font-size: 1rem; }
[data-testid="stMetricValue"] [data-testid="stMarkdownContainer"] p { font-size: 2.3rem; }
</style>
"""
PRESENT_WORDS = ("1", "true", "yes", "on")


def presentation(page: str) -> bool:
    """The page's "Presentation" toggle, in its top right corner (on when a link says
    ``present=1``, or when the session presented on the page before); on, it hides the sidebar
    and puts the page's text at 16 px or more. The choice carries over to the other pages
    (``presenting``: not a widget's key, so it outlives the page it was set on)."""
    ss = st.session_state
    key = f"present_{page}"
    if key not in ss:
        asked = str(st.query_params.get("present", "")).lower() in PRESENT_WORDS
        ss[key] = bool(ss.get("presenting")) or asked
    _, right = st.columns([6, 1.6])
    on = right.toggle("Presentation", key=key, help="For a projector: no sidebar, the page's text 16 px or more "
                                                    "(the sidebar's choices stay as they are)")
    ss.presenting = on
    if on:
        st.markdown(PRESENT_CSS + PAGE_PRESENT_CSS, unsafe_allow_html=True)
    return on


def table(df, present: bool, **kw):
    """A table: Streamlit's dataframe (sorting, picking a row), or in presentation mode a plain
    HTML table (its text is the page's, 16 px; the dataframe's canvas draws at its own small
    size). Returns what ``st.dataframe`` returns, None in presentation."""
    if present:
        styler = plain_cells(df)
        st.table(styler.hide(axis="index") if kw.get("hide_index") else styler)
        return None
    return st.dataframe(df, **kw)


def plain_cells(df):
    """``df`` (a frame, or a Styler as ``numbers_shown`` makes one) as ``st.table`` is to show
    it: a Styler whose text cells are shown as themselves. ``st.table`` reads each cell as
    Markdown, and a table's strings come from the program (names, op names, a module's
    path): a link or an image in one would be a link or a fetch (``app.safe.plain``). The
    columns the Styler formats already (numbers, in the project's units) keep their formats."""
    from app.safe import plain

    from pandas.api.types import is_numeric_dtype

    styler = df if not hasattr(df, "style") else df.style
    data = styler.data
    text = [c for c in data.columns if not is_numeric_dtype(data[c])]  # strings, and objects holding some
    if text:
        styler = styler.format(lambda v: plain(v) if isinstance(v, str) else v, subset=text)
    return styler


def code_source(key: str, label: str = "Your code") -> str:
    """Pasted code for a page, as the Explorer takes it: an editor holding the code last pasted
    in this session (the Explorer's, when there is one), to define ``model(...)`` and
    ``example_inputs()``. The text is only ever sent to the worker (a sandboxed process)."""
    from sample_models import DEFAULT_MODEL, gallery

    ss = st.session_state
    if key not in ss:
        ss[key] = explorer_state().code or gallery()[DEFAULT_MODEL].source
    return st.text_area(label, key=key, height=260,
                        help="Define model(...) and example_inputs() returning its arguments; it runs in a "
                             "sandboxed worker, exactly as `python FILE` would")


def code_job(source: str, **kw) -> Job:
    return Job(kind="code", source=source, filename="<pasted code>", name="pasted", **kw)


def projector_fonts(fig, size: int = 16) -> None:
    """A plotly figure's text for presentation mode: ``size`` px everywhere, the ticks 2 px less
    (set on each part: Streamlit's chart theme sets the ticks and the legend on its own, and the
    most specific setting wins)."""
    fig.update_layout(font=dict(size=size), legend=dict(font=dict(size=size)),
                      hoverlabel=dict(font=dict(size=size)))
    fig.update_xaxes(tickfont=dict(size=size - 2), title_font=dict(size=size))
    fig.update_yaxes(tickfont=dict(size=size - 2), title_font=dict(size=size))
    fig.update_annotations(font_size=size - 1)
