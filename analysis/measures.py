"""The product's measured numbers, each defined once (docs/numbers.md says what each means and
what it does not). Every view, the CLI and the report read a measured bundle through these
helpers, never through its raw keys, so one number has one definition everywhere.

- **step**: one execution of the compiled program as the profiler saw it, from its first
  kernel's start to its last kernel's end (``timings["step_median_s"]``: the median over the
  traced steps, with their quartiles). Every kernel number comes from the same traced steps,
  so no kernel takes longer than the step and the kernels' shares of it add up to at most 100%.
- **call**: the same program called without the profiler, wall clock around
  ``block_until_ready``, host dispatch included (``timings["call_median_s"]``, quartiles over
  every timed call). The profiler costs time per event, so a traced step can be longer than an
  untraced call; the fusion verdict compares calls, which neither side's tracing biases.
- **busy**: the time in a step during which at least one kernel ran (the union of the kernels'
  intervals, never a sum over threads), median over steps.
- **a kernel's share, time and own time** (``KernelTime``, one object every view reads): its
  share is the part of the middle steps' time in which it ran, time during which several kernels
  ran at once divided evenly between them (``profile.attribute``); its time, written beside the
  share, is that share of the step shown (share x step), so times add up to the step's busy part;
  its own time is the time it ran over the same steps, overlaps counted in full, on the same
  scale: a second, labelled number where kernels ran beside it (or, control flow, with the
  kernels it runs).
- **a verdict** ("faster", "slower") only where the two sides' interquartile ranges do not
  overlap; otherwise "within the spread".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable

# Measured runs per side when two compiles are measured against each other, alternated (A B, B A,
# ...): the spread a verdict between them is read from (``analysis.studies.compare``, its page and
# ``xla-explorer compare --measure``).
ROUNDS = 4


@dataclass(frozen=True)
class Spread:
    """A measured quantity: its median and the interquartile range over ``n`` samples."""

    median: float
    q1: float
    q3: float
    lo: float
    hi: float
    n: int

    def parts_from(self, other: "Spread") -> bool:
        """True when the two interquartile ranges do not overlap (a difference beyond noise)."""
        return self.q3 < other.q1 or other.q3 < self.q1


def spread(xs: Iterable[float]) -> Spread | None:
    xs = sorted(float(x) for x in xs)
    if not xs:
        return None
    if len(xs) == 1:
        q1 = q3 = xs[0]
    else:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return Spread(statistics.median(xs), q1, q3, xs[0], xs[-1], len(xs))


def middle(n: int) -> range:
    """The indexes, in ascending order of a step's span, of the steps a kernel's share is taken
    over: the middle half (a quarter trimmed at each end, at least one step kept), so one slow
    or fast step moves no share, and the shares, being sums over the same steps, add up."""
    trim = round(n / 4)
    if n - 2 * trim < 1:
        trim = (n - 1) // 2
    return range(trim, n - trim)


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _from_keys(t: dict, prefix: str) -> Spread | None:
    med = _num(t.get(f"{prefix}_median_s"))
    if med is None:
        return None
    q1 = _num(t.get(f"{prefix}_q1_s"))
    q3 = _num(t.get(f"{prefix}_q3_s"))
    lo = _num(t.get(f"{prefix}_min_s"))
    hi = _num(t.get(f"{prefix}_max_s"))
    n = t.get("traced_steps" if prefix == "step" else "iterations")
    return Spread(med, med if q1 is None else q1, med if q3 is None else q3,
                  med if lo is None else lo, med if hi is None else hi, n if isinstance(n, int) else 1)


def step(t: dict | None) -> Spread | None:
    """The step of a measured bundle's ``timings`` (None when it was not measured)."""
    return _from_keys(t, "step") if isinstance(t, dict) else None


def call(t: dict | None) -> Spread | None:
    """The untraced call of a measured bundle's ``timings``."""
    return _from_keys(t, "call") if isinstance(t, dict) else None


@dataclass(frozen=True)
class KernelTime:
    """One measured kernel as every view writes it (docs/numbers.md, "a kernel's time"): the
    graph's label, the kernel table, the details, the charts, the CLI and the report."""

    name: str
    share: float  # its part of the step (0..1): overlaps split between the kernels running at once
    time_s: float  # share x the step shown: the time beside the share
    own_s: float  # the time it ran, overlaps counted in full, on the step's scale (control flow: with what it runs)
    inclusive: bool  # control flow: its own time includes the kernels it runs, its share does not
    calls: float
    step_s: float = 0.0  # the step (median) the share is of

    def own_shown(self, fmt) -> bool:
        """Whether its own time is a second number: it differs from its time as ``fmt`` writes them."""
        return fmt(self.own_s) != fmt(self.time_s)


