"""Where things are, for a test in any folder of ``tests/``: the repository's root, ``tests/``
itself and its shared folders. A test names these instead of building a path from its own file,
so it can move to another folder without its paths changing."""

from __future__ import annotations

import os

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
FIXTURES = os.path.join(TESTS, "fixtures")
REAL_PROGRAMS = os.path.join(TESTS, "real_programs")
