"""From a compile's two HLO texts to what every view derives from them: one pipeline, whoever
runs it and whenever its texts arrive.

    text before optimization --parse--+
                                      +--analyze--> kernels, provenance, metrics
    text after optimization  --parse--+             (and, on a bundle, everything derived from them)

Each stage is made once per input. A ``Pipeline`` is offered the texts as they become known
(``offer``) — XLA's dumps while it compiles (the thread beside the compile in the worker,
``analysis.compile.stages``), a worker's early messages (the parent, ``analysis.service.worker``),
the compiled texts at the end — and analyzes once both are parsed (``analysis``). A text equal
to the one parsed, or the same module printed with a ``backend_config``'s fields in another
order (``same_module_text``: XLA:CPU's dump and its compiled text), is not parsed again, and the
analysis is made again only when a parse changed. ``onto(bundle)`` puts the parses of the
bundle's own texts and their analysis on a bundle (the analysis is made there if it was not
made ahead), with the values derived ahead from them (``keep``): so the work done beside XLA is
a property of when the pipeline is fed, not a second copy of it.

Thread-safe: the thread beside the compile and the caller share one pipeline.
"""

from __future__ import annotations

import json
import threading
import warnings

from analysis.bundle.core import Bundle, analyze
from analysis.fusion.codec import derive_decision_kernels
from analysis.hlo import Module, parse_module
from analysis.program.kernels import detect_platform, kernels as find_kernels
from analysis.program.metrics import compute_metrics
from analysis.program.provenance import map_provenance
from analysis.program import layers, provenance

STAGES = ("hlo_before", "hlo_after")  # the texts a pipeline parses


def same_module_text(module, parsed_text: str | None, text: str) -> bool:
    """Whether ``module`` (parsed from ``parsed_text``, XLA's dump of the optimized module) is
    the parse of ``text`` (``compiled.as_text()``); if so it is made exactly that. The two print
    the same module, except that the executable's copy serializes a ``backend_config`` with its
    fields in another order (seen on XLA:CPU's YNNPACK fusions): a line that differs only there,
    with the same JSON, takes the compiled text's ``backend_config``. Anything else: False."""
    if parsed_text is None:
        return False
    if parsed_text == text:
        return True
    a, b = parsed_text.splitlines(), text.splitlines()
    if len(a) != len(b):
        return False
    differ = {i + 1 for i, (x, y) in enumerate(zip(a, b)) if x != y}
    at = {inst.line: inst for inst in module.instructions() if inst.line in differ}
    patches = []
    for ln in differ:
        inst, x, y = at.get(ln), a[ln - 1], b[ln - 1]
        raw = inst.attributes.get("backend_config") if inst is not None else None
        i = x.find("backend_config=" + raw) if raw else -1
        if i < 0 or len(x) != len(y):
            return False
        i += len("backend_config=")
        j = i + len(raw)
        if x[:i] != y[:i] or x[j:] != y[j:]:
            return False
        try:
            if json.loads(x[i:j]) != json.loads(y[i:j]):
                return False
        except ValueError:
            return False
        patches.append((inst, y[i:j]))
    for inst, cfg in patches:
        inst.attributes["backend_config"] = cfg
        try:
            del inst.backend_config  # decoded again, from this text, when next read
        except AttributeError:
            pass
    module.text = text
    return True


class WorkAhead:
    """What a front end will make from a compiled bundle, made while the program compiles: the
    one interface through which a compile hands its caller the parts as they become known (the
    thread beside XLA, ``analysis.compile.stages``; the parent on a worker's early messages,
    ``analysis.service.worker.EarlyParts``). ``before`` gets the module before optimization as
    soon as it parses, while XLA optimizes; ``analyzed`` a draft bundle of both parses, their
    analysis and the job's source where the fusion decisions come later (a worker reads them
    off XLA's log after the compile); ``draft`` a draft bundle of both parses, their analysis,
    the fusion decisions and the job's source, before the real bundle exists. What
    they make, the front end keeps by content (``analysis.bundle.ContentCache``), where the real
    bundle finds it. Both run in a thread of the compile; a failure is a warning, and the work
    is done again for the real bundle. This base class does nothing: a front end overrides what
    it has work for."""

    def before(self, module: Module) -> None:
        """Work on the module before optimization alone."""

    def analyzed(self, bundle: Bundle) -> None:
        """Work on a draft of the bundle without its fusion decisions (the caller must not change it)."""

    def draft(self, bundle: Bundle) -> None:
        """Work on a draft of the bundle (the caller must not change it)."""


def _same(a: tuple, b: tuple) -> bool:
    """Two analyses' inputs: the same parses (by identity) for the same platform (by name)."""
    return a[0] is b[0] and a[1] is b[1] and a[2] == b[2]


