"""Graphviz layouts cached by their DOT text, shared by every caller in this process (every
session of the app's server): a layout is a pure function of its DOT, so a graph asked for
again (a rerun, another tab, a download) is not laid out again. It is a small LRU of our own
rather than Streamlit's cache so that both sides of a compile can be laid out at once in
Graphviz's processes, and it imports no Streamlit, so the HTML report can share it.

A DOT text Graphviz could not lay out (a timeout, a refusal) is remembered for a while too:
asked again at once it fails at once instead of after another minute of Graphviz."""

from __future__ import annotations

import html
import threading
import time
from collections import OrderedDict
from typing import Callable

from analysis.render.graphviz_runner import render_svgs_each, render_svgs_start

SVG_CACHE: "OrderedDict[str, str]" = OrderedDict()
SVG_LOCK = threading.Lock()
_SVG_MAX = 64
_SVG_MAX_CHARS = 48 << 20  # and at most this much SVG text in all: one huge upload must not pin it

# DOT texts Graphviz could not lay out, with when and why, for FAILED_FOR_S
_SVG_FAILED: "OrderedDict[str, tuple[float, str]]" = OrderedDict()
FAILED_FOR_S = 600.0

# DOT texts being laid out now, each with the event set once its outcome is remembered: asked
# for meanwhile, a layout is waited for rather than made a second time (the report's layers are
# started as soon as they are made, and asked for again by the page)
_PENDING: dict[str, threading.Event] = {}


def _trim_svg_cache() -> None:
    total = sum(len(v) for v in SVG_CACHE.values())
    while SVG_CACHE and (len(SVG_CACHE) > _SVG_MAX or total > _SVG_MAX_CHARS):
        _, v = SVG_CACHE.popitem(last=False)
        total -= len(v)


def _failed(dot: str) -> str | None:
    hit = _SVG_FAILED.get(dot)
    if hit is None:
        return None
    if time.monotonic() - hit[0] > FAILED_FOR_S:
        del _SVG_FAILED[dot]
        return None
    return hit[1]


def _remember(dot: str, result) -> None:
    if isinstance(result, RuntimeError):
        _SVG_FAILED[dot] = (time.monotonic(), str(result))
        while len(_SVG_FAILED) > _SVG_MAX:
            _SVG_FAILED.popitem(last=False)
    else:
        SVG_CACHE[dot] = result
        _trim_svg_cache()


def layout_all(specs) -> None:
    """Lay out every graph not yet in the cache, all at once; raises the first failure (the
    others are kept)."""
    layout_dots_start([s.to_dot() for s in specs if s is not None])()


def layout_dots_start(dots: list[str]) -> Callable[[], None]:
    """``layout_all`` of DOT texts, started: the layouts run in Graphviz's processes while the
    caller goes on, and are cached as each batch ends, whether or not anyone waits; calling what
    this returns waits for them (and for those another caller started) and raises the first
    failure among them."""
    wanted = list(dict.fromkeys(dots))
    with SVG_LOCK:
        missing = [d for d in wanted if d not in SVG_CACHE and d not in _PENDING and _failed(d) is None]
        for d in missing:
            _PENDING[d] = threading.Event()
        events = [_PENDING[d] for d in wanted if d in _PENDING]
    if missing:
        try:
            pending = render_svgs_start(missing)
        except RuntimeError as e:  # Graphviz is not installed: every one of them fails, now
            _settle(missing, [e] * len(missing))
            raise
        threading.Thread(target=lambda: _settle(missing, pending()), name="xla-explorer-layouts", daemon=True).start()

    def finish() -> None:
        for ev in events:
            ev.wait()
        with SVG_LOCK:
            failed = [_failed(d) for d in wanted if d not in SVG_CACHE and _failed(d) is not None]
        if failed:
            raise RuntimeError(failed[0])

    return finish


def _settle(dots: list[str], results: list) -> None:
    """The outcomes of layouts started together, remembered, and their waiters woken."""
    with SVG_LOCK:
        for d, r in zip(dots, results):
            _remember(d, r)
            ev = _PENDING.pop(d, None)
            if ev is not None:
                ev.set()


def layout_svg(dot: str) -> str:
    """The SVG of a DOT text, from the cache (laid out on a miss); raises RuntimeError with
    Graphviz's reason when it cannot be laid out."""
    with SVG_LOCK:
        if dot in SVG_CACHE:
            SVG_CACHE.move_to_end(dot)
            return SVG_CACHE[dot]
        why = _failed(dot)
    if why is not None:
        raise RuntimeError(why)
    result = render_svgs_each([dot])[0]
    with SVG_LOCK:
        _remember(dot, result)
    if isinstance(result, RuntimeError):
        raise result
    return result


def svg_or_error(dot: str) -> str:
    """``layout_svg``, or the reason it failed as a paragraph of HTML (shown in the graph's pane)."""
    try:
        return layout_svg(dot)
    except RuntimeError as e:
        return f"<p>{html.escape(str(e))}</p>"
