"""A list of JSON objects that repeat their values, written by column.

A big program's fusion decisions are tens of thousands of records of a dozen fields, most of them
one of a few values (the pass, the decision, the reason, how a name was matched) or a name that
many records share. As a list of objects the JSON was several times longer, and decoding it made
Python objects (each repeated value its own copy) that were then shared and mostly freed: the
peak stayed in the app's resident memory. By column it is a fraction of the text, and every
repeated value is decoded once (docs/performance.md has the numbers).

The form (``docs/bundle.md``, "columns")::

    {"count": N, "columns": {field: [N values]                             (every row has it)
                             field: {"values": [distinct values],
                                     "codes": [N indexes into values, -1: the row lacks it]}}}

``encode`` writes a column by table when its distinct values are at most half of its rows, or
when some rows lack the field; ``table`` checks what it reads (the text is untrusted) and keeps
it by column in memory too (a ``Table``: a row is a read-only mapping made when it is read, so
the records cost their columns, not a dict each); ``decode`` builds the rows as dicts, equal
values one shared object. A table
value is at most ``MAX_VALUE`` characters of text: one value named by every row cannot make a
small file into a large one for whatever reads each row.

Written here rather than taken from a columnar library (Arrow, Parquet): the bundle stays one
JSON document that any JSON reader opens, and this needs no more than a table per column.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from itertools import chain
from operator import itemgetter

MAX_VALUE = 4096  # characters of text in one table value (names, reasons, short lists of names)

# The most rows a columns object may claim (``XLA_EXPLORER_MAX_RECORDS``; docs/worker.md). A
# 192-layer program's fusion decisions are under 100,000 records; a row costs its columns about
# 30 bytes each, so the default bounds one table near a few hundred MB however big the claim.
MAX_ROWS = 2_000_000
MAX_ROWS_ENV = "XLA_EXPLORER_MAX_RECORDS"


def max_rows() -> int:
    """The bound on a columns object's rows: ``MAX_ROWS``, or the positive whole number in
    ``$XLA_EXPLORER_MAX_RECORDS`` (anything else there is ignored)."""
    v = os.environ.get(MAX_ROWS_ENV, "")
    return int(v) if v.isdigit() and int(v) > 0 else MAX_ROWS


class ColumnsError(ValueError):
    """A columns object that is not well formed (the message says where)."""


def _key(v):
    """A hashable stand-in for a JSON value, equal for equal values of the same JSON type (so 1,
    1.0 and true stay apart)."""
    t = type(v)
    if t is str:
        return v
    if t is list:
        for x in v:
            if type(x) is not str:
                return (list, *map(_key, v))
        return (list, *v)  # a list of names, the usual one
    if t is dict:
        for x in v.values():
            if type(x) is not str:
                return (dict, *((k, _key(x)) for k, x in v.items()))
        return (dict, *v.items())
    return (t, v)


def _too_big(values: list) -> int | None:
    """The index of the first value longer than ``MAX_VALUE``, else None."""
    for i, v in enumerate(values):
        if (len(v) + 2 if type(v) is str else _size(v, MAX_VALUE)) > MAX_VALUE:
            return i
    return None


def _size(v, budget: int) -> int:
    """The text a value takes, roughly (strings by length, 2 for anything else), counted until it
    passes ``budget``."""
    t = type(v)
    if t is str:
        return len(v) + 2
    if t is list or t is dict:
        n = 2
        for x in (v.values() if t is dict else v):
            n += _size(x, budget) + 1
            if n > budget:
                break
        if t is dict:
            n += sum(len(k) + 3 for k in v)
        return n
    return 2


def _names_keys(vals: list, types: set) -> list | None:
    """The keys of a column that is all lists of names or all objects of names (the records' ops
    and how they were matched), made in C: a tuple of the names or of the items. Only one kind of
    value in the column, so a tuple cannot meet another JSON value's key; else None (``_key``
    for each value was most of the time a big program's records took to encode:
    docs/performance.md)."""
    if types == {list}:
        if set(map(type, chain.from_iterable(vals))) <= {str}:
            return list(map(tuple, vals))
    elif types == {dict}:
        if set(map(type, chain.from_iterable(map(dict.values, vals)))) <= {str}:
            return list(map(tuple, map(dict.items, vals)))
    return None


class _Missing:
    """A field a row lacks (its own type, so a column of names is still all one type)."""


_MISSING = _Missing()
_NUMBERS = frozenset((int, float, bool))
_PLAIN = frozenset((str, int, float, bool, type(None), _Missing))  # values that are their own keys


def encode(rows: list[dict], leave_out: tuple[str, ...] = ()) -> dict | None:
    """``rows`` by column, without the fields named in ``leave_out``; None when some row is not an
    object or a value is too large to share and some row lacks its field (the caller then keeps
    the list)."""
    if any(type(r) is not dict for r in rows):
        return None
    n = len(rows)
    names = dict.fromkeys(chain.from_iterable(rows))  # every field, in the order first seen
    for k in leave_out:
        names.pop(k, None)
    missing = _MISSING
    columns: dict = {}
    for name in names:
        try:  # (every row has most fields: read in C)
            vals = list(map(itemgetter(name), rows))
        except KeyError:
            vals = [r.get(name, missing) for r in rows]
        # keys and tables built by dict and map (C): a big program's records have hundreds of
        # thousands of values (docs/performance.md)
        types = set(map(type, vals))
        complete = _Missing not in types
        if types <= _PLAIN and len(types & _NUMBERS) <= 1:  # no 1 == 1.0 == true among them
            keys = vals
        else:
            keys = _names_keys(vals, types) or [v if v is missing else _key(v) for v in vals]
        if complete and types <= _NUMBERS and len(set(keys[:64])) > 48:
            columns[name] = vals  # numbers distinct from the start (line numbers): as they are
            continue
        distinct = dict.fromkeys(keys)
        distinct.pop(missing, None)
        if complete and len(distinct) > n // 2:
            columns[name] = vals  # mostly distinct: written as they are
            continue
        if keys is vals:
            table = list(distinct)
        else:
            one = dict(zip(keys, vals))  # a value for each key (equal keys: equal values)
            table = [one[k] for k in distinct]
        if _too_big(table) is not None:
            if not complete:
                return None
            columns[name] = vals
            continue
        pos = dict(zip(distinct, range(len(distinct))))
        pos[missing] = -1
        columns[name] = {"values": table, "codes": list(map(pos.__getitem__, keys))}
    return {"count": n, "columns": columns}


def is_columns(d) -> bool:
    return type(d) is dict and "columns" in d and "count" in d


def decode(d, where: str = "columns") -> list[dict]:
    """The rows of a columns object, as dicts; ColumnsError (naming ``where`` and the field)
    when it is not well formed."""
    return table(d, where).dicts()


def table(d, where: str = "columns") -> "Table":
    """A columns object, checked (ColumnsError naming ``where`` and the field when it is not
    well formed), kept by column: a ``Table`` of read-only rows."""
    if type(d) is not dict:
        raise ColumnsError(f"{where} must be an object")
    n, columns = d.get("count"), d.get("columns")
    if type(n) is not int or n < 0:
        raise ColumnsError(f"{where}.count must be a count")
    if type(columns) is not dict:
        raise ColumnsError(f"{where}.columns must be an object")
    # The count is a claim: it is checked against a bound, and against the columns that back
    # it (each has a value or a code per row), before anything is made for its rows. Rows with
    # no field at all are backed by nothing, so there are none.
    if n and not columns:
        raise ColumnsError(f"{where} claims {n:,} rows and has no columns")
    if n > max_rows():
        raise ColumnsError(f"{where}.count ({n:,}) is over the limit of {max_rows():,} records")
    cols: dict[str, tuple] = {}
    for name, col in columns.items():
        at = f"{where}.columns[{str(name)[:60]!r}]"
        if type(col) is list:
            if len(col) != n:
                raise ColumnsError(f"{at} has {len(col)} values for {n} rows")
            cols[name] = (col, None)
            continue
        if type(col) is not dict or type(col.get("values")) is not list or type(col.get("codes")) is not list:
            raise ColumnsError(f"{at} must be a list, or an object of values and codes")
        values, codes = col["values"], col["codes"]
        if len(codes) != n:
            raise ColumnsError(f"{at} has {len(codes)} codes for {n} rows")
        if codes and (not all(type(c) is int for c in codes) or min(codes) < -1 or max(codes) >= len(values)):
            raise ColumnsError(f"{at}: a code is not an index into its {len(values)} values")
        i = _too_big(values)
        if i is not None:
            raise ColumnsError(f"{at}: value {i} is longer than {MAX_VALUE} characters")
        cols[name] = (values, codes)
    return Table(n, cols)


class Table(Sequence):
    """Rows kept by column, as they were written: each column a list of values, or a table of
    distinct values and a code per row (-1: the row lacks the field). A row is a read-only
    mapping made when it is read (``Row``): a big program's fusion decisions take a fraction of
    the memory they took as one dict each (docs/performance.md)."""

    __slots__ = ("n", "cols")

    def __init__(self, n: int, cols: dict[str, tuple]):
        self.n, self.cols = n, cols

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [Row(self, j) for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError("row index out of range")
        return Row(self, i)

    def __iter__(self):
        return map(Row, [self] * self.n, range(self.n))

    def __eq__(self, other) -> bool:
        if isinstance(other, Table):
            other = other.dicts()
        return isinstance(other, list) and self.dicts() == other

    __hash__ = None

    def with_column(self, name: str, values: list, codes: list | None = None) -> None:
        """Sets (or replaces) a column: ``values`` per row, or distinct ``values`` and a code per
        row. The caller's lists are kept as they are."""
        if len(codes if codes is not None else values) != self.n:
            raise ValueError(f"column {name!r} needs {self.n} rows")
        self.cols[name] = (values, codes)

    def dicts(self) -> list[dict]:
        """The rows as dicts (equal values one shared object)."""
        rows: list[dict] = [{} for _ in range(self.n)]
        for name, (values, codes) in self.cols.items():
            if codes is None:
                for r, v in zip(rows, values):
                    r[name] = v
            else:
                for r, c in zip(rows, codes):
                    if c >= 0:
                        r[name] = values[c]
        return rows

    def encoded(self, leave_out=()) -> dict:
        """This table as a columns object again (what ``table`` reads), without ``leave_out``."""
        out = {}
        for name, (values, codes) in self.cols.items():
            if name not in leave_out:
                out[name] = values if codes is None else {"values": values, "codes": codes}
        return {"count": self.n, "columns": out}


class Row(Mapping):
    """One row of a ``Table``: a read-only mapping of the fields it has."""

    __slots__ = ("_t", "_i")

    def __init__(self, t: Table, i: int):
        self._t, self._i = t, i

    def __getitem__(self, k):
        col = self._t.cols.get(k)
        if col is None:
            raise KeyError(k)
        values, codes = col
        if codes is None:
            return values[self._i]
        c = codes[self._i]
        if c < 0:
            raise KeyError(k)
        return values[c]

    def get(self, k, default=None):
        col = self._t.cols.get(k)
        if col is None:
            return default
        values, codes = col
        if codes is None:
            return values[self._i]
        c = codes[self._i]
        return values[c] if c >= 0 else default

    def __contains__(self, k) -> bool:
        return self.get(k, _MISSING) is not _MISSING

    def __iter__(self):
        i = self._i
        return iter([k for k, (_, codes) in self._t.cols.items() if codes is None or codes[i] >= 0])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return repr(dict(self))