class Pipeline:
    def __init__(self, platform: str | None = None):
        self.platform = platform  # the compile's, when known (else read off the optimized module)
        self._lock = threading.RLock()
        self._parses: dict[str, tuple[str, Module]] = {}
        self._made: tuple | None = None  # ((pre, post, platform), (kernels, provenance, metrics))
        self._values: dict = {}  # what was derived ahead on bundles of this pipeline (``keep``)
        # the fusion decisions whose kernels were derived here (in place), with the provenance
        # they were derived from: a draft's decisions are the bundle's after it, and at 96 layers
        # deriving them again was 0.2-0.4 s of the wait for the first graphs (docs/performance.md)
        self._kernels_of: tuple | None = None

    def offer(self, stage: str, text: str) -> None:
        """Parse ``text`` as ``stage`` unless this is the text (or the module) parsed already.
        Raises what ``parse_module`` raises (a dump still being written, a bad text); the stage
        then keeps what it had."""
        with self._lock:
            had = self._parses.get(stage)
            if had is not None and had[0] == text:
                return
            if had is not None and same_module_text(had[1], had[0], text):
                self._parses[stage] = (text, had[1])  # the same parse, on this text
                return
        module = parse_module(text)  # (outside the lock: the other thread may read meanwhile)
        with self._lock:
            self._parses[stage] = (text, module)

    def prepare_before(self, ahead: WorkAhead | None = None) -> None:
        """What the analysis and the layer views read of the module before optimization alone
        (its compute ops and their users, its layer tree), made now and kept with its parse, and
        the caller's work on it alone (``ahead.before``): called beside a compile while XLA
        optimizes, where a core is idle; the analysis of the optimized module then finds it
        made (docs/performance.md)."""
        hit = self.parse("hlo_before")
        if hit is not None:
            provenance.prepare(hit[1])
            layers.prepare(hit[1])
            if ahead is not None:
                ahead.before(hit[1])

    def parse(self, stage: str) -> tuple[str, Module] | None:
        """``(text, module)`` of a stage, or None before it parsed."""
        with self._lock:
            return self._parses.get(stage)

    def analysis(self) -> tuple | None:
        """``(kernels, provenance, metrics)`` of the two parses (made once per pair), or None
        before both parsed."""
        with self._lock:
            pre, post = self._parses.get("hlo_before"), self._parses.get("hlo_after")
            if pre is None or post is None:
                return None
            platform = self.platform or detect_platform(post[1])
            key = (pre[1], post[1], platform)
            made = self._made
            if made is None or not _same(made[0], key):
                kernels = find_kernels(post[1], platform)
                provenance = map_provenance(pre[1], post[1], kernels)
                made = self._made = (key, (kernels, provenance, compute_metrics(pre[1], post[1], kernels, provenance)))
            return made[1]

    def onto(self, bundle: Bundle, kernels_of=None) -> Bundle:
        """The bundle with the parses of its own texts, their analysis (this pipeline's, made now
        if it was not made yet, where the bundle holds both its parses and the platform is the
        one it is made for; else made on the bundle: ``analyze``) and what was derived ahead
        (``keep``; each value counts only while what it was made of is the bundle's). Metrics
        the analysis does not make (a shape sweep's) are kept."""
        mine = []
        with self._lock:
            for stage, hit in self._parses.items():
                text = bundle.stages.get(stage)
                if isinstance(text, str) and text == hit[0]:
                    bundle.stages[stage] = hit[0]
                    bundle.cache.parses[stage] = hit
                    mine.append(stage)
            values = dict(self._values)
        extra = dict(bundle.metrics or {})
        made = None
        if len(mine) == len(STAGES):
            post = bundle.cache.parses["hlo_after"][1]
            if (bundle.environment.get("platform") or detect_platform(post)) == (self.platform or detect_platform(post)):
                made = self.analysis()
        if made is not None:
            # the very lists (nothing changes a bundle's kernels in place): what was derived from
            # them ahead holds for this bundle too
            bundle.kernels, bundle.provenance, bundle.metrics = made[0], made[1], dict(made[2])
            if kernels_of is None or kernels_of is not bundle.provenance:  # (else they were mapped with it)
                self._derive_kernels(bundle.fusion_decisions, bundle.provenance)
        else:
            analyze(bundle)
        for k, v in extra.items():
            bundle.metrics.setdefault(k, v)
        for k, v in values.items():
            bundle.cache.values.setdefault(k, v)
        return bundle

    def _derive_kernels(self, fusion_decisions, provenance) -> None:
        """``derive_decision_kernels``, once per decisions object and provenance (it works in
        place, and neither is changed after: the same objects give the same kernels)."""
        with self._lock:
            done = self._kernels_of
            if done is not None and done[0] is fusion_decisions and done[1] is provenance:
                return
            derive_decision_kernels(fusion_decisions, provenance)
            self._kernels_of = (fusion_decisions, provenance)

    def work_ahead(self, ahead: WorkAhead, fusion_decisions, source: dict, kernels_of=None) -> None:
        """``ahead.draft`` on a draft bundle of the two parses, their analysis,
        ``fusion_decisions`` and ``source``, made before the real bundle (beside XLA's code
        generation, or while a worker compiles); what the core derives there (``Bundle.derived``:
        the layer tree, the details' index) the bundles this pipeline is put onto later take
        wherever it was made of their own objects (``keep``). A failure is a warning: the work
        is done again for the bundle, which reports it. ``kernels_of``: the provenance the
        decisions' kernels were mapped with (``decisions_for_bundle``), not mapped again where
        it is the draft's."""
        self._ahead_on(ahead.draft, fusion_decisions, source, kernels_of)

    def analyzed_ahead(self, ahead: WorkAhead, source: dict) -> None:
        """``ahead.analyzed`` on a draft bundle of the two parses, their analysis and ``source``
        alone, where the fusion decisions come later (as ``work_ahead``)."""
        self._ahead_on(ahead.analyzed, None, source)

    def _ahead_on(self, work, fusion_decisions, source: dict, kernels_of=None) -> None:
        stages = {k: hit[0] for k in STAGES if (hit := self.parse(k)) is not None}
        draft = Bundle(stages=stages, fusion_decisions=fusion_decisions, source=dict(source))
        self.onto(draft, kernels_of)  # its analysis, and the decisions' kernels from its provenance
        try:
            work(draft)
        except Exception as e:  # noqa: BLE001 - see ``work_ahead``
            warnings.warn(f"work ahead of a bundle failed: {type(e).__name__}: {e}")
        self.keep(draft)

    def keep(self, bundle: Bundle) -> None:
        """What was derived on ``bundle`` (a draft made ahead of the real one), for the bundles
        this pipeline is put onto later."""
        with self._lock:
            self._values.update(bundle.cache.values)
