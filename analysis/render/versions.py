"""One program through two XLA releases, in words: the CLI's text of
``analysis.studies.compare.versions_diff`` (the Compare page draws the same dict)."""

from __future__ import annotations

from analysis.measures import spread_text
from analysis.render.format import human_bytes, human_seconds

MAX_KERNEL_LINES = 40


def _value(kind: str, v) -> str:
    if v is None:
        return "–"
    if kind == "bytes":
        return human_bytes(v)
    if kind == "seconds":
        return human_seconds(v)
    if kind == "fraction":
        return f"{v:.0%}"
    return f"{v:,}" if isinstance(v, int) else f"{v:.3g}"


def versions_text(d: dict) -> str:
    """The diff as text: the two releases, the summary rows side by side, the times with their
    spreads and verdicts, the kernels that changed, the fusions formed or broken with XLA's
    reasons, and the passes."""
    out = [f"A: {d['a']}", f"B: {d['b']}", ""]
    rows = [r for r in d["rows"] if r["a"] is not None or r["b"] is not None]
    w = max([len(r["metric"]) for r in rows] + [10])
    out.append(f"{'':{w}s} {'A':>14s} {'B':>14s}")
    for r in rows:
        out.append(f"{r['metric']:{w}s} {_value(r['kind'], r['a']):>14s} {_value(r['kind'], r['b']):>14s}")
    for what, t in d["times"].items():
        if t["a"] is None and t["b"] is None:
            continue
        out.append(f"{what} time: A {spread_text(t['a'], human_seconds)}, B {spread_text(t['b'], human_seconds)}"
                   f" -> B is {t['verdict'] or 'not comparable'}"
                   + (f" (spread over {t['rounds']} alternated runs each)" if t["a"] and t["b"] and t["rounds"] > 1
                      else ""))
    c = d["counts"]
    out += ["", "kernels matched by provenance: " + ", ".join(
        f"{c.get(s, 0)} {s}" for s in ("same", "changed", "only in A", "only in B"))]
    shown = [r for r in d["kernels"] if r["status"] != "same"]
    for r in shown[:MAX_KERNEL_LINES]:
        a, b = (f"{r[s]} ({', '.join(x for x in (r.get(s + '_shape'), r[s + '_library'] or r[s + '_route']) if x)}, "
                f"{human_bytes(r[s + '_bytes'])})" if r[s] else "–" for s in ("a", "b"))
        out.append(f"  {r['status']:10s} {a}  ->  {b}")
    if len(shown) > MAX_KERNEL_LINES:
        out.append(f"  … and {len(shown) - MAX_KERNEL_LINES} more")
    for key, title, one, many in (("formed", "fusions formed in B", "b", "a"), ("broken", "fusions broken in B", "a", "b")):
        if d[key]:
            out += ["", f"{title} ({len(d[key])}):"]
        for f in d[key]:
            side = one.upper()
            out.append(f"  {side} {f[one]} does the ops of {many.upper()} " + ", ".join(f[many]))
            for s in (one, many):
                for line in f[f"reasons_{s}"]:
                    out.append(f"    {s.upper()}: {line}")
    p = d["passes"]
    if p["recorded"]:
        out += ["", f"pass pipeline: {p['snapshots'][0]} snapshots in A, {p['snapshots'][1]} in B"]
        if p["only_a"]:
            out.append("  passes only in A: " + ", ".join(p["only_a"]))
        if p["only_b"]:
            out.append("  passes only in B: " + ", ".join(p["only_b"]))
        changed = [r for r in p["counts"] if r["a"] != r["b"] and r["a"] and r["b"]]
        for r in changed:
            out.append(f"  {r['pass'][:50]:50s} changed the module {r['a']} times in A, {r['b']} in B")
    return "\n".join(out)
