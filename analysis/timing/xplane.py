"""A profiler trace's XSpace (``<host>.xplane.pb``), decoded without JAX.

``jax.profiler.trace(DIR)`` always writes ``DIR/plugins/profile/<run>/<host>.xplane.pb``, a
serialized ``XSpace`` protobuf: planes (``/host:CPU``, ``/device:GPU:N``, ``/device:TPU:N``, ...)
-> lines (a thread, a GPU stream, a TPU core's "XLA Ops" row) -> events, each pointing at an
event metadata entry of its plane (the name, an optional display name, stats shared by every
occurrence) and carrying stats of its own, whose names are in the plane's stat metadata.

The messages are built here at run time from the field numbers of the schema (tsl's
``xplane.proto``: XSpace, XPlane, XLine, XEvent, XStat, XEventMetadata, XStatMetadata, read with
the project's search tool) and parsed by the ``protobuf`` package, the library the app's server
already runs on every message a browser sends it (Streamlit's websocket handler parses them with
it in the same process); its parser is fuzzed upstream on arbitrary payloads. No code generated
from the ``.proto`` file is kept here, and nothing of JAX is imported, so the app's server can
read an uploaded trace.

What comes out (``read_xspace``) has the shape of ``jax.profiler.ProfileData`` (what
``analysis.timing.profiles.events_from_profile`` reads), built the way the trace viewer's JSON export
(``xplane_to_trace_events.cc``) builds its events, so a ``.xplane.pb`` and the
``.trace.json.gz`` written beside it read the same:

- an event's start is its line's ``timestamp_ns`` plus its ``offset_ps``, in ns (ProfileData's
  ``start_ns``, which truncates to whole ns; here the fraction is kept);
- its name is its metadata's display name where it has one, with the full name kept as a
  ``long_name`` stat (the JSON export does this; ProfileData gives the name alone: TPU op events
  name their HLO instruction by the display name, docs/xla-findings.md);
- its stats are its metadata's stats, then its own (the JSON export's order; ProfileData gives
  the event's own only); a ``ref_value`` is the name of the stat metadata it points at; bytes
  values (serialized protos such as the metadata plane's ``Hlo Proto``) are left out;
- a line's name is its display name where it has one (the JSON export's thread name), else its
  name (ProfileData's);
- aggregated events (``num_occurrences`` instead of an offset) have no time and are left out, so
  are events of negative duration;
- a plane also keeps its own stats (device capabilities: ``gpu_device_name`` on a GPU,
  ``device_type_string`` on a TPU), which the JSON export does not write;
- the programs the trace carries (``Space.programs``): the ``/host:metadata`` plane's event
  metadata, one per compiled module, named ``<module>(<program_id>)``, hold the module as XLA
  ran it (an ``Hlo Proto`` stat: a serialized ``HloProto``, whose field 1 is the
  ``HloModuleProto``). Its bytes are kept as they are: turning them into HLO text takes XLA's own
  deserializer, which runs in the sandboxed worker (``analysis.compile.hlo_proto``).

Why the ``protobuf`` library and not ``jax.profiler.ProfileData`` (jaxlib's XSpace reader),
which the gate's worker could run: ProfileData gives an event its name alone (not the display
name a TPU's op events name their instruction by), its own stats only (not its metadata's, where
XLA:GPU puts ``hlo_op``), no bytes stats (so not the ``Hlo Proto`` of each program), and no
plane stats (the device's model): the timings and the HLO of a trace alone are read from those.

Untrusted input (read in the sandboxed worker, behind the gate: ``analysis.inputs``): the bytes
are bounded by the caller, the top level's entries (planes) counted on the wire before anything
is built, the events, metadata entries and stats counted before they are turned into objects,
strings cut to a length; anything that does not parse is one ``ExplorerError`` line.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from analysis.errors import ExplorerError

MAX_EVENTS = 3_000_000        # events of all planes
MAX_METADATA = 3_000_000      # event and stat metadata entries of all planes
MAX_STATS = 12_000_000        # stat values kept, events' and metadata's together
MAX_LINES = 100_000
MAX_NAME = 500                # characters of an event's name kept
MAX_VALUE = 2000              # characters of a string stat kept
MAX_PROGRAMS = 1000           # compiled modules a trace may carry the HLO of
MAX_TOP_LEVEL = 10_000        # planes, errors, warnings, hostnames (a handful in a real trace)


class Event(NamedTuple):
    name: str
    start_ns: float
    duration_ns: float
    stats: list               # (name, value) pairs; a name may repeat


class Line(NamedTuple):
    name: str
    events: list


class Plane(NamedTuple):
    name: str
    lines: list
    stats: list = []          # the plane's own (name, value) pairs


class Program(NamedTuple):
    """A compiled module a trace carries: its name, its program id, its ``HloModuleProto``."""

    module: str
    program_id: int | None
    proto: bytes


class Space(NamedTuple):
    """Planes -> lines -> events, shaped like ``jax.profiler.ProfileData``; and the programs
    the trace carries."""

    planes: list
    programs: list = []


# (message, [(field, number, type, label, message type)], (oneof name, its fields) or None),
# from tsl's xplane.proto. The two maps (XPlane.event_metadata, XPlane.stat_metadata) are read as
# their wire form, repeated key/value entries, and made into dicts here.
_I64, _U64, _DBL, _STR, _BYTES, _MSG = "int64", "uint64", "double", "string", "bytes", "message"
_SCHEMA = (
    ("XStat", [("metadata_id", 1, _I64, 1, None), ("double_value", 2, _DBL, 1, None),
               ("uint64_value", 3, _U64, 1, None), ("int64_value", 4, _I64, 1, None),
               ("str_value", 5, _STR, 1, None), ("bytes_value", 6, _BYTES, 1, None),
               ("ref_value", 7, _U64, 1, None)],
     ("value", ("double_value", "uint64_value", "int64_value", "str_value", "bytes_value", "ref_value"))),
    ("XEvent", [("metadata_id", 1, _I64, 1, None), ("offset_ps", 2, _I64, 1, None),
                ("num_occurrences", 5, _I64, 1, None), ("duration_ps", 3, _I64, 1, None),
                ("stats", 4, _MSG, 3, "XStat")],
     ("data", ("offset_ps", "num_occurrences"))),
    ("XLine", [("id", 1, _I64, 1, None), ("display_id", 10, _I64, 1, None), ("name", 2, _STR, 1, None),
               ("display_name", 11, _STR, 1, None), ("timestamp_ns", 3, _I64, 1, None),
               ("duration_ps", 9, _I64, 1, None), ("events", 4, _MSG, 3, "XEvent")], None),
    ("XEventMetadata", [("id", 1, _I64, 1, None), ("name", 2, _STR, 1, None),
                        ("display_name", 4, _STR, 1, None), ("metadata", 3, _BYTES, 1, None),
                        ("stats", 5, _MSG, 3, "XStat"), ("child_id", 6, _I64, 3, None)], None),
    ("XStatMetadata", [("id", 1, _I64, 1, None), ("name", 2, _STR, 1, None),
                       ("description", 3, _STR, 1, None)], None),
    ("EventMetadataEntry", [("key", 1, _I64, 1, None), ("value", 2, _MSG, 1, "XEventMetadata")], None),
    ("StatMetadataEntry", [("key", 1, _I64, 1, None), ("value", 2, _MSG, 1, "XStatMetadata")], None),
    ("XPlane", [("id", 1, _I64, 1, None), ("name", 2, _STR, 1, None), ("lines", 3, _MSG, 3, "XLine"),
                ("event_metadata", 4, _MSG, 3, "EventMetadataEntry"),
                ("stat_metadata", 5, _MSG, 3, "StatMetadataEntry"), ("stats", 6, _MSG, 3, "XStat")], None),
    ("XSpace", [("planes", 1, _MSG, 3, "XPlane"), ("errors", 2, _STR, 3, None),
                ("warnings", 3, _STR, 3, None), ("hostnames", 4, _STR, 3, None)], None),
    # xla's hlo.proto: an HloProto's first field is the HloModuleProto, kept as bytes here
    ("HloProto", [("hlo_module", 1, _BYTES, 1, None)], None),
)
_PACKAGE = "xla_explorer.xspace"


@functools.cache
def message_classes() -> dict:
    """The schema's message classes by name (built once, in a descriptor pool of their own)."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    F = descriptor_pb2.FieldDescriptorProto
    types = {_I64: F.TYPE_INT64, _U64: F.TYPE_UINT64, _DBL: F.TYPE_DOUBLE, _STR: F.TYPE_STRING,
             _BYTES: F.TYPE_BYTES, _MSG: F.TYPE_MESSAGE}
    labels = {1: F.LABEL_OPTIONAL, 3: F.LABEL_REPEATED}
    fd = descriptor_pb2.FileDescriptorProto(name="xla_explorer_xspace.proto", package=_PACKAGE, syntax="proto3")
    for name, fields, oneof in _SCHEMA:
        m = fd.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof[0])
        for fname, number, typ, label, ref in fields:
            f = m.field.add(name=fname, number=number, type=types[typ], label=labels[label])
            if ref:
                f.type_name = f".{_PACKAGE}.{ref}"
            if oneof and fname in oneof[1]:
                f.oneof_index = 0
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    try:
        from google.protobuf.message_factory import GetMessageClass
    except ImportError:  # protobuf < 4.21
        from google.protobuf.message_factory import MessageFactory

        GetMessageClass = MessageFactory(pool).GetPrototype  # noqa: N806
    return {name: GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")) for name, _, _ in _SCHEMA}


def _stat_value(stat, stat_names: dict):
    kind = stat.WhichOneof("value")
    if kind is None or kind == "bytes_value":
        return None
    if kind == "ref_value":
        return stat_names.get(stat.ref_value, "")[:MAX_VALUE]
    v = getattr(stat, kind)
    return v[:MAX_VALUE] if kind == "str_value" else v


def _stats(stats, stat_names: dict, out: list) -> list:
    for s in stats:
        name = stat_names.get(s.metadata_id)
        if name is None:
            continue  # no stat metadata: nothing names it (ProfileData gives (None, None))
        v = _stat_value(s, stat_names)
        if v is not None:
            out.append((name, v))
    return out


def count_top_level(data: bytes, limit: int = MAX_TOP_LEVEL) -> int | None:
    """How many entries (planes, errors, warnings, hostnames) the top level of a serialized
    XSpace holds, read off the wire format without parsing anything inside them, stopping past
    ``limit`` (then ``limit + 1``); None where the top level is not well formed (the parser then
    says so). The protobuf library builds the whole message before anything can be counted, and
    a plane costs the loop over them a Python object: millions of empty planes in a few
    kilobytes zipped were tens of seconds and a gigabyte before any bound was checked."""
    n, pos, end = 0, 0, len(data)

    def varint(p: int) -> tuple[int, int] | None:
        v, shift = 0, 0
        while p < end and shift < 64:
            b = data[p]
            v |= (b & 0x7F) << shift
            p += 1
            if not b & 0x80:
                return v, p
            shift += 7
        return None

    while pos < end:
        got = varint(pos)
        if got is None:
            return None
        tag, pos = got
        wire = tag & 7
        if wire == 0:
            got = varint(pos)
            if got is None:
                return None
            pos = got[1]
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            got = varint(pos)
            if got is None:
                return None
            length, pos = got
            pos += length
        else:
            return None
        n += 1
        if n > limit:
            return n
    return n if pos == end else None


def read_xspace(data: bytes, name: str = "trace") -> Space:
    """A serialized XSpace -> ``Space`` (see the module docstring). Refuses in one line what is no
    XSpace or holds more than the bounds above, the planes counted before anything is built."""
    entries = count_top_level(data)
    if entries is not None and entries > MAX_TOP_LEVEL:
        raise ExplorerError("trace", f"over {MAX_TOP_LEVEL:,} planes and other entries, more than a trace may hold",
                            name)
    XSpace = message_classes()["XSpace"]  # noqa: N806
    space = XSpace()
    try:
        space.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - the parser's DecodeError, or a RuntimeError on deep nesting
        raise ExplorerError("trace", f"not an XSpace (.xplane.pb): its bytes do not parse as one ({type(e).__name__})",
                            name) from None
    planes = space.planes
    if not len(planes):
        raise ExplorerError("trace", "no planes: not a jax.profiler trace (.xplane.pb)", name)
    n_lines = sum(len(p.lines) for p in planes)
    n_events = sum(len(ln.events) for p in planes for ln in p.lines) if n_lines <= MAX_LINES else 0
    n_meta = sum(len(p.event_metadata) + len(p.stat_metadata) for p in planes)
    if n_lines > MAX_LINES:
        raise ExplorerError("trace", f"{n_lines:,} lines, over the {MAX_LINES:,} a trace may hold", name)
    if n_events > MAX_EVENTS:
        raise ExplorerError("trace", f"{n_events:,} events, over the {MAX_EVENTS:,} a trace may hold", name)
    if n_meta > MAX_METADATA:
        raise ExplorerError("trace", f"{n_meta:,} metadata entries, over the {MAX_METADATA:,} a trace may hold", name)
    kept = 0
    out = []
    for p in planes:
        stat_names = {e.key: e.value.name[:100] for e in p.stat_metadata}
        metas = {}
        for e in p.event_metadata:
            m = e.value
            st = _stats(m.stats, stat_names, [])
            label = m.name[:MAX_NAME]
            if m.display_name:
                st.append(("long_name", m.name[:MAX_VALUE]))
                label = m.display_name[:MAX_NAME]
            kept += len(st)
            metas[e.key] = (label, st)
        lines = []
        for ln in p.lines:
            t0 = float(ln.timestamp_ns)
            events = []
            for ev in ln.events:
                if ev.WhichOneof("data") == "num_occurrences" or ev.duration_ps < 0:
                    continue
                label, mst = metas.get(ev.metadata_id, ("", []))
                st = _stats(ev.stats, stat_names, list(mst))
                kept += len(st)
                if kept > MAX_STATS:
                    raise ExplorerError("trace", f"over {MAX_STATS:,} stat values, more than a trace may hold", name)
                events.append(Event(label, t0 + ev.offset_ps / 1000.0, ev.duration_ps / 1000.0, st))
            lines.append(Line((ln.display_name or ln.name)[:200], events))
        out.append(Plane(p.name[:200], lines, _stats(p.stats, stat_names, [])))
    return Space(out, _programs(planes, name))


_CALLED = re.compile(r"(.*)\((\d+)\)")


def _programs(planes, name: str) -> list[Program]:
    """The modules the ``/host:metadata`` plane carries (see the module docstring)."""
    HloProto = message_classes()["HloProto"]  # noqa: N806
    out = []
    for p in planes:
        if p.name != "/host:metadata":
            continue
        stat_names = {e.key: e.value.name for e in p.stat_metadata}
        for e in p.event_metadata:
            m = e.value
            blob = next((s.bytes_value for s in m.stats if stat_names.get(s.metadata_id) == "Hlo Proto"
                         and s.WhichOneof("value") == "bytes_value"), None)
            if blob is None:
                continue
            if len(out) >= MAX_PROGRAMS:
                raise ExplorerError("trace", f"over the {MAX_PROGRAMS:,} compiled modules a trace may carry", name)
            hp = HloProto()
            try:
                hp.ParseFromString(blob)
            except Exception:  # noqa: BLE001 - the parser's DecodeError: this module is not read
                continue
            if not hp.hlo_module:
                continue
            pid = next((v for k, v in _stats(m.stats, stat_names, []) if k == "program_id"
                        and isinstance(v, int)), None)
            called = _CALLED.fullmatch(m.name[:MAX_NAME])
            module = called.group(1) if called else m.name[:MAX_NAME]
            if pid is None and called:
                pid = int(called.group(2))
            out.append(Program(module, pid, hp.hlo_module))
    return out
