"""The Bundle: everything a view shows about one compile, as versioned JSON.

Produced by the worker that has JAX (``analysis.compile.stages.compile_model``), or from a plain
HLO text (``bundle_from_hlo``); consumed by the app, the CLI and the report, which need no JAX.
The schema is documented in ``docs/bundle.md``. What a bundle derives from its texts (parses,
the kernel index, values made from them) is kept beside it in a ``Derived`` cache, never
serialized, written only by the bundle itself and by ``analysis.pipeline``.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, TypedDict

from analysis import columns
from analysis import tuning
from analysis.bundle.checks import (MAX_DEPTH, check_decisions, check_depth, check_field_types, check_fusion_comparison,
                                    check_inductor, check_memory, check_parts)
from analysis.codegen.kernel_code import check_code, code_json
from analysis.errors import ExplorerError, from_parse_error
from analysis.fusion.codec import derive_decision_kernels, fusion_decisions_json, read_records
from analysis.hlo import HloParseError, Module, parse_module
from analysis.hlo.shape import ShapeParseError
from analysis.program.kernels import Kernel, detect_platform, kernels as find_kernels
from analysis.program.metrics import compute_metrics
from analysis.measures import upgrade_fusion_comparison, upgrade_timings
from analysis.program.provenance import Provenance, map_provenance
from analysis.program.provenance import op_count

if TYPE_CHECKING:  # the typed record of a JSON field (a plain dict at run time)
    from analysis.timing.profiles import Timings

# 2: adds measured `timings` and `fusion_comparison`; 3: adds `fusion_decisions` (why XLA fused or
# did not) and `memory` (buffers, live ranges, the peak) (docs/bundle.md). Older bundles still load:
# their new fields are simply absent (None). 4: the fusion decisions' records are written by column
# (``analysis.columns``; a list of records still loads).
# 6: adds `code` (each kernel's generated code by stage, its facts and op links: analysis.codegen.kernel_code).
SCHEMA_VERSION = 6
STAGES = ("jaxpr", "stablehlo", "hlo_before", "hlo_after")
STAGE_LABELS = {"jaxpr": "jaxpr", "stablehlo": "StableHLO", "hlo_before": "HLO before optimization",
                "hlo_after": "HLO after optimization"}


class Derived:
    """What a bundle derived from its texts, kept beside it and never serialized: each stage's
    parse (``parses``: stage -> (text, module), by the very text object it was made of), the
    kernel index, and values made from identities (``values``: key -> (fingerprint, value), see
    ``Bundle.derived``). Written by the bundle's own methods and by ``analysis.pipeline`` only."""

    __slots__ = ("parses", "values", "kernel_index")

    def __init__(self):
        self.parses: dict = {}
        self.values: dict = {}
        self.kernel_index: tuple | None = None



class FusionSide(TypedDict):
    """One side of ``bundle.fusion_comparison`` (the default compile, or fusion disabled)."""

    kernels: int
    kernels_by_route: dict[str, int]
    bytes: int
    flops: int
    # the side's measured numbers under their timings keys (analysis.measures reads them):
    # step_median_s, step_q1_s, step_q3_s, call_median_s, call_q1_s, call_q3_s, device_busy_s
    step_median_s: float | None
    call_median_s: float | None
    device_busy_s: float | None
    iterations: int | None
    top_kernels: list[dict]  # name, route, median_s, calls of the slowest 15
    code: dict | None  # the side's generated code summed (analysis.codegen.kernel_code.totals): kernels, global_loads, global_stores


class FusionComparison(TypedDict):
    """``bundle.fusion_comparison`` (docs/bundle.md, "fusion_comparison")."""

    platform: str
    disabled_passes: list[str]
    compiler_options: dict
    note: str
    measured: bool
    default: FusionSide
    unfused: FusionSide
    kernels_saved: int
    bytes_saved: int
    time_saved_s: float | None  # unfused - default call (untraced wall clock) median
    speedup: float | None  # unfused / default call median
    step_speedup: float | None  # unfused / default step median
    unfused_hlo_after: str | None
    memory: dict | None  # the two compiles' peaks and the temporaries only the unfused one writes


