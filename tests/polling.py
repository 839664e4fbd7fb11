"""Waiting in tests: poll for the very condition a test needs, under a deadline, never a fixed
sleep (a sleep is too short on a loaded machine and too long everywhere else).

``wait_until`` is for conditions read in this process; ``app_idle`` and ``settled`` are for the
app in a real browser (Playwright), whose runs and redraws are not this process's to see."""

from __future__ import annotations

import time


def wait_until(cond, timeout_s: float, what: str, interval_s: float = 0.1):
    """``cond()``'s first truthy value, polled every ``interval_s`` until ``timeout_s`` has passed;
    then an AssertionError naming ``what`` was waited for."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:g} s for {what}")
        time.sleep(interval_s)


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