def kernel_times(t: dict | None) -> dict[str, KernelTime]:
    """The measured kernels of a bundle's ``timings`` by name, the most time first; empty when
    not measured. A row from before ``own_share`` was kept has its median own
    time instead."""
    s = step(t)
    rows = (t or {}).get("kernels") if isinstance(t, dict) else None
    if s is None or not isinstance(rows, dict):
        return {}
    out = []
    for name, r in rows.items():
        if not isinstance(r, dict):
            continue
        share = max(0.0, _num(r.get("share")) or 0.0)
        own = _num(r.get("own_share"))
        own_s = own * s.median if own is not None else (_num(r.get("median_s")) or 0.0)
        out.append(KernelTime(str(name), share, share * s.median, own_s, r.get("inclusive") is True,
                              _num(r.get("calls")) or 0.0, s.median))
    out.sort(key=lambda k: (-k.time_s, k.name))
    return {k.name: k for k in out}


@dataclass(frozen=True)
class KernelRate:
    """A measured kernel's throughput and its place under a roof (docs/numbers.md, "throughput"):
    its bytes and FLOPs per step over its own time (``KernelTime.own_s``: the time it ran), so
    the rate is the one the kernel achieved while running, on the same steps as its time.
    ``pct_of_roof`` is of the roof that applies to it: the bandwidth of the smallest calibrated
    cache its working set (the bytes one call moves) fits in, else memory's, or a compute peak,
    whichever it is nearest. It is never above 100%: a kernel faster than every roof measured gets
    no percentage, and ``roof_note`` says why."""

    name: str
    bytes_per_s: float | None
    flops_per_s: float | None
    intensity: float | None  # FLOP per byte
    working_set: float | None  # bytes one call moves
    roof: str | None  # which roof bounds it: "memory", "L2 cache (1 MiB)", "fp32"
    roof_per_s: float | None  # that roof, bytes/s for a memory roof, FLOP/s for a compute one
    pct_of_roof: float | None
    roof_note: str = ""


def memory_roofs(peaks: dict | None) -> list[tuple[str, float, float]]:
    """The memory roofs of ``peaks``, smallest first: ``(name, size in bytes, bytes/s)``; the
    device's memory last (its size infinite). Calibrated caches come from ``memory_levels``."""
    if not isinstance(peaks, dict):
        return []
    out = []
    for lv in peaks.get("memory_levels") or []:
        if isinstance(lv, dict) and _num(lv.get("bytes")) and _num(lv.get("bytes_per_s")):
            out.append((str(lv.get("name") or "cache"), float(lv["bytes"]), float(lv["bytes_per_s"])))
    out.sort(key=lambda r: r[1])
    bw = _num(peaks.get("memory_bytes_per_s"))
    if bw:
        out.append(("memory", float("inf"), bw))
    return out


def kernel_rates(t: dict | None) -> dict[str, KernelRate]:
    """Every measured kernel's throughput, by name (control flow left out: its own time holds the
    kernels it runs). Read from ``kernel_times`` (the one object) and the kernel rows' bytes and
    FLOPs per step; the roofs from ``timings["peaks"]``."""
    kts = kernel_times(t)
    if not kts:
        return {}
    rows = t.get("kernels") or {}
    peaks = t.get("peaks") if isinstance(t.get("peaks"), dict) else None
    roofs = memory_roofs(peaks)
    fpeaks = (peaks or {}).get("flops_per_s") if isinstance((peaks or {}).get("flops_per_s"), dict) else {}
    out = {}
    for name, kt in kts.items():
        r = rows.get(name) or {}
        if kt.inclusive or kt.own_s <= 0:
            continue
        nbytes, flops, calls = _num(r.get("bytes")), _num(r.get("flops")), kt.calls or 1.0
        bps = nbytes / kt.own_s if nbytes else None
        fps = flops / kt.own_s if flops else None
        ws = nbytes / calls if nbytes else None
        cands = []  # (fraction of the roof, roof's name, roof)
        if bps is not None and roofs:
            level = next((lv for lv in roofs if ws <= lv[1]), roofs[-1])
            label = level[0] if level[0] == "memory" else f"{level[0]} ({_size(level[1])})"
            cands.append((bps / level[2], label, level[2]))
        fkey = r.get("peak_key") if isinstance(r.get("peak_key"), str) else None
        fpeak = _num(fpeaks.get(fkey)) if fkey else None
        if fps is not None and fpeak:
            cands.append((fps / fpeak, fkey, fpeak))
        roof = max(cands) if cands else None
        pct, note = (100.0 * roof[0] if roof else None), ""
        if roof and roof[0] > 1.0:
            pct = None
            if roof[1] in fpeaks:
                note = (f"ran faster than the {roof[1]} peak ({roof[2] / 1e9:,.4g} GFLOP/s): "
                        "that peak was measured or listed for another kind of matmul; no roof applies")
            else:
                note = (f"ran faster than the {roof[1]} roof ({roof[2] / 2 ** 30:.3g} GiB/s): its "
                        f"{_size(ws)} working set stayed in a cache faster than any measured, so no "
                        "measured roof applies")
        out[name] = KernelRate(name, bps, fps, flops / nbytes if nbytes and flops else None, ws,
                               roof[1] if roof else None, roof[2] if roof else None, pct, note)
    return out


