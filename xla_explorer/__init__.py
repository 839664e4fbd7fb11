"""XLA Explorer in a notebook: ``import xla_explorer as xe; xe.show(fn, *args)``.

``show`` compiles ``fn`` for ``args`` with XLA here, in the notebook's own kernel (it is the
user's own code on the user's own machine, so no sandbox is involved, unlike the app's server),
analyzes the compile as the app does and returns an ``Explorer`` that Jupyter, JupyterLab,
VS Code and Colab draw inline: the report's page (``analysis.render.report.html_report``: the
two graphs, selection and provenance, search, the summary strip, the kernel table, the charts
drawn as SVG) in an ``<iframe srcdoc>``, so its one script and its styles run the same everywhere and touch
nothing of the notebook's page. ``show`` also takes a ``jax.stages.Lowered`` or ``Compiled``, an
HLO text, a bundle or a path (a bundle, HLO text, dump zip or model file). ``measure=True``
times every kernel (docs/numbers.md).

``%load_ext xla_explorer`` adds the ``%%xla_explorer`` cell magic: the cell is a model file, as
the app's pasted code is (a ``model`` function or module and ``example_inputs()``), run in a
fresh ``__main__`` module of its own, and shown.

A selection made in the drawing stays in it: the iframe has no channel back to the kernel.
"""

from __future__ import annotations

import html
import inspect
import os
import shlex

from analysis.bundle.core import Bundle, bundle_from_hlo
from analysis.cli import load_any
from analysis.errors import ExplorerError
from analysis.render.report import ReportAhead, html_report
from analysis.service.job import upload_job

__all__ = ["Explorer", "show", "load_ipython_extension"]

HEIGHT = 900  # pixels of the inline frame; the page scrolls inside it


class Explorer:
    """A compile shown inline. ``bundle`` is the analysis (``analysis.bundle.core.Bundle``);
    ``save(path)`` writes the self-contained page, ``html()`` returns it."""

    def __init__(self, bundle, height: int = HEIGHT):
        self.bundle = bundle
        self.height = int(height)
        self._page: str | None = None

    def html(self) -> str:
        if self._page is None:
            self._page = html_report(self.bundle)
        return self._page

    def save(self, path: str) -> str:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.html())
        return path

    def _repr_html_(self) -> str:
        # srcdoc holds the whole page as a double-quoted attribute: only & and " need escaping
        # there (html.escape's &lt; &gt; &#x27; made a page a fifth bigger); the frame runs its
        # script apart from the notebook's page (JupyterLab, VS Code and Colab all run scripts in it)
        page = self.html().replace("&", "&amp;").replace('"', "&quot;")
        return (f"<iframe class='xla-explorer' title='XLA Explorer: {html.escape(self.bundle.title)}' "
                f"style='width:100%;height:{self.height}px;border:1px solid #ddd;border-radius:4px' "
                f"srcdoc=\"{page}\"></iframe>")

    def __repr__(self) -> str:
        m = self.bundle.metrics or {}
        return (f"<XLA Explorer: {self.bundle.title}: {m.get('compute_ops_before', '?')} ops -> "
                f"{m.get('kernels_after', '?')} kernels>")


def _source_of(fn) -> tuple[str, str]:
    target = getattr(fn, "__wrapped__", fn)
    try:
        return inspect.getsource(target), inspect.getsourcefile(target) or "<notebook>"
    except (OSError, TypeError):
        return "", "<notebook>"


def _from_function(fn, args: tuple, backend: str, options: dict | None, measure: bool, title: str | None):
    from analysis.compile import recipe

    source, filename = _source_of(fn)
    name = title or getattr(getattr(fn, "__wrapped__", fn), "__name__", None) or "function"
    loaded = recipe.LoadedModel(model=fn, inputs=tuple(args), source=source, filename=filename, name=name)
    # the page's layer graphs made beside the compile, as the command's report does
    c = recipe.compile(loaded, backend, options, source_kind="code", ahead=ReportAhead())
    return recipe.measured(c, measure_it=measure, compare=False).bundle


def _from_stage(stage, title: str | None):
    """A ``jax.stages.Lowered`` (compiled here, with its HLO before optimization) or
    ``Compiled`` (its optimized HLO only)."""
    before = None
    if hasattr(stage, "compile") and hasattr(stage, "as_text"):  # Lowered
        before = stage.as_text(dialect="hlo")
        stage = stage.compile()
    after = stage.as_text()
    return bundle_from_hlo(after, title or "compiled", before_text=before)


def _from_text_or_path(x: str, title: str | None):
    """A bundle's JSON, an HLO text or a path, opened by the one gate every front end uses
    (``analysis.inputs``), here in the notebook's own process (the user's own files)."""
    from analysis.service.worker_main import execute

    head = x.lstrip()[:20]
    if head.startswith(("{", "HloModule")):
        name = f"{title or ('bundle' if head.startswith('{') else 'hlo')}{'.json' if head.startswith('{') else '.hlo'}"
        return execute(upload_job(name, x.encode()))
    if os.path.exists(x):
        return load_any(x, trusted=True)
    raise ExplorerError("load", "not an HLO text (it starts with HloModule), a bundle's JSON or an existing path",
                        x[:80])


def show(obj, *args, measure: bool = False, backend: str = "auto", options: dict | None = None,
         title: str | None = None, height: int = HEIGHT) -> Explorer:
    """The explorer for ``obj``: a function (compiled for ``*args``), a ``jax.stages.Lowered``
    or ``Compiled``, an HLO text, a bundle (``Bundle`` or its JSON) or a path. ``measure`` runs
    and times a function's compile; ``backend`` and ``options`` are the compile's."""
    if isinstance(obj, Bundle):
        b = obj
    elif isinstance(obj, str):
        b = _from_text_or_path(obj, title)
    elif hasattr(obj, "as_text") and (hasattr(obj, "compile") or hasattr(obj, "cost_analysis")):
        b = _from_stage(obj, title)
    elif callable(obj):
        b = _from_function(obj, args, backend, options, measure, title)
    else:
        raise TypeError(f"xla_explorer.show takes a function, a jax Lowered/Compiled, an HLO text, a bundle "
                        f"or a path, not {type(obj).__name__}")
    return Explorer(b, height)


def _cell_magic(line: str, cell: str):
    """``%%xla_explorer [--measure] [--backend cpu|gpu|auto]``: the cell as a model file."""
    from analysis.compile import recipe
    from analysis.compile.load import as_main, load_source

    words = shlex.split(line)
    measure = "--measure" in words
    backend = words[words.index("--backend") + 1] if "--backend" in words[:-1] else "auto"
    loaded = load_source(cell, "<cell>", "cell")
    with as_main(loaded.module):
        c = recipe.measured(recipe.compile(loaded, backend, None, source_kind="code", ahead=ReportAhead()),
                            measure_it=measure, compare=False)
    return Explorer(c.bundle)


def _one_line(shell, etype, value, tb, tb_offset=None):
    """An ExplorerError in a notebook cell: its one line, where it happened, no traceback."""
    print(f"xla-explorer: {value.one_line()}")


def _install_error_line(ipython) -> None:
    ipython.set_custom_exc((ExplorerError,), _one_line)


def load_ipython_extension(ipython) -> None:
    """``%load_ext xla_explorer``: registers the ``%%xla_explorer`` cell magic."""
    ipython.register_magic_function(_cell_magic, magic_kind="cell", magic_name="xla_explorer")
    _install_error_line(ipython)


def _in_ipython():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


if (_shell := _in_ipython()) is not None:  # imported in a notebook: its errors read as one line there too
    _install_error_line(_shell)
