"""The summary of a compile: one model (``Summary``), three renderings.

``summarize`` reads the numbers a view leads with out of a Bundle once -- ops before and kernels
after, fusion coverage, the estimated memory traffic fusion saved (or added), library calls,
compile and step time, fusion off against on. ``cards()`` gives them as label / value / note;
``summary_text`` is the CLI's screen, ``summary_html`` the report's strip, and the app draws the
same cards with ``st.metric`` (``app.views.summary_strip``).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from analysis import measures as numbers
from analysis.codegen.kernel_code import has_code, totals as code_totals
from analysis.bundle.core import Bundle, device_label
from analysis.program.kernels import ROUTE_COLORS, ROUTE_LABELS, ROUTES
from analysis.timing.profiles import over_peak_note
from analysis.render.format import human_bytes, human_flops, human_seconds, library_calls, peaks_sentence
from analysis.program.kernels import launching
from analysis.devices.layout import device_layout


@dataclass(frozen=True)
class Card:
    label: str
    value: str
    note: str = ""  # one line under the value (the report) or its tooltip (the app)
    delta: str | None = None  # a signed change the app shows next to the value


@dataclass(frozen=True)
class Traffic:
    """Memory traffic (docs/numbers.md): the bytes the kernels read and write (from their shapes)
    against a baseline that every sentence names. The headline's baseline is one per program,
    whatever else was compiled beside it: every op of the program its own kernel (estimated);
    only where that cannot be estimated (several devices), the fusion-off compile."""

    unfused: int
    fused: int
    saved: int
    fraction: float
    from_compile: bool = False
    why_added: str = ""

    @property
    def source(self) -> str:
        return "the fusion-off compile" if self.from_compile else "estimated, every op its own kernel"

    @property
    def baseline(self) -> str:
        """The baseline in the words every "saved"/"added" carries beside it."""
        return "vs the fusion-off compile" if self.from_compile else "vs every op its own kernel"

    @property
    def verb(self) -> str:
        return "added" if self.added else "saved"

    @property
    def added(self) -> bool:  # e.g. a split-K matmul writing partial sums
        return self.saved < 0

    def sentence(self) -> str:
        """``1.6 MiB saved (44%) vs every op its own kernel``: the change and its baseline, together."""
        if self.added:
            return f"{human_bytes(-self.saved)} added (+{-self.fraction:.0%}) {self.baseline}"
        return f"{human_bytes(self.saved)} saved ({self.fraction:.0%}) {self.baseline}"


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
    devices: int = 1
    code: dict | None = None  # the generated code's totals (analysis.codegen.kernel_code.totals); None without code

    def code_sentence(self) -> str | None:
        """The generated code's totals in words, with fusion off beside them where both were read."""
        c = self.code
        if c is None:
            return None
        out = (f"{c['global_loads']} loads and {c['global_stores']} stores through the buffers of "
               f"{c['kernels']} kernel{'s' if c['kernels'] != 1 else ''} with generated code")
        u = (self.fusion or {}).get("unfused", {}).get("code")
        if u:
            out += (f"; fusion off: {u['global_loads']} loads and {u['global_stores']} stores in "
                    f"{u['kernels']} kernel{'s' if u['kernels'] != 1 else ''}")
        return out

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
            out.append(Card(f"Memory traffic {tr.verb} {tr.baseline}", human_bytes(abs(tr.saved)),
                            f"{tr.source}: {human_bytes(tr.unfused)} → {human_bytes(tr.fused)} with fusion "
                            f"({abs(tr.fraction):.0%} {'more' if tr.added else 'less'})"
                            + (f". {tr.why_added}" if tr.added and tr.why_added else ""),
                            delta=f"{-tr.fraction:+.0%} bytes" if tr.saved else None))
        elif self.devices > 1:
            out.append(Card("Memory traffic saved", "–", f"not estimated on {self.devices} devices: before optimization "
                            "the shapes are the whole arrays, after it one device's part (compare fusion off to "
                            "see it on one device)"))
        else:
            out.append(Card("Memory traffic saved", "–", "no optimized module"))
        # the measured step fourth, among the first five a page shows (the kernels' times beside
        # it are its shares); the library calls are on the routes' line too
        library = Card("Library calls", str(self.by_route.get("library", 0)),
                       ", ".join(f"{k} {v}" for k, v in self.libraries.items()) or "none")
        ct = self.phase_seconds.get("compile")
        compile_card = Card("Compile time", human_seconds(ct) if ct is not None else "–",
                            ", ".join(f"{k} {human_seconds(v)}" for k, v in self.phase_seconds.items()))
        t = self.timings or {}
        sp = numbers.step(t)
        if t.get("kernels") and sp is not None:
            bf, cl = numbers.busy_fraction(t), numbers.call(t)
            out.append(Card("Step (median)", human_seconds(sp.median),
                            f"first kernel to last, {t.get('traced_steps')} traced steps"
                            + (f" of {str(t.get('trace_device'))[:80]}" if t.get("source") == "trace" else "")
                            + (f"; kernels busy {bf:.0%} of it" if bf is not None else "")
                            + (f"; a call without the profiler {human_seconds(cl.median)}" if cl else "")))
        out += [compile_card, library]
        fc = self.fusion
        if fc:
            u, d = fc.get("unfused", {}), fc.get("default", {})
            ct = compile_traffic(self.fusion)
            note = (f"bytes {human_bytes(u.get('bytes'))} → {human_bytes(d.get('bytes'))}"
                    + (f" ({ct.sentence()})" if ct else ""))
            cu, cd = numbers.call(u), numbers.call(d)
            if fc.get("measured") and cu and cd:
                v = numbers.fusion_verdict(fc)
                note += (f", call {human_seconds(cu.median)} → {human_seconds(cd.median)}"
                         + (f" ({cu.median / cd.median:.2f}× faster: {v})" if v == "fusion on is faster" else f" ({v})"))
            uc, dc = u.get("code"), d.get("code")
            if uc and dc:  # the code's own evidence: a store per op with fusion off
                note += f", stores in the generated code {uc['global_stores']} → {dc['global_stores']}"
            out.append(Card("Fusion off → on", f"{u.get('kernels')} → {d.get('kernels')} kernels", note))
        if self.code is not None:
            c = self.code
            out.append(Card("Generated code", f"{c['global_loads']} loads · {c['global_stores']} stores",
                            self.code_sentence() + " (read from each kernel's code, docs/code.md)"))
        return out