def roof_note(t: dict | None) -> str | None:
    """One sentence for the views under the kernels' rates: which roofs apply, and how many
    kernels ran faster than every roof measured (those show no percentage)."""
    rates = kernel_rates(t)
    if not rates:
        return None
    above = [r for r in rates.values() if r.roof_note]
    caches = sorted({r.roof for r in rates.values() if r.roof and r.pct_of_roof is not None
                     and r.roof != "memory" and "(" in r.roof})
    parts = []
    if caches:
        parts.append("a kernel whose working set fits in a calibrated cache is measured against that "
                     f"cache's bandwidth ({', '.join(caches)}), not memory's")
    if above:
        parts.append(f"{len(above)} kernel(s) ran faster than every roof measured (their data stayed in a "
                     "smaller, faster cache): no % of roof is shown for them")
    return ("Roofs: " + "; ".join(parts) + ".") if parts else None


def _size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} GiB"


def busy_fraction(t: dict | None) -> float | None:
    """Busy over the step: the part of the step in which some kernel ran (at most 1)."""
    s = step(t)
    b = _num((t or {}).get("device_busy_s"))
    if s is None or b is None or s.median <= 0:
        return None
    return min(1.0, b / s.median)


def verdict(before: Spread | None, after: Spread | None) -> str:
    """"faster", "slower" (``after`` against ``before``) or "within the spread"; "" when a side
    is missing."""
    if before is None or after is None:
        return ""
    if not before.parts_from(after):
        return "within the spread"
    return "faster" if after.median < before.median else "slower"


def spread_text(s: Spread | None, fmt) -> str:
    """``3.63 ms (3.55–3.70)``: the median and its interquartile range."""
    if s is None:
        return "–"
    if s.n < 2 or s.q1 == s.q3:
        return fmt(s.median)
    lo, hi = fmt(s.q1), fmt(s.q3)
    if " " in lo and lo.rsplit(" ", 1)[1] == hi.rsplit(" ", 1)[-1]:
        lo = lo.rsplit(" ", 1)[0]  # one unit for the range: "4.1–4.3 ms"
    return f"{fmt(s.median)} ({lo}–{hi})"


def upgrade_timings(t, version: int) -> None:
    """Bundles before schema 5 called the untraced call's wall clock the "step": renamed to the
    call, and the step taken from the one traced step the bundle kept (its timeline), if any."""
    if version >= 5 or not isinstance(t, dict):
        return
    for old, new in (("step_median_s", "call_median_s"), ("step_min_s", "call_min_s"),
                     ("step_mean_s", "call_mean_s"), ("traced_step_median_s", "traced_call_median_s")):
        if old in t:
            t[new] = t.pop(old)
    t.pop("step_std_s", None)
    events = (t.get("timeline") or {}).get("events") if isinstance(t.get("timeline"), dict) else None
    ends = [e.get("start_s", 0) + e.get("duration_s", 0) for e in events or []
            if isinstance(e, dict) and _num(e.get("start_s")) is not None and _num(e.get("duration_s")) is not None]
    if ends:
        t["step_median_s"] = max(ends) - min(e["start_s"] for e in events if isinstance(e, dict) and _num(e.get("start_s")) is not None)


def change_text(before: float | None, after: float | None, fmt) -> str:
    """``1.03 ms less (-26%)`` / ``0.4 ms more (+12%)`` from ``before`` to ``after``."""
    if before is None or after is None:
        return "–"
    d = after - before
    pct = f" ({d / before:+.0%})" if before else ""
    if d == 0:
        return "same"
    return f"{fmt(abs(d))} {'less' if d < 0 else 'more'}{pct}"


