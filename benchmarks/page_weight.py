"""What a report and a notebook output weigh: ``xe.show`` of a two-op function, the report of the
same compile, and a recorded transformer block's report, each with its pieces side by side with
what they replaced: the charts as SVG (``chart_svg``) against the same figures with plotly.js
inlined once, the bundle's JSON and the DOT texts deflated against plain, the notebook output's
``srcdoc`` escaped for a double-quoted attribute against ``html.escape``. Last, a notebook of two
small ``xe.show`` cells executed by nbclient, as saved.

    .venv/bin/python benchmarks/page_weight.py [--no-notebook]
"""
import html
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax.numpy as jnp  # noqa: E402

import xla_explorer as xe  # noqa: E402
from analysis.bundle.core import Bundle  # noqa: E402
from analysis.render import memory as rm  # noqa: E402
from analysis.render.chart_svg import figure_svg  # noqa: E402
from analysis.render.charts import figure_makers  # noqa: E402
from analysis.render.report import html_report  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kb(n: int) -> str:
    return f"{n / 1000:,.1f} kB"


def charts_both_ways(b: Bundle) -> tuple[int, int]:
    """(bytes of the report's charts as SVG, bytes of the same figures as plotly divs with
    plotly.js inlined once)."""
    measured = bool((b.timings or {}).get("kernels"))
    names = ["Top kernels", "Treemap"] + (["Timeline", "Roofline"] if measured else [])
    makers = figure_makers(b)
    figs = [makers[n]() for n in names] + ([makers["Fusion off"]()] if b.fusion_comparison else [])
    if rm.usable(b.memory):
        figs += [rm.curve_figure(b.memory), rm.peak_figure(b.memory)]
    svg = sum(len(figure_svg(f)) for f in figs)
    plotly = sum(len(f.to_html(include_plotlyjs=i == 0, full_html=False)) for i, f in enumerate(figs))
    return svg, plotly


def pieces(name: str, b: Bundle, page: str) -> None:
    svg, plotly = charts_both_ways(b)
    bundle = re.search(r"id='xe-bundle'[^>]*>([^<]*)<", page)
    plain = len(b.to_json()) if bundle else 0
    print(f"{name}: page {kb(len(page))}")
    print(f"  charts: SVG {kb(svg)}, plotly with plotly.js {kb(plotly)} ({plotly / max(svg, 1):.0f}x)")
    if bundle:
        print(f"  bundle JSON: deflated {kb(len(bundle.group(1)))}, plain {kb(plain)}")


def main() -> None:
    def two_ops(x):
        return jnp.tanh(jnp.exp(x))

    t0 = time.perf_counter()
    e = xe.show(two_ops, jnp.ones((256,)))
    out = e._repr_html_()
    shown = time.perf_counter() - t0
    page = e.html()
    escaped = len(html.escape(page, quote=True))
    print(f"xe.show(two_ops): cell output {kb(len(out))} (srcdoc escaped with html.escape: {kb(escaped)}), "
          f"{shown:.2f} s")
    pieces("  its page (= the report of the same compile)", e.bundle, page)
    path = os.path.join(ROOT, "tests", "fixtures", "cpu", "transformer_block.bundle.json")
    with open(path, encoding="utf-8") as f:
        tb = Bundle.from_json(f.read())
    pieces("transformer_block report (recorded compile)", tb, html_report(tb))
    if "--no-notebook" in sys.argv:
        return
    import nbformat
    from nbclient import NotebookClient

    from tests.xla_explorer.test_notebook import SMALL_CELLS

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in SMALL_CELLS]
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": ROOT}}).execute()
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "small.ipynb")
        nbformat.write(nb, p)
        print(f"notebook of two small xe.show cells, executed: {kb(os.path.getsize(p))}")


if __name__ == "__main__":
    main()