def summarize(b: Bundle) -> Summary:
    m = b.metrics or {}
    env = b.environment or {}
    traffic = traffic_of(b)
    return Summary(title=b.title, device=device_label(env), backend=str(env.get("backend", "?")), jax=env.get("jax"),
                   ops_before=m.get("compute_ops_before"), kernels_after=m.get("kernels_after"),
                   control_ops=m.get("control_ops_after") or 0, coverage=m.get("fusion_coverage"), traffic=traffic,
                   by_route=dict(m.get("kernels_by_route") or {}), libraries=library_calls(m),
                   phase_seconds=dict(b.phase_seconds or {}), timings=b.timings, fusion=b.fusion_comparison,
                   devices=b.devices, code=code_totals(b) if has_code(b) else None)


def compile_traffic(fc) -> Traffic | None:
    """The bytes the fusion-off compile's kernels move against the default compile's (a second
    number beside the headline, named as such), or None without a fusion comparison."""
    fc = fc if isinstance(fc, dict) else {}
    u, d = fc.get("unfused") or {}, fc.get("default") or {}
    if not (isinstance(u.get("bytes"), int) and isinstance(d.get("bytes"), int)):
        return None
    saved = u["bytes"] - d["bytes"]
    return Traffic(u["bytes"], d["bytes"], saved, saved / u["bytes"] if u["bytes"] else 0.0, True)


def traffic_of(b: Bundle) -> Traffic | None:
    """The one memory-traffic headline of a bundle (``Traffic``): against every op its own kernel,
    whether or not a fusion-off compile was made beside it, so a program's headline is the same
    on every page and with every flag. Only where that estimate cannot be made (several devices:
    it would weigh whole arrays before against one device's part after) the fusion-off compile's,
    which says so."""
    m = b.metrics or {}
    if b.devices <= 1 and "bytes_saved" in m:
        unfused, fused, real = m.get("unfused_bytes") or 0, m.get("fused_bytes") or 0, False
    else:
        ct = compile_traffic(b.fusion_comparison)
        if ct is None:
            return None
        unfused, fused, real = ct.unfused, ct.fused, True
    saved = unfused - fused
    return Traffic(unfused, fused, saved, saved / unfused if unfused else 0.0, real,
                   why_added(b) if saved < 0 else "")


