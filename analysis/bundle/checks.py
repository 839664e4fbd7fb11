"""A bundle's JSON checked as the untrusted data it is (an upload, a worker's answer, a cached
entry): how deep it nests, the type of each field, and the nested parts the views index by key
(timings rows, pass-log entries, the fusion decisions' records and edges), so that a view never
meets a list where it reads a field, and every bad bundle is one ``load`` error naming the
field. ``Bundle.from_dict`` applies these; the records themselves are read by
``analysis.fusion.codec``."""

from __future__ import annotations

from analysis import columns
from analysis.errors import ExplorerError
from analysis.program import memory
from analysis.measures import fusion_savings

# What each JSON field must be (checked on load, so a view never meets e.g. a list as metrics).
_NONE = type(None)
FIELD_TYPES = {
    "source": (dict,), "options": (dict,), "environment": (dict,), "stages": (dict,),
    "cost_analysis": (dict, _NONE), "memory_analysis": (dict, _NONE), "phase_seconds": (dict,),
    "kernels": (list,), "provenance": (dict, _NONE), "metrics": (dict,), "timings": (dict, _NONE),
    "fusion_comparison": (dict, _NONE), "pass_log": (list, _NONE), "fusion_decisions": (dict, _NONE),
    "memory": (dict, _NONE), "code": (dict, _NONE), "inductor": (dict, _NONE), "created": (str,),
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
    check_upload(kw)


def drop_object_files(d) -> None:
    """A bundle's JSON (``d``) without the object files its code may hold: a process that runs no
    ELF reader (the app's server) keeps none. The worker that made the bundle disassembled them
    (``analysis.codegen.finish.disassemble_objects``); a kernel whose object is dropped here keeps its
    other stages."""
    code = d.get("code") if isinstance(d, dict) else None
    kernels = code.get("kernels") if isinstance(code, dict) else None
    if isinstance(kernels, dict):
        for k in kernels.values():
            if isinstance(k, dict):
                k.pop("elf", None)


# What an opened upload may say it holds besides (``analysis.inputs.opener``)
UPLOAD_KINDS = ("hlo", "bundle", "dump", "trace")
MAX_UPLOAD_CHOICES = 500


def check_upload(kw: dict) -> None:
    """``source.upload`` (what the gate says an upload holds: its kind, files, the modules or
    programs to choose from) as the front ends read it: its kind one of ``UPLOAD_KINDS``, at
    most ``MAX_UPLOAD_CHOICES`` choices, texts cut to 200 characters, numbers numbers."""
    src = kw.get("source")
    up = src.get("upload") if isinstance(src, dict) else None
    if up is None:
        return
    if not isinstance(up, dict) or up.get("kind") not in UPLOAD_KINDS:
        raise _bad("source.upload", f"must say its kind ({', '.join(UPLOAD_KINDS)})")
    choices = up.get("choices", [])
    if not isinstance(choices, list) or len(choices) > MAX_UPLOAD_CHOICES:
        raise _bad("source.upload.choices", f"must be a list of at most {MAX_UPLOAD_CHOICES} choices")

    def text(v, where):
        if not isinstance(v, _OPT_STR):
            raise _bad(where, "must be text")
        return v[:200] if v is not None else None

    clean = []
    for n, c in enumerate(choices):
        where = f"source.upload.choices[{n}]"
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise _bad(where, "needs a name")
        kernels, seconds = c.get("kernels"), c.get("kernel_s")
        if not isinstance(kernels, _OPT_INT) or isinstance(kernels, bool) or not isinstance(seconds, _OPT_NUM) \
                or isinstance(seconds, bool):
            raise _bad(where, "needs whole kernels and kernel_s seconds (or null)")
        clean.append({"name": c["name"][:200], "label": text(c.get("label"), where) or c["name"][:200],
                      "kernels": kernels, "passes": c.get("passes") is True, "kernel_s": seconds})
    src["upload"] = {"kind": up["kind"], "file": text(up.get("file"), "source.upload.file"),
                     "trace_file": text(up.get("trace_file"), "source.upload.trace_file"),
                     "picked": text(up.get("picked"), "source.upload.picked"), "choices": clean}


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


# The most schedule steps and buffer values a bundle's memory may hold (a 192-layer program's
# schedule is under 100,000 steps); the views make a row per step, so the bound is the memory
# they may take (a forged 3-million-step schedule was +800 MB).
MAX_STEPS = 500_000
MAX_VALUES = 2_000_000

_INT = (int,)
_OPT_INT = (int, type(None))
_OPT_STR = (str, type(None))
# what the views and the live curve read of each value and allocation, and its type
_VALUE_FIELDS = {"name": (str,), "kind": (str,), "allocation": _INT, "offset": _INT, "size": _INT,
                 "start": _OPT_INT, "end": _OPT_INT, "shape": _OPT_STR, "instruction": _OPT_STR,
                 "kernel": _OPT_STR, "opcode": _OPT_STR, "op_name": _OPT_STR, "id": _OPT_INT}
_ALLOC_FIELDS = {"index": _INT, "size": _INT, "kind": (str,)}
_PEAK_FIELDS = {"bytes": _INT, "step": _INT, "instruction": (str,), "temp_bytes": _OPT_INT, "temp_peak_bytes": _OPT_INT}
KINDS = ("parameter", "output", "temp", "constant", "thread-local")  # an allocation's (analysis.program.memory)


def _whole(v):
    """A whole number written as a float (``134664.0``) as the int it is; anything else as it was."""
    return int(v) if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 63 else v


def _typed(row, spec: dict) -> bool:
    return isinstance(row, dict) and all(
        isinstance(row.get(k), t) and not isinstance(row.get(k), bool) for k, t in spec.items()
        if k in row or type(None) not in t)


def check_memory(kw: dict) -> None:
    """``memory`` as the views read it: a schedule of names, allocations and values of the right
    types, within ``MAX_STEPS`` and ``MAX_VALUES``, sizes and offsets not negative, a value's
    steps in the schedule, the peak at a step of it; its totals and agreement with
    ``memory_analysis`` derived again here (one definition of each number, whatever the file
    said). An
    ``{"error"}`` memory is a message and its files."""
    mem = kw.get("memory")
    if not isinstance(mem, dict):
        return
    if "error" in mem:
        if not isinstance(mem["error"], str):
            raise _bad("memory.error", "must be text")
        kw["memory"] = {"error": mem["error"][:500], "files": [f for f in mem.get("files") or [] if isinstance(f, str)]
                        if isinstance(mem.get("files"), list) else []}
        return
    sched, allocs, values = mem.get("schedule", []), mem.get("allocations", []), mem.get("values", [])
    for name, v in (("schedule", sched), ("allocations", allocs), ("values", values)):
        if not isinstance(v, list):
            raise _bad(f"memory.{name}", "must be a list")
    if len(sched) > MAX_STEPS:
        raise _bad("memory.schedule", f"has {len(sched):,} steps (at most {MAX_STEPS:,})")
    if len(values) > MAX_VALUES:
        raise _bad("memory.values", f"has {len(values):,} values (at most {MAX_VALUES:,})")
    if not all(isinstance(s, str) for s in sched):
        raise _bad("memory.schedule", "must be a list of instruction names")
    if not isinstance(mem.get("end", 0), int) or not isinstance(mem.get("live_ranges"), _OPT_STR):
        raise _bad("memory", "needs an integer end and a text live_ranges")
    for n, a in enumerate(allocs):
        if not _typed(a, _ALLOC_FIELDS) or a["size"] < 0 or a["kind"] not in KINDS:
            raise _bad(f"memory.allocations[{n}]", f"needs an index, a size and a kind ({', '.join(KINDS)})")
    steps = len(sched)
    for n, v in enumerate(values):
        if not _typed(v, _VALUE_FIELDS) or v["offset"] < 0 or v["size"] < 0 or v["kind"] not in KINDS:
            raise _bad(f"memory.values[{n}]", "needs a name, a kind, an allocation, an offset and a size")
        if (v.get("start") is None) != (v.get("end") is None) or v.get("start") is not None and not (
                0 <= v["start"] <= v["end"] < max(steps, mem.get("end", 0) + 1)):
            raise _bad(f"memory.values[{n}]", "has steps outside the schedule")
        src = v.get("source")
        if src is not None and not (isinstance(src, list) and len(src) == 2 and isinstance(src[0], str)
                                    and isinstance(src[1], int)):
            raise _bad(f"memory.values[{n}].source", "must be [file, line]")
        v.setdefault("phi", False)
        v["phi"] = v["phi"] is True
    p = mem.get("peak")
    if isinstance(p, dict):  # bundles before the live curve counted in integers wrote whole floats (134664.0)
        for k in ("bytes", "temp_bytes", "temp_peak_bytes"):
            p[k] = _whole(p.get(k))
        if isinstance(p.get("by_kind"), dict):
            p["by_kind"] = {k: _whole(v) for k, v in p["by_kind"].items()}
        if p.get("temp_bytes") is None:
            p.pop("temp_bytes")
        if p.get("temp_peak_bytes") is None:
            p.pop("temp_peak_bytes")
    if p is not None and not (_typed(p, _PEAK_FIELDS) and 0 <= p["step"] < max(steps, 1) and p["bytes"] >= 0
                              and isinstance(p.get("by_kind", {}), dict)
                              and all(isinstance(x, int) for x in (p.get("by_kind") or {}).values())):
        raise _bad("memory.peak", "needs bytes, a step of the schedule and an instruction")
    # the totals and the agreement with memory_analysis are cheap: derived again, never read
    # (the peak needs the live curve: checked above instead, and views draw the curve itself)
    mem["totals"] = memory.totals(mem)
    ma = kw.get("memory_analysis")
    ma = {k: v for k, v in ma.items() if type(v) in (int, float)} if isinstance(ma, dict) else None
    mem["agreement"] = memory.agreement(mem, ma)


_NUM = (int, float)
_OPT_NUM = (int, float, type(None))
_SIDE_FIELDS = {"kernels": _INT, "bytes": _NUM, "flops": _OPT_NUM, "step_median_s": _OPT_NUM,
                "step_q1_s": _OPT_NUM, "step_q3_s": _OPT_NUM, "step_min_s": _OPT_NUM, "step_max_s": _OPT_NUM,
                "call_median_s": _OPT_NUM, "call_q1_s": _OPT_NUM, "call_q3_s": _OPT_NUM, "call_min_s": _OPT_NUM,
                "device_busy_s": _OPT_NUM, "traced_steps": _OPT_INT, "iterations": _OPT_INT}


def check_fusion_comparison(kw: dict) -> None:
    """``fusion_comparison`` as the summary, the charts and the report read it: two sides
    (``default``, ``unfused``) with whole kernel counts and byte and time numbers, its text fields
    text; what it saved (``kernels_saved``, ``bytes_saved``, ``time_saved_s``, ``speedup``,
    ``step_speedup``) derived again from the two sides (``numbers.fusion_savings``, whatever the
    file said)."""
    fc = kw.get("fusion_comparison")
    if not isinstance(fc, dict):
        return
    for side in ("default", "unfused"):
        s = fc.get(side)
        if not _typed(s, _SIDE_FIELDS) or any(isinstance(v, _NUM) and v < 0 for v in s.values() if not isinstance(v, bool)):
            raise _bad(f"fusion_comparison.{side}", "needs whole kernels, bytes and times that are numbers (not negative)")
        rows = s.get("top_kernels", [])
        if not isinstance(rows, list) or not all(
                isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("route", ""), str)
                and isinstance(r.get("median_s"), _NUM) and isinstance(r.get("calls", 1), _NUM) for r in rows):
            raise _bad(f"fusion_comparison.{side}.top_kernels", "must be rows of a name, a route and a median_s")
        if not isinstance(s.get("kernels_by_route", {}), dict):
            raise _bad(f"fusion_comparison.{side}.kernels_by_route", "must be an object")
        c = s.get("code")
        if c is not None and not (isinstance(c, dict) and all(
                type(c.get(k)) is int and c[k] >= 0 for k in ("kernels", "global_loads", "global_stores"))
                and c["kernels"] <= s["kernels"]):
            raise _bad(f"fusion_comparison.{side}.code", "needs whole kernels (at most the side's), global_loads "
                                                         "and global_stores")
        if c is not None:
            s["code"] = {k: c[k] for k in ("kernels", "global_loads", "global_stores")}
    passes = fc.get("disabled_passes", [])
    if not isinstance(passes, list) or not all(isinstance(p, str) for p in passes):
        raise _bad("fusion_comparison.disabled_passes", "must be a list of pass names")
    for k in ("platform", "note", "unfused_hlo_after"):
        if not isinstance(fc.get(k), _OPT_STR):
            raise _bad(f"fusion_comparison.{k}", "must be text")
    if not isinstance(fc.get("memory"), (dict, type(None))) or not isinstance(fc.get("compiler_options", {}), dict):
        raise _bad("fusion_comparison", "has a memory or compiler_options that is not an object")
    fc["measured"] = fc.get("measured") is True
    fc.update(fusion_savings(fc))