@dataclass
class Bundle:
    source: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)
    stages: dict = field(default_factory=dict)
    cost_analysis: dict | None = None
    memory_analysis: dict | None = None
    phase_seconds: dict = field(default_factory=dict)
    kernels: list = field(default_factory=list)
    provenance: Provenance | None = None
    metrics: dict = field(default_factory=dict)
    timings: Timings | None = None  # typed records: analysis.timing.profiles.Timings / KernelTiming
    fusion_comparison: FusionComparison | None = None  # FusionComparison / FusionSide above
    pass_log: list | None = None
    fusion_decisions: dict | None = None
    memory: dict | None = None
    code: dict | None = None  # the generated code (analysis.codegen.kernel_code reads it; never read the dict directly)
    inductor: dict | None = None  # PyTorch's Inductor beside XLA (analysis.compile.inductor; checks.check_inductor)
    created: str = ""
    schema_version: int = SCHEMA_VERSION
    # derived from the texts: never serialized, not part of equality
    cache: Derived = field(default_factory=Derived, init=False, repr=False, compare=False)

    # -- parsed views (not serialized) ------------------------------------------------------

    @property
    def devices(self) -> int:
        """The devices the program runs on (the job's setting, ``options["devices"]``; 1 when unset
        or not a positive whole number)."""
        n = (self.options or {}).get("devices", 1)
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1

    def module(self, stage: str) -> Module | None:
        text = self.stages.get(stage)
        hit = self.cache.parses.get(stage)
        if hit is None or hit[0] is not text:  # parsed once per text (a replaced text is parsed again)
            with tuning.building():  # an entry point of analysis.tuning: a module is many objects, none garbage
                try:
                    hit = self.cache.parses[stage] = (text, parse_module(text) if text else None)
                except HloParseError as e:
                    name = (self.source or {}).get("name") if isinstance(self.source, dict) else None
                    e.source = e.source or (f"{stage} of {name}" if name else stage)
                    raise
        return hit[1]

    def share_from(self, other: "Bundle") -> None:
        """What ``other`` derived, for a bundle made from it (a measured bundle from its preview):
        the parse of every stage whose text is the same (that text object and its parse), and
        its ``derived`` values, each used only while its fingerprint holds here (so what
        measuring changed, the timings, is made again)."""
        for stage, hit in other.cache.parses.items():
            mine = self.stages.get(stage)
            if hit[1] is not None and isinstance(mine, str) and mine == hit[0]:
                self.stages[stage] = hit[0]
                self.cache.parses[stage] = hit
        for key, hit in other.cache.values.items():
            self.cache.values.setdefault(key, hit)

    @property
    def title(self) -> str:
        return self.source.get("name") or "untitled"

    @property
    def platform(self) -> str:
        return self.environment.get("platform") or self.environment.get("backend") or "unknown"

    def kernel(self, name: str) -> Kernel | None:
        # by name through an index built once per kernel list (a scan per call was quadratic in
        # the graph payload of a 4,800-kernel program)
        ks = self.kernels
        hit = self.cache.kernel_index
        if hit is None or hit[0] is not ks or hit[1] != len(ks):
            index: dict[str, Kernel] = {}
            for k in ks:
                index.setdefault(k.name, k)
            hit = self.cache.kernel_index = (ks, len(ks), index)
        return hit[2].get(name)

    def derived(self, key: str, fingerprint: tuple, make):
        """``make()``, remembered on this bundle while ``fingerprint`` (identities of what it was
        made from) stays the same; never serialized."""
        hit = self.cache.values.get(key)
        if hit is None or len(hit[0]) != len(fingerprint) or any(a is not b for a, b in zip(hit[0], fingerprint)):
            hit = self.cache.values[key] = (fingerprint, make())
        return hit[1]

    def forget(self, key: str) -> None:
        """Drop what ``derived(key, ...)`` remembered."""
        self.cache.values.pop(key, None)

    # -- JSON -------------------------------------------------------------------------------

    def to_dict(self, leave_out: tuple[str, ...] = ()) -> dict:
        """The bundle as JSON values; the fields named in ``leave_out`` are not made at all (a
        worker's answer leaves out what the parent derives again, whose JSON takes time to make
        for a big program: docs/performance.md)."""
        d = {}
        for f in fields(self):
            if not f.init or f.name in leave_out:
                continue
            v = getattr(self, f.name)
            if f.name == "kernels":
                v = [k.to_dict() for k in v]
            elif f.name == "provenance":
                v = v.to_dict() if v is not None else None
            elif f.name == "fusion_decisions":
                v = fusion_decisions_json(v)
            elif f.name == "code":
                v = code_json(v)
            d[f.name] = v
        return d

    def to_json(self, indent: int | None = None, as_dict: dict | None = None) -> str:
        """The bundle's JSON text; ``as_dict``: its ``to_dict()`` made already (the report makes it
        once for this and ``content_hash``: a big program's takes seconds, its code deflated)."""
        return json.dumps(self.to_dict() if as_dict is None else as_dict, indent=indent, sort_keys=False,
                          default=_json_default)

    @classmethod
    def from_dict(cls, d: dict) -> "Bundle":
        if not isinstance(d, dict):
            raise ExplorerError("load", "a bundle is a JSON object")
        check_depth(d)
        version = d.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ExplorerError("load", "not an XLA Explorer bundle (no schema_version)")
        if version > SCHEMA_VERSION:
            raise ExplorerError("load", f"bundle schema {version} is newer than this viewer ({SCHEMA_VERSION})")
        known = {f.name for f in fields(cls) if f.init}
        kw = {k: v for k, v in d.items() if k in known}
        check_field_types(kw)
        try:
            kw["kernels"] = [Kernel.from_dict(k) for k in d.get("kernels", [])]
            if d.get("provenance") is not None:
                kw["provenance"] = Provenance.from_dict(d["provenance"])
        except KeyError as e:
            raise ExplorerError("load", f"malformed bundle: a kernel or the provenance lacks {e}") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise ExplorerError("load", f"malformed bundle: {e}") from None
        kw["schema_version"] = SCHEMA_VERSION
        upgrade_timings(kw.get("timings"), version)
        upgrade_fusion_comparison(kw.get("fusion_comparison"), version)
        check_parts(kw)
        read_records(kw.get("fusion_decisions"))
        check_decisions(kw.get("fusion_decisions"))
        check_memory(kw)
        check_fusion_comparison(kw)
        check_inductor(kw)
        kw["code"] = check_code(kw.get("code"))
        derive_decision_kernels(kw.get("fusion_decisions"), kw.get("provenance"))
        stages = kw.get("stages", {})
        if not isinstance(stages, dict) or not all(isinstance(v, str) for v in stages.values()):
            raise ExplorerError("load", "malformed bundle: 'stages' must map stage names to text")
        return cls(**kw)

    @classmethod
    def from_json(cls, text: str | bytes) -> "Bundle":
        try:
            d = json.loads(text)
        except (ValueError, UnicodeDecodeError) as e:
            line = getattr(e, "lineno", None)
            raise ExplorerError("load", f"not valid JSON: {getattr(e, 'msg', e)}", line=line,
                                column=getattr(e, "colno", None)) from None
        except RecursionError:
            raise ExplorerError("load", f"not a bundle: JSON nested deeper than {MAX_DEPTH} levels") from None
        return cls.from_dict(d)

    def save(self, path) -> None:
        with open(path, "w") as f:
            f.write(self.to_json(indent=1))

    @classmethod
    def load(cls, path) -> "Bundle":
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ExplorerError("load", e.strerror or str(e), file=str(path)) from None
        try:
            return cls.from_json(data)
        except ExplorerError as e:
            e.file = str(path)
            raise ExplorerError(e.phase, e.message, str(path), e.line, e.column) from None

    def json_size_at_least(self) -> int:
        """A lower bound of ``len(self.to_json())`` made without encoding the bundle (its JSON is
        a pass over every kernel, decision and buffer: a tenth of a second and more for a big
        program): its stage texts, its memory record's JSON, each kernel at least its empty
        record and its names, each provenance entry at least its key. The report asks before
        making the JSON it could not embed (docs/performance.md)."""
        total = sum(len(t) for t in self.stages.values() if isinstance(t, str))
        if self.memory is not None:
            total += len(json.dumps(self.memory, default=_json_default))
        empty = _empty_kernel_json()
        total += sum(empty + len(k.name) + len(k.opcode) + len(k.route) + len(k.computation) + len(k.shape)
                     for k in self.kernels)
        p = self.provenance
        if p is not None:
            total += sum(len(key) + 6 for part in (p.pre_to_kernels, p.kernel_to_pre, p.how) for key in part)
        return total

    def content_hash(self, as_dict: dict | None = None) -> str:
        """A short hash of what the bundle shows (its creation time left out, so the same
        compile gives the same hash): of its JSON without ``created``; ``as_dict`` as for
        ``to_json``."""
        return self._hashed_json(as_dict)[1]

    def json_and_hash(self, as_dict: dict | None = None) -> tuple[str, str]:
        """``(to_json(), content_hash())`` from one encoding: the same JSON with ``created`` last
        (a big program's bundle is 15 MB of JSON: encoding it twice was a tenth of a second of
        its report, docs/performance.md). Keys keep their order: the code's twins refer to
        kernels before them (``analysis.codegen.kernel_code``)."""
        body, digest, created = self._hashed_json(as_dict)
        if created is None:
            return body, digest
        tail = '"created": ' + json.dumps(created, default=_json_default) + "}"
        return (body[:-1] + (", " if body != "{}" else "") + tail), digest

    def _hashed_json(self, as_dict: dict | None) -> tuple[str, str, object]:
        d = dict(self.to_dict() if as_dict is None else as_dict)
        created = d.pop("created", None)
        body = json.dumps(d, default=_json_default)
        return body, hashlib.sha256(body.encode()).hexdigest()[:16], created