def why_added(b: Bundle, limit: int = 3) -> str:
    """Where fused kernels move more bytes than unfused ones would: ops that ended in several
    kernels -- a dot XLA split (split-K: partial sums one kernel writes and another adds up) or a
    cheap producer XLA duplicated into several consumers (each re-reads its inputs) -- and kernels
    that do no op of the program (copies and layout changes XLA added)."""
    prov = b.provenance
    if prov is None:
        return ""
    launch = {k.name: k for k in launching(b.kernels)}
    pre = b.module("hlo_before")
    opcode = {i.name: i.opcode for c in pre.computations for i in c.instructions} if pre is not None else {}
    several = sorted(((op, [k for k in dict.fromkeys(ks) if k in launch]) for op, ks in prov.pre_to_kernels.items()),
                     key=lambda x: -len(x[1]))
    several = [(op, ks) for op, ks in several if len(ks) > 1]
    def is_split(op, ks):  # a dot in one kernel and its partial sums reduced in another (split-K)
        ops = [set(launch[k].fused_opcodes) | {launch[k].opcode} for k in ks]
        return opcode.get(op) in ("dot", "convolution") and any(o & {"dot", "convolution", "custom-call"} for o in ops) \
            and any("reduce" in o and not o & {"dot", "convolution"} for o in ops)

    split = [(op, ks) for op, ks in several if is_split(op, ks)]
    dup = [(op, ks) for op, ks in several if not is_split(op, ks)]
    extra = [k for n, k in launch.items() if not prov.kernel_to_pre.get(n)]
    parts = []

    def names(items):
        return ", ".join(f"{op} into {len(ks)} kernels" for op, ks in items[:limit]) + (", …" if len(items) > limit else "")

    if split:
        parts.append(f"XLA split {len(split)} dot{'s' if len(split) != 1 else ''} ({names(split)}): one kernel "
                     "writes partial sums that another reads back to add up")
    if dup:
        parts.append(f"XLA duplicated {len(dup)} op{'s' if len(dup) != 1 else ''} into several kernels "
                     f"({names(dup)}); each of those kernels reads the op's inputs again")
    if extra:
        nbytes = sum(k.bytes for k in extra)
        shown = ", ".join(k.name for k in sorted(extra, key=lambda k: -k.bytes)[:limit])
        parts.append(f"{len(extra)} kernel{'s' if len(extra) != 1 else ''} do no op of the program ({shown}"
                     f"{', …' if len(extra) > limit else ''}: {human_bytes(nbytes)}), copies or layout changes XLA added")
    return "; ".join(parts) + "." if parts else ""


# A changed variable's type (``StateChanges``' entries: Flax NNX's Variable classes, a Linen
# collection) -> what it is, in the one line (singular, plural); the optimizer's and the
# parameters' are said without their paths, the others' with them where they are few
_STATE_KINDS = {"Param": ("parameter array", "parameter arrays"),
                "BatchStat": ("BatchNorm statistic", "BatchNorm statistics"),
                "RngCount": ("RNG count", "RNG counts"), "RngKey": ("RNG key", "RNG keys"),
                "MetricState": ("metric total", "metric totals"), "Cache": ("cache", "caches"),
                "Intermediate": ("intermediate", "intermediates"), "intermediates": ("intermediate", "intermediates")}
_OPTIMIZER_TYPES = {"OptState", "OptArray", "OptVariable"}
_LISTED = 3  # paths listed per kind, at most


def _optimizer_words(items: list[dict]) -> str:
    """``optimizer state (adam: 2 moments mu and nu, step)`` from the optimizer's changed
    variables: its optax kind, its moments (the names under ``opt_state``) and its step count."""
    kind = next((str(c["optimizer"])[:40] for c in items if isinstance(c.get("optimizer"), str) and c["optimizer"]), "")
    moments: list[str] = []
    step = False
    for c in items:
        parts = str(c.get("path"))[:300].split("/")
        if "opt_state" in parts:
            below = [x for x in parts[parts.index("opt_state") + 1:] if not x.isdigit()]
            if c.get("type") == "OptVariable" and below and below[0] not in moments:
                moments.append(below[0][:40])
            elif below[-1:] == ["count"]:
                step = True
        else:
            step = True  # the optimizer's own step (``optimizer/step``)
    what = []
    if moments:
        shown = moments[:4]
        what.append(f"{len(moments)} moment{'s' if len(moments) != 1 else ''} "
                    + (" and ".join(shown) if len(shown) <= 2 else ", ".join(shown)) + (", …" if len(moments) > 4 else ""))
    if step:
        what.append("step")
    inner = ", ".join(what)
    return "optimizer state" + (f" ({kind}: {inner})" if kind and inner else f" ({inner or kind})" if inner or kind else "")


