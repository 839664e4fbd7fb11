"""The crossing edges of a bundle's fusion decisions: each pre-optimization edge whose two ops
ended in kernels that share none (the value crosses a kernel boundary through memory), with the
decisions about it. Made with the decisions where the provenance is known
(``decisions.decisions_for_bundle``), or later, in place, for decisions a worker sent before its
optimized module was analyzed (``add_edges``: the parent makes them with its own analysis). Reads
no text: the server imports it."""

from __future__ import annotations

from analysis import columns
from analysis.hlo import Module
from analysis.program.provenance import compute_ops


def crossing_edges(pre: Module, pre_to_kernels: dict) -> list[tuple[str, str]]:
    """Pre-optimization edges producer -> consumer between two compute ops that both reached a
    kernel and share none (the value crosses a kernel boundary through memory)."""
    ops = {i.name: i for i in compute_ops(pre)}
    out = []
    for inst in ops.values():
        ck = set(pre_to_kernels.get(inst.name, []))
        if not ck:
            continue
        for o in dict.fromkeys(inst.operands):
            if o not in ops or o == inst.name:
                continue
            pk = set(pre_to_kernels.get(o, []))
            if pk and not (pk & ck):
                out.append((o, inst.name))
    return out


# Where a bundle's decisions came without their edges (a worker's, sent before its optimized
# module was analyzed): ``add_edges`` makes them with the provenance, and takes this away.
EDGES_PENDING = "edges_pending"


def add_edges(fd, pre: Module | None, provenance) -> None:
    """The crossing edges of decisions that came without them (``EDGES_PENDING``), made in
    place as ``decisions_for_bundle`` makes them, from ``pre`` and the kernels its ops ended in
    (the records' kernels derived first: ``derive_decision_kernels``). Records by column or as
    dicts; their op lists read leniently (a list of names, else none)."""
    if not isinstance(fd, dict) or not fd.get(EDGES_PENDING) or pre is None or provenance is None:
        return
    p2k = getattr(provenance, "pre_to_kernels", None) or {}
    fd.update(edges_of(fd.get("records") or [], pre, p2k))
    fd.pop(EDGES_PENDING, None)


def _names(v) -> list:
    return [n for n in v if type(n) is str] if type(v) is list else []


def edges_of(records, pre: Module | None, p2k: dict) -> dict:
    """The crossing edges of ``pre`` (``crossing_edges``), each with the records naming both its
    ends (else, a record about the same two kernels naming one end), and their counts."""
    edges = crossing_edges(pre, p2k) if pre is not None else []
    # each record's op lists and kernels (by column: read once per column, not per row)
    if isinstance(records, columns.Table):
        cols = {k: records.column(k) for k in ("producer_pre", "consumer_pre", "matched",
                                               "producer_kernels", "consumer_kernels")}
    else:
        cols = {k: [r.get(k) if type(r) is dict else None for r in records]
                for k in ("producer_pre", "consumer_pre", "matched", "producer_kernels", "consumer_kernels")}
    prods = list(map(_names, cols["producer_pre"]))
    cons = list(map(_names, cols["consumer_pre"]))
    # the records naming both ends of each crossing edge (only those: a big program's records
    # name ten times more pairs than it has crossing edges)
    consumers_of: dict[str, set[str]] = {}
    for p, c in edges:
        consumers_of.setdefault(p, set()).add(c)
    by_edge: dict[tuple[str, str], list[int]] = {}
    for i, ps in enumerate(prods):
        for p in ps:
            wanted = consumers_of.get(p)
            if wanted:
                for c in cons[i]:
                    if c in wanted and p != c:
                        by_edge.setdefault((p, c), []).append(i)
    # the matched records by the ops they name on each side, for the edges no record names
    # both ends of (looked up, not scanned: a scan per edge grew with edges x records), and
    # only for those edges' ends
    lack_p = {p for p, c in edges if (p, c) not in by_edge}
    lack_c = {c for p, c in edges if (p, c) not in by_edge}
    by_producer: dict[str, list[int]] = {}
    by_consumer: dict[str, list[int]] = {}
    if lack_p:
        for i, matched in enumerate(cols["matched"]):
            if matched:
                for n in dict.fromkeys(n for n in prods[i] if n in lack_p):
                    by_producer.setdefault(n, []).append(i)
                for n in dict.fromkeys(n for n in cons[i] if n in lack_c):
                    by_consumer.setdefault(n, []).append(i)
    pks, cks = cols["producer_kernels"], cols["consumer_kernels"]
    edge_rows = []
    for p, c in edges:
        ids, how = by_edge.get((p, c), []), "ops"
        if not ids:
            # a decision about the same two kernels that names one end of the edge (the other
            # end was folded away or renamed before the pass ran, e.g. a reshape that became a bitcast)
            pk, ck = set(p2k.get(p, [])), set(p2k.get(c, []))
            hit = {i for i in by_producer.get(p, ()) if ck.intersection(_names(cks[i]))}
            hit.update(i for i in by_consumer.get(c, ()) if pk.intersection(_names(pks[i])))
            ids = sorted(hit)
            how = "kernels" if ids else ""
        edge_rows.append({"producer": p, "consumer": c, "records": ids, "how": how})
    explained = sum(1 for e in edge_rows if e["records"])
    return {"edges": edge_rows, "crossing_edges": len(edge_rows), "explained_edges": explained,
            "no_decision_logged": len(edge_rows) - explained}
