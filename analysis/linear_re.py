"""The one way a reader of untrusted text compiles a pattern: RE2 (``google-re2``), whose matching
time grows linearly with the text, whatever the pattern.

Why: users upload dumps, traces and bundles, and the readers parse what is inside. Python's ``re``
backtracks: a pattern with nested or overlapping repetition takes time exponential or quadratic in
a line written against it (a 672-byte LLVM IR line froze the server for 31 s: ``load ... ptr``
followed by attribute words and no value), and ``re`` holds the interpreter lock while it
backtracks, so every other thread of the process waits too. RE2 matches with automata and never
backtracks. ``tests/ground/test_linear_readers.py`` checks that the readers import no ``re`` and compile
every pattern here.

``compile(pattern)`` takes the pattern at import time of its module: one RE2 refuses (lookarounds
``(?=``, ``(?!``, backreferences ``\\1``, possessive or atomic forms ``*+``, ``(?>``, ``\\Z``)
raises ``ValueError`` naming it then, not when a user's text first meets it.

What differs from ``re`` (met while converting the readers; each reader's patterns are written for
RE2's meaning):

- ``$`` matches only at the very end of the text (``re``'s also matches before a final ``\\n``);
  the readers match lines from ``str.splitlines``, which have none. ``\\z`` is ``re``'s ``\\Z``.
- ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII: ``\\d`` is ``[0-9]`` (``re``'s also takes other
  scripts' digits, which ``int`` reads), ``\\w`` ``[0-9A-Za-z_]``, ``\\s`` ``[\\t\\n\\f\\r ]``
  (no ``\\v``, no Unicode spaces). What XLA and LLVM write is ASCII; where a reader splits at
  whitespace it uses ``str.split()``, which is ``re``'s Unicode ``\\s``.
- no flags argument: ``(?i)`` in the pattern instead of ``re.I``.
- a match's ``pos`` argument costs time in proportion to ``pos`` (the text is encoded to UTF-8 and
  the offset converted on each call): search a slice rather than move ``pos`` along a long text.
- ``m.group("name")`` builds the pattern's table of names again on each call (google-re2): a
  reader that calls it per line takes groups by number (``m.group(1)``, ``m.groups()``).

Cost: a call costs 1.5-6 us against ``re``'s 0.2-0.3 us on a short line (the text is encoded to
UTF-8 on each call), so a reader that calls a pattern per line puts a cheap ``in`` /
``startswith`` test before it, or reads the line with ``str`` methods where that is as clear.

A text with a lone surrogate (``"\\ud800"``, which ``json`` decodes from a hostile trace or
bundle) cannot be encoded to UTF-8: such a text is matched with each lone surrogate read as
``?``, offsets unchanged (``re`` matched it as a character that no class but ``.`` takes).
"""

from __future__ import annotations

import re2

__all__ = ["Pattern", "compile"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is our ValueError, not a line on stderr


def _mended(text):
    """``text`` with each lone surrogate read as ``?`` (same length, so offsets hold)."""
    return text.encode("utf-8", "replace").decode("utf-8") if isinstance(text, str) else text


def _encodable(text):
    if isinstance(text, str) and not text.isascii():  # isascii is a flag test on a str: no scan
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return _mended(text)
    return text


class Pattern:
    """A compiled RE2 pattern with ``re.Pattern``'s methods; the matches are google-re2's
    (``group``, ``groups``, ``groupdict``, ``start``, ``end``, ``span``, ``expand``)."""

    __slots__ = ("_re",)

    def __init__(self, compiled) -> None:
        self._re = compiled

    @property
    def pattern(self) -> str:
        return self._re.pattern

    @property
    def groups(self) -> int:
        return self._re.groups

    @property
    def groupindex(self):
        return self._re.groupindex

    # the three that return one match try the text as it is first: an exception costs nothing
    # until it is raised, and a text that cannot be encoded is rare
    def match(self, text, pos=None, endpos=None):
        try:
            return self._re.match(text, pos, endpos)
        except UnicodeEncodeError:
            return self._re.match(_mended(text), pos, endpos)

    def search(self, text, pos=None, endpos=None):
        try:
            return self._re.search(text, pos, endpos)
        except UnicodeEncodeError:
            return self._re.search(_mended(text), pos, endpos)

    def fullmatch(self, text, pos=None, endpos=None):
        try:
            return self._re.fullmatch(text, pos, endpos)
        except UnicodeEncodeError:
            return self._re.fullmatch(_mended(text), pos, endpos)

    # the rest iterate lazily (the error would come out of the loop): the text is checked first
    def finditer(self, text, pos=None, endpos=None):
        return self._re.finditer(_encodable(text), pos, endpos)

    def findall(self, text, pos=None, endpos=None):
        return self._re.findall(_encodable(text), pos, endpos)

    def split(self, text, maxsplit=0):
        return self._re.split(_encodable(text), maxsplit)

    def sub(self, repl, text, count=0):
        return self._re.sub(repl, _encodable(text), count)

    def subn(self, repl, text, count=0):
        return self._re.subn(repl, _encodable(text), count)

    def __repr__(self) -> str:
        return f"linear_re.compile({self.pattern!r})"


def compile(pattern: str) -> Pattern:  # noqa: A001 - re's name for it, on purpose
    """``pattern`` compiled by RE2; ``ValueError`` naming it where RE2 cannot take it."""
    if not isinstance(pattern, str):
        raise TypeError(f"a pattern is a str, not {type(pattern).__name__}")
    try:
        return Pattern(re2.compile(pattern, _OPTIONS))
    except re2.error as e:
        why = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ValueError(f"not a linear-time (RE2) pattern: {pattern!r}: {why}") from None
