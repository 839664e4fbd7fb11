"""Searching a stage text for what a user typed: a linear-time engine, never backtracking.

The pattern comes from the user, and Python's ``re`` backtracks: ``(a+)+$`` on one long line
holds the whole server for many seconds (and the interpreter lock with it). Patterns are
compiled with RE2 (``google-re2``), whose matching time grows linearly with the text whatever the
pattern; what RE2 does not accept (back-references, look-around) or a pattern longer than
``MAX_PATTERN`` characters is searched for as literal text, case-insensitively.
"""

from __future__ import annotations

MAX_PATTERN = 500  # characters of a pattern compiled as a regular expression
MAX_MEMORY = 8 << 20  # bytes RE2 may use for one compiled pattern


def matcher(query: str):
    """A function line -> bool for ``query``: RE2, case-insensitive; a literal match where the
    query is not a pattern RE2 takes. Never Python's ``re``."""
    try:
        import re2
    except ImportError:  # the dependency is missing: literal text only, still linear
        re2 = None
    if re2 is not None and len(query) <= MAX_PATTERN:
        opts = re2.Options()
        opts.case_sensitive = False
        opts.log_errors = False
        opts.max_mem = MAX_MEMORY
        try:
            pat = re2.compile(query, opts)
        except re2.error:
            pat = None
        if pat is not None:
            return lambda line: pat.search(line) is not None
    needle = query.lower()
    return lambda line: needle in line.lower()


def matching_lines(text: str, query: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of every line of ``text`` that ``query`` matches (numbered from 1)."""
    hit = matcher(query)
    return [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if hit(ln)]