@functools.cache
def _empty_kernel_json() -> int:
    """The JSON length of a kernel record whose strings are empty and lists none."""
    return len(json.dumps(Kernel(name="", opcode="", route="", computation="", shape="").to_dict()))


def _json_default(o):
    if isinstance(o, columns.Table):
        return o.dicts()
    if isinstance(o, columns.Row):
        return dict(o)
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def device_label(environment: dict | None) -> str:
    """The device a bundle was compiled for, in words; says so when no such device was present."""
    env = environment or {}
    label = env.get("device_kind") or env.get("platform") or "?"
    # the devices the program runs on (a job setting; a GPU target is described with that many)
    n = env.get("devices") or (env.get("device_count") if env.get("deviceless") else 1)
    if isinstance(n, int) and n > 1:
        label += f" × {n}"
    if env.get("deviceless"):
        label += " (target; compiled without one, no autotuning)"
    return label


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def analyze(bundle: Bundle) -> Bundle:
    """Fill kernels, provenance and metrics from the bundle's HLO texts (pure Python)."""
    post = bundle.module("hlo_after")
    pre = bundle.module("hlo_before")
    if post is None:
        # Only pre-optimization HLO: show its ops; no kernels exist yet.
        bundle.kernels, bundle.provenance = [], None
        bundle.metrics = {"compute_ops_before": 0} if pre is None else _pre_only_metrics(pre)
        return bundle
    platform = bundle.environment.get("platform") or detect_platform(post)
    bundle.kernels = find_kernels(post, platform)
    bundle.provenance = map_provenance(pre, post, bundle.kernels) if pre is not None else None
    bundle.metrics = compute_metrics(pre, post, bundle.kernels, bundle.provenance)
    derive_decision_kernels(bundle.fusion_decisions, bundle.provenance)
    return bundle


