"""Presentation mode's graphs (analysis.render.graph: to_dot(present=True, fold=...), fold_bands;
analysis.render.present_graph: the layout picked for a projector's pane; app.graph_payload.add_present)."""

from __future__ import annotations

import re

import pytest

from analysis.render.graph import PRESENT_FONT, Cluster, Edge, GraphSpec, Node, fold_bands


def _chain(n: int, clusters: dict[str, range] | None = None) -> GraphSpec:
    """Ops a0 -> a1 -> ... -> a(n-1), with the ops of each ``clusters`` range in that cluster."""
    g = GraphSpec("chain")
    for cid in clusters or {}:
        g.clusters[cid] = Cluster(cid, cid)
    for i in range(n):
        cl = next((c for c, r in (clusters or {}).items() if i in r), None)
        g.nodes[f"op:a{i}"] = Node(f"op:a{i}", f"add\nf32[{i},8]{{1,0}}", "op", cluster=cl)
        if i:
            g.edges.append(Edge(f"op:a{i - 1}", f"op:a{i}", f"f32[{i - 1},8]{{1,0}}"))
    return g


def test_fold_cuts_a_chain_into_even_bands_in_order():
    bands = fold_bands(_chain(12), 3)
    assert [bands[f"op:a{i}"] for i in range(12)] == [0] * 4 + [1] * 4 + [2] * 4


def test_fold_never_cuts_through_a_cluster():
    # ops 4..8 are one fusion: an even cut (at 6) would go through it, so it is moved to its edge
    bands = fold_bands(_chain(12, {"f:x": range(4, 9)}), 2)
    assert len({bands[f"op:a{i}"] for i in range(4, 9)}) == 1
    assert {bands["op:a0"], bands["op:a11"]} == {0, 1}


def test_present_dot_is_dense_and_its_folds_do_not_rank_across_bands():
    g = _chain(12)
    dot = g.to_dot(present=True, fold=3)
    assert "label=\"f32" not in dot  # no shapes on edges
    assert 'label="add"' in dot and 'label="add\\nf32' not in dot  # one line per op
    assert "f32[3,8]{1,0}" in dot  # the shape stays in the op's tooltip
    assert set(re.findall(r"fontsize=(\d+)", dot)) == {str(PRESENT_FONT)}  # one text size
    assert dot.count("constraint=false") == 2  # the two edges between the three bands
    normal = g.to_dot()
    assert 'label="add\\nf32[3,8]{1,0}"' in normal and "constraint=false" not in normal  # the usual drawing unchanged


def test_present_dot_picks_a_layout_that_fits_the_pane():
    from analysis.render.layout_cache import layout_svg
    from analysis.render.present_graph import LEGIBLE_SCALE, fit_scale, present_dot, svg_size

    g = _chain(24)  # far too tall for a wide, short pane unfolded
    wide = (900, 300)
    assert fit_scale(svg_size(layout_svg(g.to_dot(present=True))), wide) < LEGIBLE_SCALE
    picked = present_dot(g, wide)
    assert fit_scale(svg_size(layout_svg(picked)), wide) >= LEGIBLE_SCALE
    assert "constraint=false" in picked  # folded to do so


def test_present_dot_leaves_a_big_graph_alone():
    from analysis.render.present_graph import PRESENT_MAX_NODES, present_dot

    assert present_dot(_chain(PRESENT_MAX_NODES + 1)) is None


def test_add_present_adds_each_sides_projector_drawing_once(gallery_bundle):
    from app.graph_payload import add_present, graph_payload

    b = gallery_bundle("mlp")
    p = graph_payload(b)
    n = {s: len(g["svgs"]) for s, g in p["graphs"].items()}
    rev = p.get("rev", 0)
    assert add_present(b, p, "default")
    for side, g in p["graphs"].items():
        i = g["present"]["default"]
        assert i == n[side] and len(g["svgs"]) == n[side] + 1  # a new SVG, appended
        assert 'class="graph"' in g["svgs"][i]
    assert p["rev"] == rev + 1
    assert not add_present(b, p, "default")  # once
    assert not add_present(b, p, "no such view")
    with pytest.raises(KeyError):
        p["graphs"]["pre"]["present"]["collapsed"]