def state_note(b: Bundle) -> str | None:
    """The one line, said by the page, the CLI's summary and the report, on the state the program
    returns beside what the call or training step returns (``source["state_changes"]``, see
    ``analysis.compile.frameworks.StateChanges``): how many parameters, the optimizer's state,
    BatchNorm statistics, RNG counts, metric totals, and the other variables by name; None where
    it returns none. Made here from the list, never taken as text from a bundle."""
    changed = b.source.get("state_changes") if isinstance(b.source, dict) else None
    if not isinstance(changed, list) or not changed:
        return None
    items = [c for c in changed[:100_000] if isinstance(c, dict)]
    if not items:
        return None
    groups: dict[str, list[dict]] = {}
    for c in items:
        t = str(c.get("type"))[:40]
        groups.setdefault("optimizer" if t in _OPTIMIZER_TYPES else t, []).append(c)
    parts = []

    def named(group: list[dict]) -> str:
        shown = ", ".join(str(c.get("path"))[:80] + (" (new)" if c.get("new") is True else "") for c in group[:_LISTED])
        return f" ({shown}{', …' if len(group) > _LISTED else ''})"

    order = ["Param", "optimizer"] + [t for t in _STATE_KINDS if t != "Param"]
    for t in order + sorted(set(groups) - set(order)):
        group = groups.get(t)
        if not group:
            continue
        if t == "optimizer":
            parts.append(_optimizer_words(group))
            continue
        one, many = _STATE_KINDS.get(t, (f"{t} variable", f"{t} variables"))
        parts.append(f"{len(group)} {one if len(group) == 1 else many}" + ("" if t == "Param" else named(group)))
    step = "Param" in groups or "optimizer" in groups
    how = ("as Linen's apply with mutable collections does" if b.source.get("library") == "flax.linen"
           else "as nnx.jit does")
    return (f"Returns the state the {'step' if step else 'call'} changes as outputs of the program, {how}: "
            + ", ".join(parts) + ".")


def empty_note(b: Bundle) -> str | None:
    """The one line, said by every command and the page, for a program that returns nothing (no
    output, no state to return): XLA removed all its work, and what to do. None otherwise."""
    module = b.module("hlo_after") or b.module("hlo_before")
    root = module.entry.root if module is not None and module.entry is not None else None
    if root is None or root.opcode != "tuple" or root.operands:
        return None
    return ("The program returns nothing, so XLA removed all of its work and there is no kernel to show: return "
            "what the step computes (its loss, the new parameters), or hand it the modules, optimizer and metrics "
            "it updates as arguments (from example_inputs()) so it returns their new state, as nnx.jit does.")


# element types narrower than any this project knows a CPU matmul for: XLA's float-normalization
# passes widen them where the target has no kernel for them
_NARROW_FLOATS = ("f8", "f6", "f4")
_MATMUL_CALL = re.compile(r"gemm|matmul|conv", re.IGNORECASE)


def _operand_types(i) -> set[str]:
    return {o.shape.element_type for o in i.operand_instructions() if not o.shape.is_tuple}


