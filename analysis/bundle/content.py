"""Values made from a bundle, kept by what the bundle holds rather than by the bundle object.

A front end makes big values from a compile (the app's graph payload, its kernel table's rows,
the report's layer graphs). The same compile reaches it as several Bundle objects: the draft
made beside the compile (``analysis.pipeline.WorkAhead``), the worker's answer, a measured
bundle after its preview, the same bundle read back from the store or opened from a shared
link. A ``ContentCache`` belongs to the front end that makes the value and finds it for any of
them: its key is a digest of the parts of the bundle the value is made of (``PARTS``), each
digest made once per bundle and object (``Bundle.derived``).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import threading
from collections import OrderedDict
from typing import Callable

from analysis.bundle.core import Bundle
from analysis.program.kernels import detect_platform


def _digest(value) -> str:
    """A digest of a JSON value as it is built: equal digests, equal values (a value built in
    another order digests otherwise, and is made again). Pickled, not JSON-encoded: a 48-layer
    program's fusion decisions take 16 ms so, 75 ms as sorted JSON (docs/performance.md)."""
    try:
        data = pickle.dumps(value, protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        data = json.dumps(value, sort_keys=True, default=str).encode()
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _before(b: Bundle):
    m = b.module("hlo_before")
    return (m,), lambda: m.digest if m is not None else "-"


def _after(b: Bundle):
    m, platform = b.module("hlo_after"), b.environment.get("platform")

    def digest():
        # the platform the kernels were found for: the bundle's, else read off the module (a
        # draft has no environment; ``Pipeline.analysis`` reads it off the module too)
        return f"{m.digest}@{platform or detect_platform(m)}" if m is not None else "-"
    return (m, platform), digest


def _json(read):
    def part(b: Bundle):
        value = read(b)
        return (value,), lambda: _digest(value)
    return part


def _source(b: Bundle):
    code, file = b.source.get("code"), b.source.get("file")
    return (code, file), lambda: _digest([code, file])


# What a value can be made of: part -> (the objects a bundle holds for it, how to digest them).
# The kernels and the provenance are functions of the two modules and the platform ("after"
# carries the platform). The fusion decisions are digested as they stand on the bundle (with
# their kernels: ``derive_decision_kernels``), the same for a draft and the bundle after it.
PARTS = {
    "before": _before,
    "after": _after,
    "decisions": _json(lambda b: b.fusion_decisions),
    "timings": _json(lambda b: b.timings),
    "source": _source,
}


def content_key(bundle: Bundle, parts: tuple[str, ...]) -> str:
    """A digest of ``parts`` (names of ``PARTS``) of what ``bundle`` holds."""
    out = []
    for part in parts:
        objects, digest = PARTS[part](bundle)
        out.append(bundle.derived(f"content:{part}", objects, digest))
    return "|".join(out)


class ContentCache:
    """The last ``size`` values one maker made, by the content of the bundles they were made
    from (``content_key`` of ``parts``). A value being made is waited for, not made twice (the
    draft's work beside a compile and a page asking for the same bundle). Values are shared, so
    callers must not change them."""

    def __init__(self, parts: tuple[str, ...], size: int):
        unknown = set(parts) - set(PARTS)
        if unknown:
            raise ValueError(f"not a part of a bundle: {sorted(unknown)}")
        self.parts, self.size = tuple(parts), size
        self._values: OrderedDict[str, object] = OrderedDict()
        self._making: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, bundle: Bundle, make: Callable[[], object]):
        """The value made for a bundle of this content, else ``make()`` (kept)."""
        key = content_key(bundle, self.parts)
        while True:
            with self._lock:
                if key in self._values:
                    self._values.move_to_end(key)
                    return self._values[key]
                making = self._making.get(key)
                if making is None:
                    making = self._making[key] = threading.Lock()
                    making.acquire()
                    break
            with making:  # another thread makes it: wait, then look again
                pass
        try:
            value = make()
            with self._lock:
                self._values[key] = value
                while len(self._values) > self.size:
                    self._values.popitem(last=False)
            return value
        finally:
            with self._lock:
                del self._making[key]
            making.release()

    def forget(self, bundle: Bundle) -> None:
        """Drop the value made for a bundle of this content (one that failed, to be made again)."""
        key = content_key(bundle, self.parts)
        with self._lock:
            self._values.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