def fusion_verdict(fc: dict | None) -> str:
    """The fusion on/off verdict of a bundle, from its numbers alone (the two sides' calls, with
    their spread), the same words in the app, the CLI and the report: "fusion on is faster",
    "fusion on is slower", "within the spread: no verdict" (where the calls were alternated, with
    how many, and why they stopped); "" where the comparison was not measured."""
    if not isinstance(fc, dict) or not fc.get("measured"):
        return ""
    a, b = call(fc.get("unfused")), call(fc.get("default"))
    v = verdict(a, b)
    if v in ("faster", "slower"):
        return f"fusion on is {v}"
    if not v:
        return ""
    alt = fc.get("alternation") if isinstance(fc.get("alternation"), dict) else {}
    n = alt.get("calls") if type(alt.get("calls")) is int else None
    why = {"time": f"the {_num(alt.get('budget_s')) or 0:g} s allowed ran out",
           "calls": "the most calls allowed were made"}.get(alt.get("stopped"), "")
    return ("within the spread: no verdict"
            + (f" after {n} alternated calls each" if n else "")
            + (f" ({why})" if why else ""))


def fusion_rows(fc: dict | None, seconds, count=str, size=str) -> list[dict]:
    """Fusion off against on, one row per number: ``{what, off, on, change, verdict}``. The
    times carry their spread and a verdict only where the spreads part; the same rows make the
    app's table, the CLI's lines and the report's (``seconds``/``size``: how to write a number)."""
    if not isinstance(fc, dict):
        return []
    u, d = fc.get("unfused") or {}, fc.get("default") or {}
    rows = [{"what": "kernels", "off": count(u.get("kernels")), "on": count(d.get("kernels")),
             "change": change_text(u.get("kernels"), d.get("kernels"), count), "verdict": ""},
            {"what": "bytes moved by kernels (from shapes)", "off": size(u.get("bytes")), "on": size(d.get("bytes")),
             "change": change_text(u.get("bytes"), d.get("bytes"), size), "verdict": ""}]
    if not fc.get("measured"):
        return rows
    call_what = "call, no profiler (median, IQR)"
    for what, get in ((call_what, call), ("step, traced (median, IQR)", step)):
        a, b = get(u), get(d)
        if a is None or b is None:
            continue
        v = fusion_verdict(fc) if get is call else verdict(a, b)
        rows.append({"what": what, "off": spread_text(a, seconds), "on": spread_text(b, seconds),
                     "change": change_text(a.median, b.median, seconds),
                     "verdict": {"faster": "fusion on is faster", "slower": "fusion on is slower"}.get(v, v)})
    fu, fd = busy_fraction(u), busy_fraction(d)
    if fu is not None and fd is not None:
        rows.append({"what": "kernels busy, share of the step", "off": f"{fu:.0%}", "on": f"{fd:.0%}",
                     "change": "", "verdict": ""})
    return rows


def part_of_step(t: dict | None, row: dict | None) -> float | None:
    """A kernel's part of the step in seconds: its share times the step (``KernelTime.time_s``;
    what a layer, a group of kernels, adds up; kernels running at once split the time they share)."""
    s = step(t)
    share = _num((row or {}).get("share"))
    if s is None or share is None:
        return None
    return share * s.median


def fusion_savings(fc: dict) -> dict:
    """What fusion saved, from a fusion comparison's two sides (the one derivation: the compile
    writes it, a loaded bundle's is made again): kernels and bytes saved, and with measured sides
    the call's time saved and speed-up (the headline, docs/numbers.md) and the step's speed-up."""
    d, u = fc.get("default") or {}, fc.get("unfused") or {}
    measured = fc.get("measured") is True

    def ratio(key):
        a, b = _num(u.get(key)), _num(d.get(key))
        return a / b if measured and a and b else None

    cu, cd = _num(u.get("call_median_s")), _num(d.get("call_median_s"))
    return {"kernels_saved": u["kernels"] - d["kernels"], "bytes_saved": u["bytes"] - d["bytes"],
            "time_saved_s": cu - cd if measured and cu is not None and cd is not None else None,
            "speedup": ratio("call_median_s"), "step_speedup": ratio("step_median_s")}


def upgrade_fusion_comparison(fc, version: int) -> None:
    """Before schema 5 a side's ``step_median_s`` was its untraced call (and ``busy_speedup`` was
    kept): renamed as ``upgrade_timings`` does for the timings."""
    if version >= 5 or not isinstance(fc, dict):
        return
    fc.pop("busy_speedup", None)
    for side in ("default", "unfused"):
        s = fc.get(side)
        if isinstance(s, dict) and "step_median_s" in s:
            s["call_median_s"] = s.pop("step_median_s")