def reanalyze(bundle: Bundle) -> Bundle:
    """Recompute kernels, provenance and metrics with this version's analysis (pure Python,
    milliseconds) — for bundles that come back from the cache or an upload. Metrics the analysis
    does not produce (e.g. a shape sweep's results) are kept."""
    extra = {k: v for k, v in (bundle.metrics or {}).items()}
    analyze(bundle)
    for k, v in extra.items():
        bundle.metrics.setdefault(k, v)
    return bundle


def _pre_only_metrics(pre: Module) -> dict:
    return {"compute_ops_before": op_count(pre)}


def looks_optimized(module: Module) -> bool:
    if module.is_scheduled:
        return True
    return any(i.opcode == "fusion" for i in module.instructions())


def _check_shapes(module: Module, file: str | None) -> None:
    """Shapes are decoded lazily; decode them all now so a bad one is a parse error with its
    line instead of an exception in the middle of the analysis."""
    for inst in module.instructions():
        try:
            inst.shape
        except ShapeParseError as e:
            raise ExplorerError("parse", f"bad shape {inst.shape_text!r}: {e}", file, inst.line or None,
                                None, inst.shape_text[:200]) from None


def fusion_decisions_from_json(d) -> dict | None:
    """``fusion_decisions`` sent on their own (by a worker, untrusted), checked and read as
    ``Bundle.from_dict`` checks and reads a bundle's; raises ExplorerError."""
    return Bundle.from_dict({"schema_version": SCHEMA_VERSION, "fusion_decisions": d}).fusion_decisions


