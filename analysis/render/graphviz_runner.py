"""Graphviz's ``dot``, run: DOT text in, SVG text out, one ``dot`` process per graph, each with a
time limit, and never more of them at once in this process than the machine has cores.

Laying a graph out is CPU-bound work in its own process, so the callers start several at once
(the two sides of the explorer, the views a compile opens with) and go on with their Python
work while Graphviz runs (``render_svgs_start``). Every session of the app's server, the work
done ahead beside a compile and the report share the cap: a graph waiting for its turn starts
when another finishes, and its time limit counts from its own start."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from typing import Callable

NOT_INSTALLED = "Graphviz 'dot' is not installed (apt-get install graphviz)"


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# At most this many ``dot`` processes run at once, process-wide. Each is a whole core's work for
# up to a minute; started without a cap (a big program's views, several tabs, the work ahead)
# they shared the cores among them, so every layout took as long as all of them together, ran
# into its time limit, and held that much memory meanwhile.
MAX_RUNNING = _cores()
_RUNNING = threading.BoundedSemaphore(MAX_RUNNING)


def render_svg(dot: str, timeout: float = 60.0) -> str:
    """Lay out DOT with Graphviz's ``dot`` and return SVG text."""
    return render_svgs([dot], timeout)[0]


def render_svgs(dots: list[str], timeout: float = 60.0) -> list[str]:
    """Lay out several graphs at once, one ``dot`` process each (the two sides of the explorer
    are laid out in parallel rather than one after the other); the first failure is raised."""
    out = render_svgs_each(dots, timeout)
    for r in out:
        if isinstance(r, RuntimeError):
            raise r
    return out


def render_svgs_each(dots: list[str], timeout: float = 60.0) -> list:
    """``render_svgs``, with each graph's own outcome: its SVG text, or the RuntimeError that
    says why it could not be laid out (the others are still returned)."""
    return render_svgs_start(dots, timeout)()


def render_svgs_start(dots: list[str], timeout: float = 60.0) -> Callable[[], list]:
    """Start laying out ``dots`` (one ``dot`` process each, ``MAX_RUNNING`` at a time) and return
    at once; calling what this returns waits for them and gives ``render_svgs_each``'s list.
    Graphviz runs in its own processes, so the caller's Python work in between (a payload's
    details, links, JSON) runs beside the layouts instead of after them. Raises RuntimeError at
    once when Graphviz is not installed."""
    if dots and shutil.which("dot") is None:
        raise RuntimeError(NOT_INSTALLED)
    results: list = [None] * len(dots)

    def lay_out(i: int) -> None:
        with _RUNNING:
            results[i] = run_dot(dots[i], timeout)

    threads = [threading.Thread(target=lay_out, args=(i,), daemon=True) for i in range(len(dots))]
    for t in threads:
        t.start()

    def finish() -> list:
        for t in threads:
            t.join()
        return list(results)

    return finish


def run_dot(dot: str, timeout: float):
    """One graph laid out: its SVG text, or a RuntimeError that says why not."""
    try:
        p = subprocess.Popen(["dot", "-Tsvg"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    except FileNotFoundError:
        return RuntimeError(NOT_INSTALLED)
    except OSError as e:  # no process could be started now (out of memory, of processes)
        return RuntimeError(f"Graphviz failed: {e}")
    try:
        stdout, stderr = p.communicate(dot.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return RuntimeError(f"Graphviz could not lay this graph out within {timeout:.0f} s")
    except Exception as e:  # noqa: BLE001 - a pipe error is that graph's failure, not the caller's crash
        p.kill()
        p.wait()
        return RuntimeError("Graphviz failed: " + str(e).strip()[:300])
    if p.returncode != 0:
        return RuntimeError("Graphviz failed: " + stderr.decode(errors="replace").strip()[:300])
    svg = stdout.decode()
    return svg[svg.find("<svg"):]
