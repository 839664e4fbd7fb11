"""The fusion decisions' records in a bundle's JSON, both ways. Written by column
(``analysis.columns``) and without the fields derived from the provenance (each record's
kernels); read back by column, or, from an older bundle's list of records, with their strings
interned and equal lists and dicts shared; the derived kernels made again
(``derive_decision_kernels``). Their shape is checked by ``analysis.bundle.checks``."""

from __future__ import annotations

import sys

from analysis import columns
from analysis.errors import ExplorerError

# The kernels of a decision's producer and consumer: derived from its pre-optimization ops
# through the provenance, so never in the JSON. A broadcast that every layer reads names every
# layer's kernels, so these lists grew with layers x records: much of a big bundle
# (docs/performance.md).
DERIVED_RECORD_FIELDS = ("producer_kernels", "consumer_kernels")


def fusion_decisions_json(fd):
    """``fusion_decisions`` as a bundle's JSON holds them (``Bundle.to_dict``, and what a worker
    sends of them early): the records by column (``analysis.columns``), without their derived
    fields."""
    if not isinstance(fd, dict):
        return fd
    recs = fd.get("records")
    if isinstance(recs, columns.Table):  # as they were read: by column already
        return {**fd, "records": recs.encoded(leave_out=DERIVED_RECORD_FIELDS)}
    if not isinstance(recs, list):
        return fd
    cols = columns.encode(recs, leave_out=DERIVED_RECORD_FIELDS)
    if cols is None:
        cols = [{k: v for k, v in r.items() if k not in DERIVED_RECORD_FIELDS}
                if isinstance(r, dict) else r for r in recs]
    return {**fd, "records": cols}


def read_records(fd) -> None:
    """Records written by column stay by column (in place: a ``columns.Table``, its rows
    read-only mappings); a list (older bundles) is shared (``_share_strings``)."""
    if isinstance(fd, dict) and columns.is_columns(fd.get("records")):
        try:
            fd["records"] = columns.table(fd["records"], "fusion_decisions.records")
        except columns.ColumnsError as e:
            raise ExplorerError("load", f"malformed bundle: {e}") from None
        for name in DERIVED_RECORD_FIELDS:  # derived here, never taken from the text
            fd["records"].cols.pop(name, None)
    else:
        _share_strings(fd)


def derive_decision_kernels(fd, provenance) -> None:
    """Each record's ``producer_kernels`` / ``consumer_kernels``: the kernels its
    ``producer_pre`` / ``consumer_pre`` ops ended in (``provenance.pre_to_kernels``), sorted;
    records that name the same ops share one list. In place."""
    if not isinstance(fd, dict):
        return
    p2k = getattr(provenance, "pre_to_kernels", None) or {}
    recs = fd.get("records")
    if isinstance(recs, columns.Table):
        _derive_table_kernels(recs, p2k)
        return
    if not isinstance(recs, list):
        return
    by_list: dict[int, tuple] = {}  # the name lists are mostly shared objects (_share_strings)
    memo: dict[tuple, list] = {}
    for r in fd["records"]:
        if type(r) is not dict:
            continue
        for side, out in (("producer_pre", "producer_kernels"), ("consumer_pre", "consumer_kernels")):
            names = r.get(side)
            hit = by_list.get(id(names))
            if hit is None or hit[0] is not names:
                hit = by_list[id(names)] = (names, _kernels_of(names, p2k, memo))
            r[out] = hit[1]


def _kernels_of(names, p2k: dict, memo: dict) -> list:
    """The sorted kernels a record's list of pre-optimization op names ended in; equal lists
    get one shared result (``memo``)."""
    key = tuple(n for n in names if type(n) is str) if type(names) is list else ()
    got = memo.get(key)
    if got is None:
        got = memo[key] = sorted({k for n in key for k in p2k.get(n, ())})
    return got


def _derive_table_kernels(t: columns.Table, p2k: dict) -> None:
    """``derive_decision_kernels`` for records kept by column: a column of names written as a
    table of distinct lists gets a kernels column with the same codes (work per distinct list,
    not per record)."""
    for side, out in (("producer_pre", "producer_kernels"), ("consumer_pre", "consumer_kernels")):
        values, codes = t.cols.get(side) or ([()], [0] * len(t))
        if codes is None:  # written as they are: one list per record
            codes = range(len(values))
        memo: dict[tuple, list] = {}
        kern = [_kernels_of(names, p2k, memo) for names in values]
        # a record that lacks the names has no kernels (an empty list, as for a dict record)
        t.with_column(out, kern + [[]], [c if c >= 0 else len(kern) for c in codes])


def _share_strings(fd) -> None:
    """The fusion decisions' records hold the same few strings (pass, decision, reason, op and
    kernel names), the same lists of names and the same ``how`` dicts thousands of times, and
    JSON gives each its own copy. Shared (strings interned, equal lists and dicts one object),
    a big program's records take a fraction of the memory. Nothing changes a
    record after it is loaded; records are left as they are otherwise (they are checked where
    they are read)."""
    if not isinstance(fd, dict) or not isinstance(fd.get("records"), list):
        return
    intern = sys.intern
    seen: dict = {}

    def one(x):
        return intern(x) if type(x) is str and len(x) < 512 else x

    for r in fd["records"]:
        if type(r) is not dict:
            continue
        for k, v in r.items():
            t = type(v)
            if t is str:
                if len(v) < 512:
                    r[k] = intern(v)
            elif t is list:
                try:  # names: all strings
                    items = tuple(map(intern, v))
                except TypeError:
                    items = tuple(map(one, v))
                try:
                    got = seen.get(items)
                    if got is None:
                        got = seen[items] = list(items)
                    r[k] = got
                except TypeError:  # something unhashable inside: kept as sent
                    r[k] = list(items)
            elif t is dict:
                items = (dict, *((one(a), one(x)) for a, x in v.items()))
                try:
                    got = seen.get(items)
                    if got is None:
                        got = seen[items] = dict(items[1:])
                    r[k] = got
                except TypeError:
                    r[k] = dict(items[1:])
