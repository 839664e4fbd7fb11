"""Waiting in tests: poll for the very condition a test needs, under a deadline, never a fixed
sleep (a sleep is too short on a loaded machine and too long everywhere else).

``wait_until`` is for conditions read in this process; ``holds`` for what must not happen over a
while (nothing to wait for: it fails at the first poll that sees it); ``in_page``, ``app_idle``
and ``settled`` are for the app in a real browser (Playwright), whose runs and redraws are not
this process's to see."""

from __future__ import annotations

import time


def wait_until(cond, timeout_s: float, what, interval_s: float = 0.1, ignoring: tuple = (), pause=time.sleep):
    """``cond()``'s first truthy value, polled every ``interval_s`` until ``timeout_s`` has passed;
    then an AssertionError naming ``what`` was waited for (a string, or a function that says it
    at the deadline: what was last seen). An exception of a type in ``ignoring`` raised by
    ``cond`` counts as not yet (a page whose frame a rerun replaced, a server not up); the last
    one is the AssertionError's cause. ``pause(interval_s)`` waits between polls."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        try:
            value = cond()
        except ignoring as e:
            value, last = None, e
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:g} s for {what() if callable(what) else what}") from last
        pause(interval_s)


def in_page(page, cond, timeout_s: float, what, interval_s: float = 0.3, ignoring: tuple = ()):
    """``wait_until`` for what a page in a real browser shows, waiting between polls with the
    page's own wait: Playwright's sync API hears from the browser only while one of its calls
    runs, so across a ``time.sleep`` ``page.frames`` stays what it was (a frame a run added or
    replaced is not seen)."""
    return wait_until(cond, timeout_s, what, interval_s, ignoring,
                      pause=lambda s: page.wait_for_timeout(s * 1000))


def holds(cond, for_s: float, what: str, interval_s: float = 0.1) -> None:
    """``cond()`` is truthy on every poll, ``interval_s`` apart, for ``for_s`` seconds: what must
    not happen over a while (a worker started, a state lost). The first falsy poll is an
    AssertionError naming ``what`` held, at once."""
    end = time.monotonic() + for_s
    while True:
        if not cond():
            raise AssertionError(f"{what} held for less than {for_s:g} s")
        if time.monotonic() >= end:
            return
        time.sleep(min(interval_s, max(0.0, end - time.monotonic())))


# The page is between runs: no "Running..." in the status widget (Streamlit shows it once a run
# is 0.5 s old), no element of the last run waiting to be redrawn by this one (stale).
_IDLE = """() => !document.querySelector("[data-testid='stStatusWidgetRunningIcon']")
    && !document.querySelector("[data-stale='true']")"""


def app_idle(page, timeout_s: float = 120, quiet_polls: int = 3, interval_s: float = 0.2) -> None:
    """Wait until the Streamlit page in ``page`` has finished its runs: idle on ``quiet_polls``
    polls in a row (a run asked for a moment ago may not have begun when the first poll looks)."""
    from playwright.sync_api import Error

    quiet = [0]

    def idle():
        try:
            quiet[0] = quiet[0] + 1 if page.evaluate(_IDLE) else 0
        except Error:  # the page is being replaced: not idle
            quiet[0] = 0
        return quiet[0] >= quiet_polls

    wait_until(idle, timeout_s, "the app to finish its runs", interval_s)


def settled(read, timeout_s: float = 30, what: str = "the page to hold still", interval_s: float = 0.2):
    """``read()`` once two reads in a row, ``interval_s`` apart, agree (a layout, a zoom, an
    animation that has ended): that value."""
    last = [read()]

    def same():
        now = read()
        if now == last[0]:
            return [now]
        last[0] = now
        return None

    return wait_until(same, timeout_s, what, interval_s)[0]