# ``inductor`` (PyTorch's compiler beside XLA: analysis.compile.inductor) as the study and the
# views read it; its bounds are the worker's too
INDUCTOR_MAX_KERNELS = 4000
INDUCTOR_MAX_CODE_CHARS = 60_000
INDUCTOR_MAX_CODE_TOTAL = 3_000_000
INDUCTOR_KINDS = ("cpp", "extern", "fallback")
_ALTERNATION_STOPS = ("parted", "calls", "time")
_CALL_KEYS = ("call_median_s", "call_q1_s", "call_q3_s", "call_min_s", "call_max_s")
_TIME_KEYS = ("median_s", "q1_s", "q3_s", "min_s", "max_s")


def _texts(v, where: str, most: int, chars: int) -> list:
    if not isinstance(v, list) or len(v) > most or not all(isinstance(x, str) and len(x) <= chars for x in v):
        raise _bad(where, f"must be a list of at most {most} texts of at most {chars} characters")
    return list(v)


def _pairs(v, where: str) -> list:
    if not isinstance(v, list) or len(v) > 500 or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) and len(x) <= 500 for x in p) for p in v):
        raise _bad(where, "must be a list of at most 500 [module, op] pairs of texts")
    return [list(p) for p in v]


def _short(v, where: str, chars: int, optional: bool = False):
    if (v is None and optional) or (isinstance(v, str) and len(v) <= chars):
        return v
    raise _bad(where, f"must be text of at most {chars} characters")


