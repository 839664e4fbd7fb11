"""Two compiles side by side: summary deltas and which kernel of one is which kernel of the other.

Kernels of two compiles of the same program (other options, another backend) are matched
first by instruction name (XLA's names are stable when the same pass made the same thing), then
by how much their source ops overlap: the Jaccard similarity of their ``op_names`` (the
``metadata.op_name`` of every instruction a kernel holds, which fusion keeps). Matching is 1:1
(``pair_kernels``), for the table; ``related`` is many-to-many (a fused kernel and the several
unfused kernels that do its ops), for linking the two graphs. Pure functions of Bundles/Kernels.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass

from analysis import measures as numbers
from analysis.measures import ROUNDS
from analysis.bundle.core import FusionSide
from analysis.program.kernels import Kernel, launching
from analysis.devices.collectives import collectives
from analysis.codegen import kernel_code
from analysis.program.links import op_count


MAX_SHARED = 64  # an op name carried by more kernels of B finds no candidates (pair_kernels)
MAX_CANDIDATES = 16  # candidates kept per kernel of A, the most similar


@dataclass(frozen=True)
class KernelMatch:
    a: str | None  # kernel name on side A (None: only on side B)
    b: str | None
    how: str  # "name" | "ops" | "only a" | "only b"
    score: float  # Jaccard similarity of the op_name sets (1.0 for identical)


def jaccard(x, y) -> float:
    x, y = set(x), set(y)
    if not x and not y:
        return 0.0
    return len(x & y) / len(x | y)


def pair_kernels(a: list[Kernel], b: list[Kernel], threshold: float = 0.0) -> list[KernelMatch]:
    """1:1 matching: same name first (with some op in common, or no op names on either side),
    then greedily the most similar op_name sets (above ``threshold``); the rest unmatched. Rows
    in side A's order, then B's leftovers."""
    a, b = launching(a), launching(b)
    bmap = {k.name: k for k in b}
    pairs: dict[str, tuple[str, str, float]] = {}
    used_b: set[str] = set()
    for k in a:
        o = bmap.get(k.name)
        if o is not None and (set(k.op_names) & set(o.op_names) or not (k.op_names or o.op_names)):
            pairs[k.name] = (o.name, "name", jaccard(k.op_names, o.op_names) if k.op_names else 1.0)
            used_b.add(o.name)
    # Candidates through an index of B's op names, not every pair (K^2: two 3,000-kernel
    # bundles took 32 s and 360 MB): a kernel of B is a candidate for a kernel of A when they
    # share a name that at most ``MAX_SHARED`` kernels of B carry (a name many kernels carry,
    # such as a broadcast every fusion copies, says little about which is which), and each
    # kernel of A keeps its ``MAX_CANDIDATES`` most similar ones.
    index: dict[str, list[Kernel]] = {}
    for o in b:
        if o.name not in used_b:
            for n in set(o.op_names):
                index.setdefault(n, []).append(o)
    cands = []
    for k in a:
        if k.name in pairs or not k.op_names:
            continue
        mine = set(k.op_names)
        lists = [got for got in map(index.get, mine) if got is not None and len(got) <= MAX_SHARED]
        found = {id(o): o for got in lists for o in got}
        scored = []
        for o in found.values():
            s = jaccard(mine, o.op_names)
            if s > threshold:
                scored.append((-s, k.name, o.name))
        cands += heapq.nsmallest(MAX_CANDIDATES, scored)
    cands.sort()
    for neg, an, bn in cands:
        if an in pairs or bn in used_b:
            continue
        pairs[an] = (bn, "ops", -neg)
        used_b.add(bn)
    out = []
    for k in a:
        if k.name in pairs:
            bn, how, s = pairs[k.name]
            out.append(KernelMatch(k.name, bn, how, round(s, 3)))
        else:
            out.append(KernelMatch(k.name, None, "only a", 0.0))
    out += [KernelMatch(None, o.name, "only b", 0.0) for o in b if o.name not in used_b]
    return out


def related(a, b) -> dict[str, list[str]]:
    """For each kernel of A, the kernels of B that do some of its ops, most overlapping first.

    Given two Bundles with provenance, the one definition of op <-> kernel links
    (``analysis.program.links.related``: by instruction, through each side's provenance). Given two lists
    of kernels (no provenance to follow), by op_name overlap (a same-named kernel with no op
    names counts too)."""
    if getattr(a, "provenance", None) is not None and getattr(b, "provenance", None) is not None:
        from analysis.program.links import related as linked

        return linked(a, b)
    a = getattr(a, "kernels", a)
    b = launching(getattr(b, "kernels", b))
    out: dict[str, list[str]] = {}
    for k in launching(a):
        mine = set(k.op_names)
        hits = []
        for o in b:
            common = len(mine & set(o.op_names))
            if common or (o.name == k.name and not mine and not o.op_names):
                hits.append((-common, -jaccard(mine, o.op_names), o.name))
        out[k.name] = [n for *_, n in sorted(hits)]
    return out


def missing_ops(a: list[Kernel], b: list[Kernel]) -> dict[str, list[str]]:
    """Per kernel of A, its op names that no kernel of B carries (empty lists left out). A name
    that is the scope of an op B carries counts as found: a scalar constant a fusion holds is named
    after its enclosing scope (``jit(relu)``), and unfused it is no kernel of its own."""
    have = {n for k in b for n in k.op_names}
    scopes = {n.rsplit("/", i)[0] for n in have for i in range(1, n.count("/") + 1)}
    out = {}
    for k in launching(a):
        miss = [n for n in k.op_names if n not in have and n not in scopes]
        if miss:
            out[k.name] = miss
    return out


# ----------------------------------------------------------------------------- summary deltas


def _step(b) -> float | None:
    s = numbers.step(b.timings)
    return s.median if s else None


def _call(b) -> float | None:
    s = numbers.call(b.timings)
    return s.median if s else None


def _collectives(b) -> int | None:
    post = b.module("hlo_after")
    return len(collectives(post)) if post is not None else None


def _collective_bytes(b) -> int | None:
    post = b.module("hlo_after")
    return sum(c.sent_bytes for c in collectives(post)) if post is not None else None


def _code_total(key: str):
    """A total of the generated code's facts (``analysis.codegen.kernel_code.totals``: loads or stores through
    the kernels' buffers, counted in the text), or None where the compile read no code."""
    return lambda b: kernel_code.totals(b)[key] if kernel_code.has_code(b) else None


SUMMARY_ROWS = (
    ("ops before optimization", lambda b: b.metrics.get("compute_ops_before"), "count"),
    ("kernels", lambda b: b.metrics.get("kernels_after"), "count"),
    ("multi-op fusions", lambda b: b.metrics.get("multi_op_fusions"), "count"),
    ("library calls", lambda b: (b.metrics.get("kernels_by_route") or {}).get("library"), "count"),
    ("devices", lambda b: b.devices, "count"),
    ("bytes moved by kernels (per device)", lambda b: b.metrics.get("fused_bytes"), "bytes"),
    ("collectives", _collectives, "count"),
    ("collective traffic per device (ring estimate)", _collective_bytes, "bytes"),
    ("fusion coverage", lambda b: b.metrics.get("fusion_coverage"), "fraction"),
    ("loads in the generated code", _code_total("global_loads"), "count"),
    ("stores in the generated code", _code_total("global_stores"), "count"),
    ("compile time", lambda b: (b.phase_seconds or {}).get("compile"), "seconds"),
    ("step (median, traced)", _step, "seconds"),
    ("call (median, no profiler)", _call, "seconds"),
)


def summary_deltas(a, b) -> list[dict]:
    """Rows ``{metric, kind, a, b, delta, ratio}`` for two Bundles (``None`` where either lacks it)."""
    rows = []
    for name, get, kind in SUMMARY_ROWS:
        x, y = get(a), get(b)
        delta = y - x if x is not None and y is not None else None
        ratio = y / x if x and y is not None else None
        rows.append({"metric": name, "kind": kind, "a": x, "b": y, "delta": delta, "ratio": ratio})
    return rows


def kernel_table(a, b, matches: list[KernelMatch] | None = None) -> list[dict]:
    """The kernel table diff of two Bundles: one row per match (or unmatched kernel)."""
    matches = matches if matches is not None else pair_kernels(a.kernels, b.kernels)
    ka, kb = {k.name: k for k in a.kernels}, {k.name: k for k in b.kernels}
    # a kernel's time: its share of its own side's step (analysis.measures.KernelTime)
    ta, tb = numbers.kernel_times(a.timings), numbers.kernel_times(b.timings)
    def ops(bundle, k):  # the one op count (provenance), op names where a bundle has none
        return op_count(bundle.provenance, k) if bundle.provenance is not None else len(k.op_names)

    rows = []
    for m in matches:
        x, y = ka.get(m.a) if m.a else None, kb.get(m.b) if m.b else None
        rows.append({
            "A kernel": m.a or "", "A route": x.route if x else "", "A ops": ops(a, x) if x else None,
            "A bytes": x.bytes if x else None,
            "A time (s)": ta[m.a].time_s if m.a in ta else None,
            "match": {"name": "same name", "ops": f"ops {m.score:.0%}", "only a": "only in A",
                      "only b": "only in B"}[m.how],
            "B kernel": m.b or "", "B route": y.route if y else "", "B ops": ops(b, y) if y else None,
            "B bytes": y.bytes if y else None,
            "B time (s)": tb[m.b].time_s if m.b in tb else None,
        })
    return rows


SIDE_TIMES = ("step_median_s", "step_q1_s", "step_q3_s", "step_min_s", "step_max_s", "call_median_s",
              "call_q1_s", "call_q3_s", "call_min_s", "device_busy_s", "traced_steps")


def fusion_side(kernels: list[Kernel], timings: dict | None, code: dict | None = None) -> FusionSide:
    """One side of a fusion comparison: its launching kernels' count, bytes and FLOPs, and its
    measured step and top kernels when it was measured; ``code``: its generated code's totals
    (``analysis.codegen.kernel_code.totals`` of that compile), None where its code was not read."""
    launch = launching(kernels)
    side = {
        "kernels": len(launch),
        "kernels_by_route": dict(Counter(k.route for k in launch)),
        "bytes": sum(k.bytes for k in launch),
        "flops": sum(k.flops for k in launch),
        **{k: None for k in SIDE_TIMES}, "iterations": None,
        "top_kernels": [],
        "code": dict(code) if code else None,
    }
    if timings:
        side.update({k: timings.get(k) for k in SIDE_TIMES})
        side["iterations"] = timings.get("iterations")
        rows = [r for r in timings.get("kernels", {}).values() if not r.get("inclusive")]
        side["top_kernels"] = [{"name": r["name"], "route": r["route"], "median_s": r["median_s"],
                                "calls": r["calls"]} for r in sorted(rows, key=lambda r: -r["median_s"])[:15]]
    return side


# ----------------------------------------------------------------------------- two XLA releases


def _signature(k: Kernel) -> tuple:
    """What makes two matched kernels the same kernel: its kind, library, op names, the ops it
    computes, its result (a dtype changed is a kernel changed) and bytes."""
    return (k.route, k.fusion_kind, k.library, k.custom_call_target, tuple(sorted(set(k.op_names))),
            tuple(sorted(k.fused_opcodes)), _result(k), k.bytes)


# ops that move or relabel data: XLA adds and drops them around a fusion as layouts change
_LAYOUT_OPS = frozenset({"parameter", "constant", "bitcast", "copy", "transpose", "reshape", "broadcast", "tuple",
                         "get-tuple-element"})


def _work(k: Kernel) -> Counter | None:
    """The ops a kernel computes, by opcode and count (None where the bundle did not say)."""
    return Counter(o for o in k.fused_opcodes if o not in _LAYOUT_OPS) if k.fused_opcodes else None


def _groups(a: list[Kernel], b: list[Kernel]) -> list[tuple[str, list[str]]]:
    """The kernels of ``a`` whose ops lie in two or more kernels of ``b`` (by op name): each with
    those kernels of ``b``, in ``b``'s order; only where the kernel of ``a`` computes all that
    they compute together (an op name is shared by every op one line of the program made, three
    converts say, so kernels can share names without one holding the others' work)."""
    index: dict[str, list[str]] = {}
    for o in launching(b):
        for n in set(o.op_names):
            index.setdefault(n, []).append(o.name)
    order = {o.name: i for i, o in enumerate(launching(b))}
    work = {o.name: _work(o) for o in launching(b)}
    out = []
    for k in launching(a):
        hit = {m for n in set(k.op_names) for m in index.get(n, ()) if len(index[n]) <= MAX_SHARED}
        if len(hit) < 2:
            continue
        mine, parts = _work(k), [work[m] for m in hit]
        if mine is not None and all(p is not None for p in parts) and sum(parts, Counter()) - mine:
            continue  # together they compute more than this kernel does: not its parts
        out.append((k.name, sorted(hit, key=order.get)))
    return out


MAX_REASONS = 4  # XLA's lines kept per kernel of a fusion that formed or broke


def _reasons(fd, names: list[str]) -> list[str]:
    from analysis.fusion.decisions import op_lines

    out: list[str] = []
    for n in names:
        for line in op_lines(fd, n):
            if line not in out:
                out.append(line)
    return out[:MAX_REASONS]


def _result(k: Kernel | None) -> str | None:
    """A kernel's result as ``bf16[4,64,256]`` (its layout left out): a dtype a release changed shows."""
    return k.shape.split("{")[0] if k is not None and k.shape else None


def _passes(log) -> Counter:
    return Counter(e.get("pass") or "?" for e in (log or []) if isinstance(e, dict))


def _peak(b) -> int | None:
    p = (b.memory or {}).get("peak") if isinstance(b.memory, dict) else None
    return p.get("bytes") if isinstance(p, dict) else None


def release_of(b) -> str:
    """A bundle's jax release in words: ``jax 0.10.2 (jaxlib 0.10.2; XLA extension 467, ...)``."""
    e = b.environment or {}
    xla = f"; XLA {e['xla']}" if e.get("xla") else ""
    return f"jax {e.get('jax', '?')} (jaxlib {e.get('jaxlib', '?')}{xla})"


def versions_diff(a, b) -> dict:
    """One program compiled by two XLA releases (two Bundles), what changed: ``kernels`` (each
    match, ``status`` same / changed / only in A / only in B), ``formed`` (a kernel of B that does
    the ops of several kernels of A: a fusion B made, with XLA's reasons from both sides' fusion
    logs), ``broken`` (the converse), ``passes`` (the passes each pipeline ran that changed the
    module, counted side by side; ``only_a``/``only_b``: present in one release only), ``rows``
    (``summary_deltas`` with the memory peak), and ``times`` (step and call: each side's spread
    and a verdict only where the spreads part, ``analysis.measures.verdict``)."""
    matches = pair_kernels(a.kernels, b.kernels)
    ka, kb = {k.name: k for k in a.kernels}, {k.name: k for k in b.kernels}
    kernels = []
    for m in matches:
        x, y = ka.get(m.a), kb.get(m.b)
        status = "only in A" if y is None else "only in B" if x is None else \
            "same" if _signature(x) == _signature(y) else "changed"
        kernels.append({"status": status, "a": m.a, "b": m.b, "how": m.how, "score": m.score,
                        "a_route": x.route if x else None, "b_route": y.route if y else None,
                        "a_library": x.library if x else None, "b_library": y.library if y else None,
                        "a_bytes": x.bytes if x else None, "b_bytes": y.bytes if y else None,
                        "a_shape": _result(x), "b_shape": _result(y)})
    counts = Counter(r["status"] for r in kernels)
    fa, fb = a.fusion_decisions, b.fusion_decisions
    # a fusion formed or broke only among the kernels that changed: a kernel the same on both
    # sides is neither (op names repeat across kernels: a broadcast XLA copies into several)
    same_a = {r["a"] for r in kernels if r["status"] == "same"}
    same_b = {r["b"] for r in kernels if r["status"] == "same"}
    ra = [k for k in a.kernels if k.name not in same_a]
    rb = [k for k in b.kernels if k.name not in same_b]
    formed = [{"b": k, "a": parts, "reasons_b": _reasons(fb, [k]), "reasons_a": _reasons(fa, parts)}
              for k, parts in _groups(rb, ra)]
    broken = [{"a": k, "b": parts, "reasons_a": _reasons(fa, [k]), "reasons_b": _reasons(fb, parts)}
              for k, parts in _groups(ra, rb)]
    pa, pb = _passes(a.pass_log), _passes(b.pass_log)
    names = list(dict.fromkeys([*pa, *pb]))
    passes = {"recorded": bool(a.pass_log) and bool(b.pass_log),
              "counts": [{"pass": n, "a": pa.get(n, 0), "b": pb.get(n, 0)} for n in names],
              "only_a": [n for n in pa if n not in pb], "only_b": [n for n in pb if n not in pa],
              "snapshots": (len(a.pass_log or []), len(b.pass_log or []))}
    rows = summary_deltas(a, b)
    x, y = _peak(a), _peak(b)
    rows.append({"metric": "memory peak", "kind": "bytes", "a": x, "b": y,
                 "delta": y - x if x is not None and y is not None else None,
                 "ratio": y / x if x and y is not None else None})
    times = {}
    for what, get in (("step", numbers.step), ("call", numbers.call)):
        sa, sb = get(a.timings), get(b.timings)
        times[what] = {"a": sa, "b": sb, "verdict": numbers.verdict(sa, sb),
                       "rounds": min((x.timings or {}).get("rounds") or 1 for x in (a, b))}
    return {"a": release_of(a), "b": release_of(b), "kernels": kernels, "counts": dict(counts),
            "formed": formed, "broken": broken, "passes": passes, "rows": rows, "times": times}


# ----------------------------------------------------------------------------- measured side by side

def measured_alternately(measure_one, rounds: int = ROUNDS) -> tuple | None:
    """Two sides measured so that both see the same machine: ``rounds`` runs each, alternated
    (A B, then B A, A B, ...), so a machine getting slower or faster during the runs is felt by
    both. ``measure_one(side, run)`` (side 0 for A, 1 for B; run from 1 to ``rounds``) compiles
    and measures one side once and returns its bundle, or None when it failed (then nothing more
    is run and None is returned). Returns the two bundles, each the last of its side's runs with
    its step and call taken over all of them (``combined_rounds``). The one way the CLI's ``compare --measure`` and the Compare page's
    *Measure both* time two compiles."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    runs: list[list] = [[], []]
    for i in range(rounds):
        for side in ((0, 1) if i % 2 == 0 else (1, 0)):
            b = measure_one(side, i + 1)
            if b is None:
                return None
            runs[side].append(b)
    return combined_rounds(runs[0]), combined_rounds(runs[1])


def combined_rounds(bundles: list):
    """The last of one side's measured bundles, its step and call spreads taken over the
    medians of all its runs (``analysis.measures.spread``: the median, quartiles, least and
    most of the runs' medians), and ``rounds``, how many runs they are."""
    last = bundles[-1]
    t = dict(last.timings or {})
    for what, get in (("step", numbers.step), ("call", numbers.call)):
        meds = [s.median for s in (get(b.timings) for b in bundles) if s is not None]
        sp = numbers.spread(meds)
        if sp is not None and len(meds) > 1:
            t.update({f"{what}_median_s": sp.median, f"{what}_q1_s": sp.q1, f"{what}_q3_s": sp.q3,
                      f"{what}_min_s": sp.lo, f"{what}_max_s": sp.hi})
    t["rounds"] = len(bundles)
    last.timings = t
    return last