def widened_note(b: Bundle) -> str | None:
    """The one line, said by the page, the CLI's summary and the report, where XLA ran the
    program's fp8 (or narrower) matmuls and convolutions in a wider type: every instruction of
    the optimized module made from such an op (the same ``op_name``) reads wider operands than
    the op did, the converts kernels of their own. None where none was widened."""
    pre, post = b.module("hlo_before"), b.module("hlo_after")
    if pre is None or post is None:
        return None
    narrow: dict[str, tuple[str, set[str]]] = {}  # op_name -> (the op's name, its narrow types)
    for c in pre.computations:
        for i in c.instructions:
            if i.opcode in ("dot", "convolution") and i.metadata.op_name:
                types = {t for t in _operand_types(i) if t.startswith(_NARROW_FLOATS)}
                if types:
                    narrow.setdefault(i.metadata.op_name, (i.name, types))
    if not narrow:
        return None
    ran: dict[str, set[str]] = {}  # op_name -> the operand types its instructions read after optimization
    for c in post.computations:
        for i in c.instructions:
            if i.metadata.op_name in narrow and (i.opcode in ("dot", "convolution") or (
                    i.opcode == "custom-call" and _MATMUL_CALL.search(i.custom_call_target or ""))):
                ran.setdefault(i.metadata.op_name, set()).update(_operand_types(i))
    widened = [(narrow[k][0], narrow[k][1], ts) for k, ts in ran.items()
               if ts and not any(t.startswith(_NARROW_FLOATS) for t in ts)]
    if not widened:
        return None
    names = [w[0] for w in widened]
    was = ", ".join(sorted(set().union(*(w[1] for w in widened))))
    now = ", ".join(sorted(set().union(*(w[2] for w in widened))))
    platform = str((b.environment or {}).get("gpu_target") or (b.environment or {}).get("platform") or "this target")
    n = len(widened)
    return (f"XLA for the {platform.upper()} has no {was} matmul here: it converted the operands of {n} "
            f"{'op' if n == 1 else 'ops'} ({', '.join(names[:3])}{', …' if n > 3 else ''}) to {now} and ran "
            f"{'it' if n == 1 else 'them'} in {now}, the converts as kernels of their own; the kernels, bytes and "
            f"times here are those of the {now} program.")


def program_notes(b: Bundle) -> list[str]:
    """The one-line notes on what the program is, in the order every front end says them: it
    returns nothing; the state it returns; matmuls run in a wider type than written."""
    return [n for n in (empty_note(b), state_note(b), widened_note(b)) if n]


# ----------------------------------------------------------------------------- text (the CLI)