def _seconds(d: dict, keys: tuple, where: str) -> dict:
    out = {}
    for k in keys:
        v = d.get(k)
        if v is None:
            continue
        if not isinstance(v, _NUM) or isinstance(v, bool) or not v >= 0 or v == float("inf"):
            raise _bad(f"{where}.{k}", "must be seconds (a number, not negative)")
        out[k] = v
    return out


def _count(v, where: str, optional: bool = True):
    if (v is None and optional) or (type(v) is int and 0 <= v < 2 ** 31):
        return v
    raise _bad(where, "must be a whole number, not negative")


def check_inductor(kw: dict) -> None:
    """``inductor`` rebuilt from what the views read, each value of its type and within its
    bounds (``INDUCTOR_MAX_*``): at most that many call sites, each a name, a kind (one of
    ``INDUCTOR_KINDS``), its ATen ops and module paths as lists of short texts, times in
    seconds; the C++ sources by kernel name, each and all of them bounded; the two programs'
    alternated calls as numbers. Anything else in it is dropped; anything of the wrong type or
    past a bound is one ``load`` error naming where."""
    ind = kw.get("inductor")
    if ind is None:
        return
    if not isinstance(ind, dict):
        raise _bad("inductor", "must be an object")
    rows = ind.get("kernels", [])
    if not isinstance(rows, list) or len(rows) > INDUCTOR_MAX_KERNELS:
        raise _bad("inductor.kernels", f"must be a list of at most {INDUCTOR_MAX_KERNELS} call sites")
    kernels = []
    for n, r in enumerate(rows):
        where = f"inductor.kernels[{n}]"
        if not isinstance(r, dict) or r.get("kind") not in INDUCTOR_KINDS:
            raise _bad(where, f"needs a kind ({', '.join(INDUCTOR_KINDS)})")
        row = {"name": _short(r.get("name"), f"{where}.name", 300), "kind": r["kind"],
               "handle": _count(r.get("handle"), f"{where}.handle"), "graph": _count(r.get("graph", 0), f"{where}.graph"),
               "library": _short(r.get("library"), f"{where}.library", 100, optional=True),
               "aten": _texts(r.get("aten", []), f"{where}.aten", 500, 200),
               "modules": _texts(r.get("modules", []), f"{where}.modules", 500, 500),
               "module": _short(r.get("module"), f"{where}.module", 500, optional=True),
               "source_nodes": _texts(r.get("source_nodes", []), f"{where}.source_nodes", 200, 200),
               "parts": _pairs(r.get("parts", []), f"{where}.parts"),
               "calls": _count(r.get("calls"), f"{where}.calls"),
               **_seconds(r, _TIME_KEYS, where)}
        kernels.append(row)
    code = ind.get("code") or {}
    if not isinstance(code, dict) or len(code) > INDUCTOR_MAX_KERNELS:
        raise _bad("inductor.code", f"must be an object of at most {INDUCTOR_MAX_KERNELS} kernels' sources")
    total = 0
    for k, v in code.items():
        if not isinstance(k, str) or len(k) > 300 or not isinstance(v, str) or len(v) > INDUCTOR_MAX_CODE_CHARS:
            raise _bad("inductor.code", f"must map kernel names to sources of at most {INDUCTOR_MAX_CODE_CHARS:,} characters")
        total += len(v)
    if total > INDUCTOR_MAX_CODE_TOTAL:
        raise _bad("inductor.code", f"holds {total:,} characters of source (at most {INDUCTOR_MAX_CODE_TOTAL:,})")
    sides = {}
    for side in ("xla", "compiled"):
        s = ind.get(side)
        if s is not None and not isinstance(s, dict):
            raise _bad(f"inductor.{side}", "must be an object of call times")
        sides[side] = None if s is None else {**_seconds(s, _CALL_KEYS, f"inductor.{side}"),
                                              "alternated_calls": _count(s.get("alternated_calls"),
                                                                         f"inductor.{side}.alternated_calls")}
    alt = ind.get("alternation")
    if alt is not None:
        if not isinstance(alt, dict) or alt.get("stopped") not in _ALTERNATION_STOPS:
            raise _bad("inductor.alternation", f"needs calls and why they stopped ({', '.join(_ALTERNATION_STOPS)})")
        alt = {"calls": _count(alt.get("calls"), "inductor.alternation.calls"), "stopped": alt["stopped"],
               **{k: v for k, v in _seconds(alt, ("budget_s",), "inductor.alternation").items()}}
    graph_calls = ind.get("graph_calls")
    if graph_calls is not None:
        if not isinstance(graph_calls, dict) or len(graph_calls) > INDUCTOR_MAX_KERNELS:
            raise _bad("inductor.graph_calls", "must be an object of each graph's call times")
        graph_calls = {str(g)[:20]: {**_seconds(t if isinstance(t, dict) else {}, _TIME_KEYS, f"inductor.graph_calls[{str(g)[:20]!r}]"),
                                     "calls": _count((t or {}).get("calls") if isinstance(t, dict) else None,
                                                     "inductor.graph_calls.calls")}
                       for g, t in graph_calls.items()}
    kw["inductor"] = {
        "torch": _short(ind.get("torch"), "inductor.torch", 100, optional=True),
        "device": _short(ind.get("device"), "inductor.device", 40, optional=True),
        "mode": _short(ind.get("mode"), "inductor.mode", 40, optional=True),
        "graphs": _count(ind.get("graphs"), "inductor.graphs"),
        **_seconds(ind, ("compile_s",), "inductor"),
        "kernels": kernels, "code": dict(code), "truncated": ind.get("truncated") is True,
        "measured": ind.get("measured") is True and sides["xla"] is not None and sides["compiled"] is not None,
        "xla": sides["xla"], "compiled": sides["compiled"], "alternation": alt,
        "profiled_calls": _count(ind.get("profiled_calls"), "inductor.profiled_calls"),
        "graph_calls": graph_calls,
    }