TRACE_ORIGIN = "the HLO a profiler trace carries (only after optimization)"


def missing_stage_text(b: Bundle, side: str) -> str:
    """What a graph's place says when the bundle has no module for it (``side``: "pre"/"post")."""
    if side == "pre" and b.environment.get("origin") == TRACE_ORIGIN:
        return ("A profiler trace carries only the module as it ran, optimized: open the trace with its XLA dump "
                "(XLA_FLAGS=--xla_dump_to=DIR) for the graph before optimization.")
    return "No pre-optimization HLO in this input." if side == "pre" else "No optimized HLO in this input."


def bundle_from_hlo(text: str, name: str = "hlo", file: str | None = None,
                    before_text: str | None = None) -> Bundle:
    """A Bundle from plain HLO text (an XLA dump from any machine). Whether it is before or
    after optimization is read from the text (scheduled or containing fusions = after)."""
    try:
        module = parse_module(text)
        before = parse_module(before_text) if before_text else None
    except HloParseError as e:
        raise from_parse_error(e, file) from None
    for m in (module, before):
        if m is not None:
            _check_shapes(m, file)
    stages = {}
    if looks_optimized(module):
        stages["hlo_after"] = text
        if before is not None:
            stages["hlo_before"] = before_text
    else:
        stages["hlo_before"] = text
    platform = detect_platform(module) if "hlo_after" in stages else "unknown"
    b = Bundle(
        source={"kind": "hlo", "name": name or module.name, "file": file, "code": None},
        options={},
        environment={"platform": platform, "backend": platform, "origin": "imported HLO text"},
        stages=stages, created=now(),
    )
    try:
        return analyze(b)
    except ExplorerError as e:  # e.g. a computation that calls itself: name the file
        raise ExplorerError(e.phase, e.message, e.file or file, e.line, e.column, e.excerpt) from None
