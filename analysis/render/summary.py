"""The summary of a compile: one model (``Summary``), three renderings.

``summarize`` reads the numbers a view leads with out of a Bundle once -- ops before and kernels
after, fusion coverage, the estimated memory traffic fusion saved (or added), library calls,
compile and step time, fusion off against on. ``cards()`` gives them as label / value / note;
``summary_text`` is the CLI's screen, ``summary_html`` the report's strip, and the app draws the
same cards with ``st.metric`` (``app.views.summary_strip``).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from analysis.bundle import Bundle, device_label
from analysis.kernels import ROUTE_COLORS, ROUTE_LABELS, ROUTES
from analysis.profile import over_peak_note
from analysis.render.format import human_bytes, human_flops, human_seconds, library_calls


@dataclass(frozen=True)
class Card:
    label: str
    value: str
    note: str = ""  # one line under the value (the report) or its tooltip (the app)
    delta: str | None = None  # a signed change the app shows next to the value


@dataclass(frozen=True)
class Traffic:
    """Estimated memory traffic: every op reading and writing memory (unfused) against every
    kernel doing so (fused)."""

    unfused: int
    fused: int
    saved: int
    fraction: float

    @property
    def added(self) -> bool:  # e.g. a split-K matmul writing partial sums
        return self.saved < 0

    def sentence(self) -> str:
        if self.added:
            return f"{human_bytes(-self.saved)} more ({-self.fraction:.0%})"
        return f"{human_bytes(self.saved)} saved ({self.fraction:.0%})"


@dataclass(frozen=True)
class Summary:
    title: str
    device: str
    backend: str
    jax: str | None
    ops_before: int | None
    kernels_after: int | None
    control_ops: int
    coverage: float | None
    traffic: Traffic | None
    by_route: dict = field(default_factory=dict)
    libraries: dict = field(default_factory=dict)
    phase_seconds: dict = field(default_factory=dict)
    timings: dict | None = None
    fusion: dict | None = None

    def route_counts(self) -> list[tuple[str, int]]:
        return [(r, self.by_route[r]) for r in ROUTES if self.by_route.get(r)]

    def cards(self) -> list[Card]:
        def n(v):
            return "–" if v is None else str(v)

        out = [Card("Ops → kernels", f"{n(self.ops_before)} → {n(self.kernels_after)}",
                    f"+{self.control_ops} control-flow ops" if self.control_ops else
                    "compute ops in the program → kernels launched"),
               Card("Fusion coverage", f"{self.coverage:.0%}" if self.coverage is not None else "–",
                    "of the ops ended inside a kernel holding two or more ops")]
        tr = self.traffic
        if tr is not None:
            out.append(Card(f"Memory traffic {'added' if tr.added else 'saved'}", human_bytes(abs(tr.saved)),
                            f"estimated: {human_bytes(tr.unfused)} unfused → {human_bytes(tr.fused)} fused "
                            f"({abs(tr.fraction):.0%} {'more' if tr.added else 'less'})",
                            delta=f"{-tr.fraction:+.0%} bytes" if tr.saved else None))
        else:
            out.append(Card("Memory traffic saved", "–", "no optimized module"))
        out.append(Card("Library calls", str(self.by_route.get("library", 0)),
                        ", ".join(f"{k} {v}" for k, v in self.libraries.items()) or "none"))
        ct = self.phase_seconds.get("compile")
        out.append(Card("Compile time", human_seconds(ct) if ct is not None else "–",
                        ", ".join(f"{k} {human_seconds(v)}" for k, v in self.phase_seconds.items())))
        t = self.timings or {}
        if t.get("kernels"):
            out.append(Card("Step time (median)", human_seconds(t.get("step_median_s")),
                            f"kernels busy {human_seconds(t.get('device_busy_s'))} over {t.get('iterations')} calls"))
        fc = self.fusion
        if fc:
            u, d = fc.get("unfused", {}), fc.get("default", {})
            note = f"{human_bytes(u.get('bytes'))} → {human_bytes(d.get('bytes'))}"
            if fc.get("speedup"):
                note += f", {fc['speedup']:.2f}× faster"
            out.append(Card("Fusion off → on", f"{u.get('kernels')} → {d.get('kernels')} kernels", note))
        return out


def summarize(b: Bundle) -> Summary:
    m = b.metrics or {}
    env = b.environment or {}
    traffic = None
    if "bytes_saved" in m:
        traffic = Traffic(m.get("unfused_bytes") or 0, m.get("fused_bytes") or 0, m["bytes_saved"],
                          m.get("bytes_saved_fraction") or 0.0)
    return Summary(title=b.title, device=device_label(env), backend=str(env.get("backend", "?")), jax=env.get("jax"),
                   ops_before=m.get("compute_ops_before"), kernels_after=m.get("kernels_after"),
                   control_ops=m.get("control_ops_after") or 0, coverage=m.get("fusion_coverage"), traffic=traffic,
                   by_route=dict(m.get("kernels_by_route") or {}), libraries=library_calls(m),
                   phase_seconds=dict(b.phase_seconds or {}), timings=b.timings, fusion=b.fusion_comparison)


def state_note(b: Bundle) -> str | None:
    """One line on the Flax NNX state the model's call changes (``source["state_changes"]``, see
    ``analysis.compile.frameworks.StateChanges``), or None. Made here from the list, never taken
    as text from a bundle."""
    changed = b.source.get("state_changes") if isinstance(b.source, dict) else None
    if not isinstance(changed, list) or not changed:
        return None
    items = [c for c in changed if isinstance(c, dict)]
    names = ", ".join(f"{str(c.get('path'))[:80]} ({str(c.get('type'))[:40]}{', new' if c.get('new') is True else ''})"
                      for c in items[:8])
    more = f" and {len(items) - 8} more" if len(items) > 8 else ""
    return (f"The call changes {len(items)} of the module's state variables: {names}{more}. Their new values are "
            "the program's second output, as nnx.jit hands them back.")


# ----------------------------------------------------------------------------- text (the CLI)


def summary_text(b: Bundle) -> str:
    s = summarize(b)
    lines = [f"{s.title}  ·  {s.device} ({s.backend}{', jax ' + s.jax if s.jax else ''})"]
    state = state_note(b)
    if state:
        lines.append(f"  note                    : {state}")
    if s.ops_before is not None:
        lines.append(f"  ops before optimization : {s.ops_before}")
    if s.kernels_after is not None:
        lines.append(f"  kernels after           : {s.kernels_after}"
                     + (f" (+{s.control_ops} control-flow ops)" if s.control_ops else ""))
    if s.coverage is not None:
        lines.append(f"  fusion coverage         : {s.coverage:.0%} of ops ended inside a multi-op fusion")
    if s.traffic is not None:
        lines.append(f"  memory traffic (est.)   : {human_bytes(s.traffic.unfused)} unfused -> "
                     f"{human_bytes(s.traffic.fused)} fused, {s.traffic.sentence()}")
    if s.by_route:
        parts = [f"{ROUTE_LABELS[r]} {c}" for r, c in s.route_counts()]
        lines.append("  kernels by route        : " + (", ".join(parts) or "none"))
    if s.libraries:
        lines.append("  library calls           : " + ", ".join(f"{k} {v}" for k, v in s.libraries.items()))
    lines.extend(_devices_lines(b))
    if s.phase_seconds:
        lines.append("  time per phase          : " + ", ".join(f"{k} {human_seconds(v)}" for k, v in s.phase_seconds.items()))
    t = s.timings
    if t and t.get("kernels"):
        lines.append(f"  measured step (median)  : {human_seconds(t.get('step_median_s'))} wall-clock over "
                     f"{t.get('iterations')} calls; kernels busy {human_seconds(t.get('device_busy_s'))} "
                     f"({t.get('busy_fraction', 0):.0%}), {t.get('attributed_fraction', 0):.0%} of that attributed")
        peaks = t.get("peaks") or {}
        if peaks.get("memory_bytes_per_s"):
            fl = ", ".join(f"{k} {human_flops(v)}/s" for k, v in (peaks.get("flops_per_s") or {}).items())
            lines.append(f"  {'peaks (' + str(peaks.get('source', '?')) + ')':24s}: {human_bytes(peaks['memory_bytes_per_s'])}/s memory, {fl}")
        lines.append("  top kernels             :")
        lines.append(f"    {'kernel':34s} {'route':10s} {'median':>10s} {'calls':>6s} {'share':>6s}  {'GB/s':>8s} {'% peak':>7s}")
        rows = sorted(t["kernels"].values(), key=lambda r: -r.get("total_s", 0))
        for row in rows[:10]:
            gbps = row.get("gbps")
            pct = row.get("pct_of_peak")
            calls = row.get("calls", 0)
            lines.append(f"    {row['name'][:34]:34s} {row.get('route', ''):10s} {human_seconds(row.get('median_s')):>10s}"
                         f" {calls:6.4g} {row.get('share', 0):6.1%}{'*' if row.get('inclusive') else ' '}"
                         f" {('%8.1f' % gbps) if gbps is not None else '       -'}"
                         f" {('%6.0f%%' % pct) if pct is not None else '      -'}")
        if len(rows) > 10:
            lines.append(f"    ... {len(rows) - 10} more")
        if any(r.get("inclusive") for r in rows[:10]):
            lines.append("    * control flow: its time includes the kernels it runs")
        for note in (t.get("coverage_note"), over_peak_note(t), t.get("command_buffer_note")):
            if note:
                lines.append(f"  note                    : {note}")
    fc = s.fusion
    if fc:
        d, u = fc.get("default", {}), fc.get("unfused", {})
        lines.append(f"  fusion off ({', '.join(fc.get('disabled_passes', []))}):")
        lines.append(f"    kernels               : {u.get('kernels')} unfused -> {d.get('kernels')} default "
                     f"({fc.get('kernels_saved'):+d} saved)")
        lines.append(f"    bytes (est.)          : {human_bytes(u.get('bytes'))} unfused -> {human_bytes(d.get('bytes'))} default")
        if fc.get("measured") and u.get("step_median_s") and d.get("step_median_s"):
            lines.append(f"    step (median)         : {human_seconds(u['step_median_s'])} unfused -> "
                         f"{human_seconds(d['step_median_s'])} default ({fc.get('speedup') or 0:.2f}x)")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- HTML (the report)


def _devices_lines(b: Bundle) -> list[str]:
    """A sharded program's devices, mesh and collectives' traffic (``analysis.device_layout``)."""
    from analysis.device_layout import device_layout

    layout = device_layout(b)
    if layout is None:
        return []
    axes = (layout.mesh or {}).get("axes") or {}
    mesh = (" (mesh " + " x ".join(f"{a}={n}" for a, n in axes.items()) + ")") if axes else ""
    return [f"  devices                 : {layout.devices}{mesh}",
            f"  collectives             : {len(layout.collectives)}, ~{human_bytes(layout.sent_bytes)} sent and "
            "received per device (ring estimate)"]


def route_chips_html(counts: list[tuple[str, int]] | None = None, chip: str = "chip", swatch: str = "sw") -> str:
    """The legend's chips (each route's colour and name), with a count each when given."""
    items = counts if counts is not None else [(r, None) for r in ROUTES]
    return "".join(f"<span class='{chip}'><span class='{swatch}' style='background:{ROUTE_COLORS[r]}'></span>"
                   f"{html.escape(ROUTE_LABELS[r])}" + (f"&nbsp;<b>{int(c)}</b>" if c is not None else "") + "</span>"
                   for r, c in items)


def summary_html(b: Bundle) -> str:
    """The report's summary strip: the cards, then the kernels per route. Every string from the
    bundle is escaped."""
    s = summarize(b)
    e = html.escape
    cards = "".join(f"<div class='card'><div class='lbl'>{e(c.label)}</div><div class='val'>{e(c.value)}</div>"
                    + (f"<div class='note'>{e(c.note)}</div>" if c.note else "") + "</div>" for c in s.cards())
    routes = route_chips_html(s.route_counts())
    extra = f"<div class='routes'>Kernels per route: {routes}</div>" if routes else ""
    return "<div class='cards'>" + cards + "</div>" + extra
