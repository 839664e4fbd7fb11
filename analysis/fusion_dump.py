"""XLA:GPU's fusion process dump (``*.priority_fusion_dump.txt``, written by priority fusion when
dumping is on for that pass) read into the fusion log's ``Decision`` records. Pure."""

from __future__ import annotations

import re

from analysis.fusion_log import FUSED, NOT_FUSED, Decision

_STEP = re.compile(r"^fusion_steps \{\n(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r'^\s*(\w+): (?:"((?:[^"\\]|\\.)*)"|(\S+))', re.M)


def parse_fusion_dump(text: str) -> tuple[list[Decision], str | None]:
    """Decisions of a ``*.priority_fusion_dump.txt`` and its ``hlo_module_before_fusion`` text
    (``None`` when absent). ``fusion`` steps become "fused" (the new fusion's name), ``producer_ineligible``
    steps "not fused" with the reason, consumers left empty (the users come from the module)."""
    out: list[Decision] = []
    for n, m in enumerate(_STEP.finditer(text), 1):
        body = m.group(1)
        kind = re.match(r"\s*(\w+) \{", body)
        if not kind:
            continue
        fields: dict[str, list[str]] = {}
        for f in _FIELD.finditer(body):
            fields.setdefault(f.group(1), []).append(f.group(2) if f.group(2) is not None else f.group(3))
        first = lambda k: (fields.get(k) or [""])[0]  # noqa: E731
        if kind.group(1) == "fusion":
            d = Decision("priority-fusion", FUSED, first("producer_name"), first("consumer_name"),
                         "chosen by the cost model", first("fusion_name") or None, line=n, source="dump")
            out.append(d)
        elif kind.group(1) == "producer_ineligible":
            out.append(Decision("priority-fusion", NOT_FUSED, first("producer_name"), "",
                                first("reason"), line=n, source="dump"))
    before = re.search(r'^hlo_module_before_fusion: "((?:[^"\\]|\\.)*)"', text, re.M)
    module_text = None
    if before:
        module_text = before.group(1).encode("utf-8").decode("unicode_escape")
    return out, module_text
