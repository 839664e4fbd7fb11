"""Reading numbers back as a view writes them, for the tests that check that a kernel's time,
its share and the step agree on screen (docs/numbers.md: share = time / step to the rounding
shown). A time is written by ``analysis.render.format.human_seconds``, a share as a percentage."""

from __future__ import annotations

import re

UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}
TIME = re.compile(r"(\d+(?:\.\d+)?) (s|ms|µs|ns)\b")
SHARE = re.compile(r"(\d+(?:\.\d+)?)%")


def seconds(text: str) -> tuple[float, float]:
    """``"366.0 µs"`` -> (366e-6, 0.05e-6): the value and half its last digit's unit."""
    m = TIME.fullmatch(text.strip())
    assert m, f"not a time as written: {text!r}"
    digits, unit = m.groups()
    places = len(digits.split(".", 1)[1]) if "." in digits else 0
    return float(digits) * UNITS[unit], 0.5 * 10 ** -places * UNITS[unit]


def fraction(text: str) -> tuple[float, float]:
    """``"70.2%"`` -> (0.702, 0.0005)."""
    m = SHARE.fullmatch(text.strip())
    assert m, f"not a share as written: {text!r}"
    digits = m.group(1)
    places = len(digits.split(".", 1)[1]) if "." in digits else 0
    return float(digits) / 100, 0.5 * 10 ** -places / 100


def agree(time: str, share: str, step: str) -> bool:
    """Whether a time, a share and a step as written can be share = time / step, each rounded as
    written."""
    (t, dt), (f, df), (s, ds) = seconds(time), fraction(share), seconds(step)
    lo, hi = (t - dt) / (s + ds), (t + dt) / max(s - ds, 1e-30)
    return lo <= f + df + 1e-12 and f - df - 1e-12 <= hi
