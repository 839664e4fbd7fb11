"""The hostile corpus: one case per hole a red team found (and the attacks that were contained,
so they stay contained), run with the real bubblewrap sandbox by the suite's usual command.

Every module here checks, around all its cases, that the machine's available memory came back
(a tmpfs or a process the sandbox failed to free would keep gigabytes) and that no process of
any job it started is still alive.
"""

from __future__ import annotations

import os

import pytest

from analysis.service import sandbox, slots, worker_process
from tests.polling import wait_until

ISOLATED, WHY = sandbox.sandbox_status()
needs_bwrap = pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot run here: {WHY}")

# The hostile jobs take gigabytes while they run; afterwards the machine must have them back.
# Other work on the machine moves the figure too, hence the slack.
MEMORY_SLACK_MB = 1024


def available_mb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 0


@pytest.fixture(scope="module", autouse=True)
def machine_is_left_as_found():
    first = len(worker_process.recent_tokens)
    before = available_mb()
    yield
    # a spare worker (on where an app page ran in this process) waits for a job, by design
    waiting = worker_process.spare.token()
    tokens = [t for t in list(worker_process.recent_tokens)[first:] if t != waiting]
    left = [p for t in tokens for p in slots.processes_with_token(t)]
    assert left == [], f"processes of hostile jobs still alive: {left}"
    # Memory comes back within moments of the last kill (page cache aside).
    after = [0]

    def back():
        after[0] = available_mb()
        return after[0] >= before - MEMORY_SLACK_MB

    wait_until(back, 10, lambda: f"the memory back: available {before} MB before, {after[0]} MB after", interval_s=0.5)
