"""The one view model of a bundle's graphs: which views exist, which opens first, which are laid
out before the first graph shows and how a layer opens (``graph_views``), and each view's graphs
(``variant_specs``). The app's graph component (``app.graph_payload``) and the HTML report
(``analysis.render.report``, ``report_layers``) both ask them; they differ only in how they draw.

The views: ``default`` (the lesson's fusions open), ``expanded`` (every fusion and name scope
open), ``collapsed`` (every fusion one box), and for a model with two layers or more
``layers`` (both graphs collapsed to the model's layers) and ``layers:<path>`` (one layer open
in place). A big program (more than ``layer_graph.OPEN_AS_LAYERS`` instructions before
optimization, with layers) opens as its layers and only that view is laid out ahead; a layer
of it then opens alone, with its neighbours as boxes (laid out in the middle of all the others
it would cost what the whole layers view costs). Any other program opens at ``default``."""

from __future__ import annotations

import dataclasses

from analysis.bundle.core import Bundle
from analysis.measures import kernel_times
from analysis.render.graph import GraphSpec

BASIC_VIEWS = ("default", "expanded", "collapsed")


@dataclasses.dataclass(frozen=True)
class GraphViews:
    """The views of one bundle's graphs (names as above), in the order the app offers them."""

    names: tuple[str, ...]
    first: str  # the view the graphs open at
    eager: tuple[str, ...]  # laid out before the first graph shows; the others when asked for

    @property
    def as_layers(self) -> bool:
        """Whether the graphs open collapsed to the model's layers (a big program)."""
        return self.first == "layers"

    @property
    def lazy(self) -> list[str]:
        """The views laid out only when the user asks for one."""
        return [n for n in self.names if n not in self.eager]

    @property
    def layer_alone(self) -> bool:
        """Whether a layer opens with its neighbours only, not in the middle of every layer."""
        return self.as_layers


def graph_views(bundle: Bundle) -> GraphViews:
    """The views of ``bundle``'s graphs (``GraphViews``)."""
    from analysis.program.layers import layers_of_bundle
    from analysis.render import layer_graph

    layered = layer_graph.variant_names(bundle, layers_of_bundle(bundle))
    pre = bundle.module("hlo_before")
    big = bool(layered) and pre is not None and len(pre.entry.instructions) > layer_graph.OPEN_AS_LAYERS
    # each layer opened is laid out when it is asked for, for every program alike: a view with
    # one layer open is a layout of the whole module, and laying them all out ahead was most of
    # a small program's payload (docs/performance.md)
    eager = ("layers",) if big else BASIC_VIEWS + tuple(layered[:1])
    return GraphViews(names=BASIC_VIEWS + tuple(layered), first="layers" if big else "default", eager=eager)


def variant_specs(b: Bundle, names, isolate: bool = False,
                  sides: tuple[str, ...] = ("pre", "post")) -> dict[str, dict[str, GraphSpec]]:
    """The GraphSpecs of the views ``names`` (of ``BASIC_VIEWS`` and the layers views, see
    ``analysis.render.layer_graph``; ``isolate``: an opened layer with its neighbours only), by
    side, of the ``sides`` asked for; a side without its module is left out. Only the graph
    before optimization reads the fusion decisions (each boundary's "why"): the optimized one
    is the same with or without them, so it can be made before they are in."""
    from analysis.fusion.decisions import edge_notes
    from analysis.render.layer_graph import layer_variants
    from analysis.render.module_graphs import post_graph, pre_graph

    pre_mod = b.module("hlo_before") if "pre" in sides else None
    post_mod = b.module("hlo_after") if "post" in sides else None
    timings = kernel_times(b.timings) or None  # the labels' time and share: one object (docs/numbers.md)
    notes = edge_notes(b.fusion_decisions) if pre_mod is not None else None  # why XLA did (not) fuse each boundary
    specs: dict[str, dict[str, GraphSpec]] = {"pre": {}, "post": {}}
    basic = [n for n in BASIC_VIEWS if n in names]
    if pre_mod is not None:
        args = {"default": {}, "expanded": {"collapse": False}, "collapsed": {"collapse": True}}
        for n in basic:
            specs["pre"][n] = pre_graph(pre_mod, edge_notes=notes, **args[n])
    if post_mod is not None:
        fusions = {k.name for k in b.kernels if k.opcode == "fusion" and k.fused_ops}
        kw = dict(timings=timings, provenance=b.provenance)
        args = {"default": {}, "expanded": {"expand": fusions, "collapse_all": False}, "collapsed": {"collapse_all": True}}
        for n in basic:
            specs["post"][n] = post_graph(post_mod, b.kernels, **args[n], **kw)
    layered = [n for n in names if n.startswith("layers")]
    if layered:
        for side, variants in layer_variants(b, edge_notes=notes, timings=timings, names=layered,
                                             isolate=isolate, sides=sides).items():
            specs[side].update(variants)
    return {side: v for side, v in specs.items() if v}