def summary_text(b: Bundle) -> str:
    s = summarize(b)
    lines = [f"{s.title}  ·  {s.device} ({s.backend}{', jax ' + s.jax if s.jax else ''})"]
    for note in program_notes(b):
        lines.append(f"  note                    : {note}")
    if s.ops_before is not None:
        lines.append(f"  ops before optimization : {s.ops_before}")
    if s.kernels_after is not None:
        lines.append(f"  kernels after           : {s.kernels_after}"
                     + (f" (+{s.control_ops} control-flow ops)" if s.control_ops else ""))
    if s.coverage is not None:
        lines.append(f"  fusion coverage         : {s.coverage:.0%} of ops ended inside a kernel that fuses ops (a fusion of two or more, or a library call's epilogue)")
    if s.traffic is not None:
        lines.append(f"  memory traffic          : {s.traffic.sentence()}: {human_bytes(s.traffic.unfused)} -> "
                     f"{human_bytes(s.traffic.fused)} with fusion ({s.traffic.source})")
        if s.traffic.added and s.traffic.why_added:
            lines.append(f"  why more bytes          : {s.traffic.why_added}")
    if s.by_route:
        parts = [f"{ROUTE_LABELS[r]} {c}" for r, c in s.route_counts()]
        lines.append("  kernels by route        : " + (", ".join(parts) or "none"))
    if s.libraries:
        lines.append("  library calls           : " + ", ".join(f"{k} {v}" for k, v in s.libraries.items()))
    if s.code is not None:
        lines.append(f"  generated code          : {s.code_sentence()}")
    lines.extend(_devices_lines(b))
    if s.phase_seconds:
        lines.append("  time per phase          : " + ", ".join(f"{k} {human_seconds(v)}" for k, v in s.phase_seconds.items()))
    t = s.timings
    if t and t.get("kernels"):
        sp, cl, bf = numbers.step(t), numbers.call(t), numbers.busy_fraction(t)
        lines.append(f"  step (median)           : {numbers.spread_text(sp, human_seconds)} first kernel to last, "
                     f"{t.get('traced_steps')} traced steps; kernels busy "
                     f"{f'{bf:.0%}' if bf is not None else '-'} of it, {t.get('attributed_fraction', 0):.0%} of that attributed")
        if cl is not None:
            lines.append(f"  call, no profiler       : {numbers.spread_text(cl, human_seconds)} wall clock over "
                         f"{t.get('iterations')} calls, host dispatch included")
        if t.get("source") == "trace":
            lines.append(f"  timings from            : {trace_source_text(t)}")
        peaks = t.get("peaks") or {}
        if peaks_sentence(peaks):
            lines.append(f"  {'peaks (' + str(peaks.get('source', '?')) + ')':24s}: {peaks_sentence(peaks)}")
        elif t.get("peaks_note"):
            lines.append(f"  peaks                   : none. {str(t['peaks_note'])[:300]}")
        lines.append("  top kernels             :")
        lines.append(f"    {'kernel':34s} {'route':10s} {'time':>10s} {'calls':>6s} {'share':>6s}  {'own':>10s} {'GiB/s':>8s} {'% roof':>7s}  roof")
        kts = list(numbers.kernel_times(t).values())
        rates = numbers.kernel_rates(t)
        for kt in kts[:10]:
            row = t["kernels"].get(kt.name) or {}
            kr = rates.get(kt.name)
            gib = kr.bytes_per_s / 2 ** 30 if kr and kr.bytes_per_s is not None else None
            pct = kr.pct_of_roof if kr else None
            own = human_seconds(kt.own_s) if kt.own_shown(human_seconds) else ""
            lines.append(f"    {kt.name[:34]:34s} {row.get('route', ''):10s} {human_seconds(kt.time_s):>10s}"
                         f" {kt.calls:6.4g} {kt.share:6.1%}{'*' if kt.inclusive else ' '} {own:>10s}"
                         f" {('%8.3g' % gib) if gib is not None else '       -'}"
                         f" {('%6.0f%%' % pct) if pct is not None else '      -'}  {(kr.roof or '') if kr else ''}")
        if len(kts) > 10:
            lines.append(f"    ... {len(kts) - 10} more")
        lines.append("    time = share x step (kernels running at once split it); own: the time it ran, "
                     "kernels beside it counted in full, where that differs; GiB/s = bytes / own time")
        if any(kt.inclusive for kt in kts[:10]):
            lines.append("    * control flow: its time is its own bookkeeping, its own time includes the kernels it runs")
        for note in (t.get("coverage_note"), over_peak_note(t), t.get("command_buffer_note")):
            if note:
                lines.append(f"  note                    : {note}")
    fc = s.fusion
    if fc:
        lines.append(f"  fusion off ({', '.join(str(p) for p in fc.get('disabled_passes', []))}) -> on:")
        for r in numbers.fusion_rows(fc, human_seconds, lambda v: "-" if v is None else str(v), human_bytes):
            lines.append(f"    {r['what'][:36]:36s}: {r['off']} -> {r['on']}"
                         + (f", {r['change']}" if r["change"] else "") + (f"; {r['verdict']}" if r["verdict"] else ""))
        uc, dc = (fc.get("unfused") or {}).get("code"), (fc.get("default") or {}).get("code")
        if uc and dc:
            for what, key in (("loads in the generated code", "global_loads"), ("stores in the generated code", "global_stores")):
                lines.append(f"    {what:36s}: {uc[key]} -> {dc[key]}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- HTML (the report)


def _devices_lines(b: Bundle) -> list[str]:
    """A sharded program's devices, mesh and collectives' traffic (``analysis.devices.layout``)."""
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


def trace_source_text(t: dict) -> str | None:
    """Where timings from a user's trace were made, said the same by the page, the report and the
    CLI ("Timings from " + this); None for timings measured here."""
    if (t or {}).get("source") != "trace":
        return None
    return (f"your trace {str(t.get('trace_file'))[-120:]}, made on {str(t.get('trace_device'))[:120]}, not on this "
            f"machine: {t.get('steps_seen')} executions, {t.get('matched_fraction', 0):.0%} of the instructions it "
            "ran are kernels of this compile")


def summary_html(b: Bundle) -> str:
    """The report's summary strip: the cards, then the kernels per route. Every string from the
    bundle is escaped."""
    s = summarize(b)
    e = html.escape
    cards = "".join(f"<div class='card'><div class='lbl'>{e(c.label)}</div><div class='val'>{e(c.value)}</div>"
                    + (f"<div class='note'>{e(c.note)}</div>" if c.note else "") + "</div>" for c in s.cards())
    routes = route_chips_html(s.route_counts())
    extra = f"<div class='routes'>Kernels per route: {routes}</div>" if routes else ""
    traced = trace_source_text(b.timings or {})
    if traced:
        extra += f"<p class='muted small'>Timings from {e(traced)}.</p>"
    notes = "".join(f"<p class='program-note'>{e(n)}</p>" for n in program_notes(b))
    return notes + "<div class='cards'>" + cards + "</div>" + extra
