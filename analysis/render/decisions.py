"""Fusion decisions drawn: text for the CLI (``xla-explorer why``), an HTML section for the report,
and the rows the app's "Fusion decisions" table shows. Reads ``bundle.fusion_decisions``
(``analysis.fusion.decisions``); everything in it came from a compile's log, so the HTML escapes
every string."""

from __future__ import annotations

from html import escape

from analysis.fusion.decisions import edge_notes, records_touching
from analysis.fusion.glossary import gloss
from analysis.fusion.log import NOT_FUSED


def summary_line(fd: dict | None) -> str:
    if not fd:
        return "fusion decisions: not captured for this bundle"
    n = fd.get("crossing_edges", 0)
    return (f"{len(fd.get('records', []))} decisions logged ({fd.get('source', 'log')}, "
            f"{fd.get('platform') or '?'}); {fd.get('unmatched', 0)} could not be matched to the program. "
            f"{n} edges cross a kernel boundary: {fd.get('explained_edges', 0)} with a decision, "
            f"{fd.get('no_decision_logged', 0)} with no decision logged")


def rows(fd: dict | None, decision: str | None = None, reason: str | None = None,
         limit: int | None = None) -> tuple[list[dict], int]:
    """One plain row per record (what the table shows), filtered by decision and reason: the
    first ``limit`` rows (all without one) and how many records match. Only the rows shown are
    built: a row of each of a big program's decisions (its joined names) cost memory and time
    on every rerun that drew the table (docs/performance.md)."""
    out: list[dict] = []
    matched = 0
    for i, r in enumerate((fd or {}).get("records", [])):
        if decision and r.get("decision") != decision:
            continue
        if reason and r.get("reason") != reason:
            continue
        matched += 1
        if limit is not None and len(out) >= limit:
            continue
        how = r.get("how") or {}
        out.append({
            "#": i, "pass": r.get("pass_name", ""), "decision": r.get("decision", ""),
            "producer": r.get("producer", ""), "consumer": r.get("consumer", ""),
            "reason (XLA)": r.get("reason", ""), "in plain words": gloss(r.get("reason") or ""),
            "fusion": r.get("fusion") or "",
            "pre-optimization ops": ", ".join(r.get("producer_pre", []) + ["->"] + r.get("consumer_pre", [])),
            "kernels": ", ".join(sorted(set(r.get("producer_kernels", []) + r.get("consumer_kernels", [])))),
            "matched": "yes" if r.get("matched") else "no",
            "how": f"{how.get('producer', '')} / {how.get('consumer', '')}",
        })
    return out, matched


MAX_WHY_EDGES = 20000  # crossing edges sent to the graphs' "why not fused" panel (a bound on the payload)


def edge_why(fd: dict | None, limit: int = MAX_WHY_EDGES) -> dict:
    """What the graphs' "why (not) fused" panel needs for each pre-optimization edge that
    crosses a kernel boundary and has a decision: the same pick as ``edge_notes`` (a refusal
    first, the last of them), as ``[producer, consumer, row, decision, pass, reason_index]``,
    with the distinct reasons once each as ``[XLA's words, gloss]``. ``row`` is the record's
    ``#`` in the decisions table (``rows``). Plain strings: the frame shows them as text."""
    if not fd:
        return {"edges": [], "reasons": []}
    recs = fd.get("records", [])
    reasons: dict[str, int] = {}
    edges = []
    for e in fd.get("edges", []):
        idx = [i for i in e.get("records", []) if isinstance(i, int) and 0 <= i < len(recs)]
        if not idx:
            continue
        refused = [i for i in idx if recs[i].get("decision") == NOT_FUSED]
        i = (refused or idx)[-1]
        r = recs[i]
        words = r.get("reason") or ""
        if words not in reasons:
            reasons[words] = len(reasons)
        edges.append([e["producer"], e["consumer"], i, r.get("decision", ""), r.get("pass_name", ""), reasons[words]])
        if len(edges) >= limit:
            break
    return {"edges": edges, "reasons": [[w, gloss(w)] for w in reasons]}


def why_text(fd: dict | None, op: str | None = None, limit: int = 200) -> str:
    """The CLI's ``why``: every decision touching ``op`` (all decisions without one), then the
    edges across kernel boundaries with their reason."""
    lines = [summary_line(fd)]
    if not fd:
        return lines[0]
    recs = records_touching(fd, op) if op else fd.get("records", [])
    if op and not recs:
        lines.append(f"no decision names {op!r} (try a pre-optimization op, a kernel, or a name from the log)")
    for r in recs[:limit]:
        lines.append(_record_line(r))
    if len(recs) > limit:
        lines.append(f"... {len(recs) - limit} more")
    notes = edge_notes(fd)
    if notes:
        lines.append("")
        lines.append("edges that cross a kernel boundary (pre-optimization producer -> consumer):")
        for (p, c), note in notes.items():
            if op and op not in (p, c):
                continue
            lines.append(f"  {p} -> {c}: {note}")
    return "\n".join(lines)


def _record_line(r: dict) -> str:
    what = r.get("decision", "")
    pair = f"{r.get('producer', '')} -> {r.get('consumer', '')}"
    if r.get("fusion"):
        pair += f" (fusion {r['fusion']})"
    reason = r.get("reason") or "(no reason printed)"
    gl = f" — {gloss(r['reason'])}" if r.get("reason") and gloss(r["reason"]) else ""
    unmatched = "" if r.get("matched") else " [not matched to the program]"
    return f"[{r.get('pass_name', '')}] {what}: {pair}: {reason}{gl}{unmatched}"


def html_section(fd: dict | None) -> str:
    """The report's "Why (not) fused" section (escaped; an empty string without decisions)."""
    if not fd:
        return ""
    recs = fd.get("records", [])
    notes = edge_notes(fd)
    parts = ["<section id='fusion-decisions'><h2>Why (not) fused: XLA's fusion decisions</h2>",
             f"<p>{escape(summary_line(fd))}</p>"]
    if notes:
        parts.append("<h3>Edges that cross a kernel boundary</h3><table><tr><th>producer</th>"
                     "<th>consumer</th><th>XLA's decision</th></tr>")
        for (p, c), note in notes.items():
            parts.append(f"<tr><td>{escape(p)}</td><td>{escape(c)}</td><td>{escape(note)}</td></tr>")
        parts.append("</table>")
    refused = [r for r in recs if r.get("decision") == NOT_FUSED]
    if refused:
        parts.append("<h3>Refusals</h3><table><tr><th>pass</th><th>producer</th><th>consumer</th>"
                     "<th>reason (XLA's words)</th><th>in plain words</th></tr>")
        for r in refused[:300]:
            parts.append("<tr>" + "".join(f"<td>{escape(str(x))}</td>" for x in (
                r.get("pass_name", ""), r.get("producer", ""), r.get("consumer", ""), r.get("reason", ""),
                gloss(r.get("reason") or ""))) + "</tr>")
        parts.append("</table>")
    parts.append("</section>")
    return "\n".join(parts)
