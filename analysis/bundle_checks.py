"""A bundle's JSON checked as the untrusted data it is (an upload, a worker's answer, a cached
entry): how deep it nests, the type of each field, and the nested parts the views index by key
(timings rows, pass-log entries, the fusion decisions' records and edges), so that a view never
meets a list where it reads a field, and every bad bundle is one ``load`` error naming the
field. ``Bundle.from_dict`` applies these; the records themselves are read by
``analysis.fusion_decisions_codec``."""

from __future__ import annotations

from analysis import columns
from analysis.errors import ExplorerError

# What each JSON field must be (checked on load, so a view never meets e.g. a list as metrics).
_NONE = type(None)
FIELD_TYPES = {
    "source": (dict,), "options": (dict,), "environment": (dict,), "stages": (dict,),
    "cost_analysis": (dict, _NONE), "memory_analysis": (dict, _NONE), "phase_seconds": (dict,),
    "kernels": (list,), "provenance": (dict, _NONE), "metrics": (dict,), "timings": (dict, _NONE),
    "fusion_comparison": (dict, _NONE), "pass_log": (list, _NONE), "fusion_decisions": (dict, _NONE),
    "memory": (dict, _NONE), "created": (str,),
}


def check_field_types(kw: dict) -> None:
    """Each top-level field of a bundle's JSON is of its type (``FIELD_TYPES``)."""
    for name, types in FIELD_TYPES.items():
        if name in kw and not isinstance(kw[name], types):
            want = " or ".join("null" if t is type(None) else {dict: "an object", list: "a list",
                                                               str: "a string"}[t] for t in types)
            raise ExplorerError("load", f"malformed bundle: {name!r} must be {want}, "
                                        f"not {type(kw[name]).__name__}")


# How deep a bundle's JSON may nest (a real one nests fewer than 10 levels): deeper input is
# refused with one line instead of exhausting a recursive walk somewhere later.
MAX_DEPTH = 64


def check_depth(obj, limit: int = MAX_DEPTH) -> None:
    """Raise a ``load`` error if ``obj`` (parsed JSON) nests deeper than ``limit`` (iterative,
    one level at a time: a big bundle has hundreds of thousands of containers, docs/performance.md)."""
    level = [obj] if type(obj) in _NESTS else []
    depth = 1
    while level:
        if depth > limit:
            raise ExplorerError("load", f"not a bundle: JSON nested deeper than {limit} levels")
        below: list = []
        for o in level:
            below.extend([c for c in (o.values() if type(o) is dict else o) if type(c) in _NESTS])
        level, depth = below, depth + 1


_NESTS = (dict, list, tuple)


def _bad(where: str, what: str) -> ExplorerError:
    return ExplorerError("load", f"malformed bundle: {where} {what}")


def check_parts(kw: dict) -> None:
    """The nested parts the views index by key: a row they read a field of must have it, of
    the right type (a bundle from a worker or an upload is untrusted data)."""
    num = (int, float, type(None))
    t = kw.get("timings")
    if isinstance(t, dict) and t.get("kernels") is not None:
        rows = t["kernels"]
        if not isinstance(rows, dict):
            raise _bad("timings.kernels", "must be an object of rows by kernel name")
        for name, row in rows.items():
            if not isinstance(row, dict) or not isinstance(row.get("name", name), str) \
                    or not isinstance(row.get("route", ""), str) or "median_s" not in row \
                    or not isinstance(row["median_s"], num) or isinstance(row["median_s"], bool):
                raise _bad(f"timings.kernels[{str(name)[:60]!r}]", "needs a name, a route and a median_s number")
            row.setdefault("name", name)
    pl = kw.get("pass_log")
    if isinstance(pl, list):
        for n, e in enumerate(pl):
            if not isinstance(e, dict) or not all(isinstance(e.get(k, ""), str) for k in ("pipeline", "pass", "text")):
                raise _bad(f"pass_log[{n}]", "needs text fields pipeline, pass and text")
    for name in ("source", "environment", "options"):
        for k, v in (kw.get(name) or {}).items():
            if not isinstance(k, str):
                raise _bad(name, "has a key that is not text")


_DECISION_TEXTS = ("pass_name", "decision", "producer", "consumer", "reason")


def check_decisions(fd) -> None:
    """The fusion decisions' records and edges, as the views index into them: a record is an
    object whose text fields are text (or missing; its op lists are read leniently,
    ``derive_decision_kernels``); an edge two names and a list of record numbers. By column,
    each distinct value is checked once."""
    if not isinstance(fd, dict):
        return
    recs = fd.get("records", [])

    def text(v):
        return v is None or isinstance(v, str)

    if isinstance(recs, columns.Table):
        for name in _DECISION_TEXTS:
            col = recs.cols.get(name)
            if col is not None and not all(text(v) for v in col[0]):
                raise _bad(f"fusion_decisions.records.{name}", "has a value that is not text")
    elif isinstance(recs, list):
        for n, r in enumerate(recs):
            if not isinstance(r, dict) or not all(text(r.get(k)) for k in _DECISION_TEXTS):
                raise _bad(f"fusion_decisions.records[{n}]", "must be a record whose names and reason are text")
    else:
        raise _bad("fusion_decisions.records", "must be a list of records")
    edges = fd.get("edges", [])
    if not isinstance(edges, list):
        raise _bad("fusion_decisions.edges", "must be a list")
    for n, e in enumerate(edges):
        if not isinstance(e, dict) or not isinstance(e.get("producer"), str) or not isinstance(e.get("consumer"), str) \
                or not isinstance(e.get("records", []), list) \
                or not all(type(i) is int for i in e.get("records", [])):
            raise _bad(f"fusion_decisions.edges[{n}]", "needs producer and consumer names and a list of record numbers")
