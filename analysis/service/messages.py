"""The worker's messages: the one module that says what a worker and its parent tell each other,
and what a worker leaves out of its answer that the parent puts back (docs/worker.md).

A worker (``python -m analysis.service.worker_main``) reads one ``Job`` as JSON on its stdin and
writes one JSON object a line on its stdout, ``{KIND: VALUE}``:

- ``Progress`` (``progress``): a phase (``analysis.service.job.PHASES``), any number of times;
- early, while it works, each at most ``EARLY[kind]`` times: ``Texts`` (its HLO texts as XLA
  dumps them, then the compiled ones where they differ), ``Decisions`` (the fusion decisions it
  made beside the compile), ``Preview`` (a measuring job's bundle once compiled, before it is
  measured);
- then exactly one final message: ``Answer`` (the bundle), ``Measured`` (what measuring added,
  after a ``Preview``), ``Failure`` (an ``ExplorerError`` as a dict) or ``Probe`` (a probe
  job's device facts).

Everything read here is untrusted: ``read`` gives the message an object stands for, or None for
anything else, and the values are checked by whoever takes them (``analysis.service.worker``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, Union

from analysis import tuning

# What a worker sends after its preview (``Measured``): what was read from the dump after the
# preview was sent (the buffer assignment with XLA's estimates it is checked against, the
# kernels' code: ``analysis.compile.stages.GRAPHS_LATER``) and what measuring added; the parent
# completes its copy of the preview with them
MEASURED_FIELDS = ("timings", "fusion_comparison", "inductor", "memory", "memory_analysis", "cost_analysis", "code")


@dataclass(frozen=True)
class Progress:
    phase: Any


@dataclass(frozen=True)
class Texts:
    texts: Any  # stage -> text


@dataclass(frozen=True)
class Decisions:
    records: Any  # the fusion decisions' JSON (analysis.fusion.codec)


@dataclass(frozen=True)
class Preview:
    bundle: Any  # a bundle's JSON, as ``leave_out`` makes it


@dataclass(frozen=True)
class Answer:
    bundle: Any  # a bundle's JSON, as ``leave_out`` makes it


@dataclass(frozen=True)
class Measured:
    fields: Any  # MEASURED_FIELDS -> their JSON


@dataclass(frozen=True)
class Failure:
    error: Any  # ExplorerError.to_dict()


@dataclass(frozen=True)
class Probe:
    facts: Any


Message = Union[Progress, Texts, Decisions, Preview, Answer, Measured, Failure, Probe]
KINDS: dict[str, type] = {"progress": Progress, "texts": Texts, "decisions": Decisions, "preview": Preview,
                          "bundle": Answer, "measured": Measured, "error": Failure, "probe": Probe}
_KIND_OF = {cls: kind for kind, cls in KINDS.items()}
# The early messages a parent passes on, at most: a preview once; the HLO texts as XLA dumps them
# (before optimization, optimized) and once compiled, where they differ; the decisions once.
EARLY: dict[type, int] = {Preview: 1, Texts: 3, Decisions: 1}
FINAL = (Answer, Measured, Failure, Probe)


def wire(msg: Message) -> dict:
    """``msg`` as the JSON object a worker writes (``{KIND: VALUE}``)."""
    (value,) = vars(msg).values()
    return {_KIND_OF[type(msg)]: value}


def line(msg: Message) -> str:
    """``msg`` as the line a worker writes."""
    return json.dumps(wire(msg)) + "\n"


def read(obj) -> Message | None:
    """The message a decoded JSON value stands for: an object of one key, a kind of ``KINDS``;
    None for anything else (a worker's other output is not read)."""
    if not isinstance(obj, dict) or len(obj) != 1:
        return None
    (kind, value), = obj.items()
    cls = KINDS.get(kind)
    return cls(value) if cls is not None else None


def leave_out(bundle, sent: dict, decided=None) -> dict:
    """The bundle as a worker sends it (``Answer``, ``Preview``): without what the parent derives
    again from the HLO anyway (kernels, provenance) and without the HLO texts it sent already
    (``sent``, from its ``Texts``): for a big program, much of what the parent decoded only to
    drop (docs/performance.md). The fusion decisions are left out when they are ``decided``,
    the ones sent early (``Decisions``). ``put_back`` is the parent's half."""
    omit = ("kernels", "provenance")
    if decided is not None and bundle.fusion_decisions is decided:
        omit += ("fusion_decisions",)
    with tuning.building():  # a big program's records, a heap of millions of objects: no collector passes
        d = bundle.to_dict(leave_out=omit)
    stages = d.get("stages")
    if isinstance(stages, dict):
        # (equal, not only the same object: the compile may have read a dump again after sending
        # it, and which of two equal texts the bundle holds depends on the threads' timing)
        d["stages"] = {k: v for k, v in stages.items() if not (k in sent and (sent[k] is v or sent[k] == v))}
    return d


def measured_fields(bundle) -> dict:
    """A measured bundle's ``MEASURED_FIELDS`` as JSON values (a ``Measured`` message's)."""
    return bundle.to_dict(leave_out=tuple(f.name for f in fields(bundle) if f.name not in MEASURED_FIELDS))


def put_back(d, sent: dict | None, order: tuple[str, ...]) -> None:
    """``leave_out``'s HLO texts put back into a worker's bundle JSON ``d`` from the ones it sent
    early (``sent``), in the stages' usual ``order``; the fusion decisions it left out are the
    caller's (checked when they came)."""
    if sent and isinstance(d, dict) and isinstance(d.get("stages"), dict):
        own = d["stages"]
        back = {k: v for k, v in sent.items() if k in order and k not in own}
        if back:
            d["stages"] = {k: own[k] if k in own else back[k] for k in (*order, *own) if k in own or k in back}
