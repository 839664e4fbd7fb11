"""XLA:GPU's fusion process dump (``*.priority_fusion_dump.txt``, written by priority fusion when
dumping is on for that pass) read into the fusion log's ``Decision`` records. Pure."""

from __future__ import annotations

from analysis import linear_re
from analysis.fusion.log import FUSED, NOT_FUSED, Decision

# Read line by line, each pattern matched at the start of one line: a dump is a user's upload, and
# a pattern over the whole text (a step from its "fusion_steps {" to the next "}") took time
# quadratic in the lines of a step left open (24,000 lines: a minute with the GIL held). The
# patterns are RE2's (``analysis.linear_re``): linear in a line, however long.
_STEP_OPEN = "fusion_steps {"
_KIND = linear_re.compile(r"\s*(\w+) \{")
FIELD = linear_re.compile(r'\s*(\w+): (?:"((?:[^"\\]|\\.)*)"|(\S+))')
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")  # RE2's \w
_BLANKS = " \t\n\r\f"  # RE2's \s
_BLANK_SET = frozenset(_BLANKS)


def field_of(line: str) -> tuple[str, str] | None:
    """(name, value) of a step's field line (``FIELD``: the quoted value without its quotes, else
    the bare word). Every line of a step comes here: the usual forms are read with str methods,
    a value with a backslash or a blank in it goes to the pattern."""
    name, colon, value = line.lstrip(_BLANKS).partition(": ")
    if not colon or not name or not _WORD.issuperset(name):
        return None
    if value[:1] == '"':
        end = value.find('"', 1)
        if end > 0 and "\\" not in value[1:end]:
            return name, value[1:end]
    else:
        word = value.split(" ", 1)[0]
        if word and _BLANK_SET.isdisjoint(word):
            return name, word
    f = FIELD.match(line)
    return (f.group(1), f.group(2) if f.group(2) is not None else f.group(3)) if f else None


_BEFORE = linear_re.compile(r'hlo_module_before_fusion: "((?:[^"\\]|\\.)*)"')


def _steps(lines):
    """The body lines of each step (a line ``fusion_steps {`` to the next line that starts with
    ``}``; a step left open at the end is no step), in order."""
    body: list[str] | None = None
    for line in lines:
        if line.rstrip() == _STEP_OPEN:
            body = []  # (a step opened inside an open one starts again)
        elif body is not None:
            if line.startswith("}"):
                yield body
                body = None
            else:
                body.append(line)


def parse_fusion_dump(text: str) -> tuple[list[Decision], str | None]:
    """Decisions of a ``*.priority_fusion_dump.txt`` and its ``hlo_module_before_fusion`` text
    (``None`` when absent). ``fusion`` steps become "fused" (the new fusion's name), ``producer_ineligible``
    steps "not fused" with the reason, consumers left empty (the users come from the module)."""
    out: list[Decision] = []
    lines = text.splitlines()
    for n, body in enumerate(_steps(lines), 1):
        first_line = next((ln for ln in body if ln.strip()), "")
        kind = _KIND.match(first_line) if " {" in first_line else None
        if not kind:
            continue
        fields: dict[str, list[str]] = {}
        for ln in body:
            f = field_of(ln) if ": " in ln else None
            if f:
                fields.setdefault(f[0], []).append(f[1])
        first = lambda k: (fields.get(k) or [""])[0]  # noqa: E731
        if kind.group(1) == "fusion":
            d = Decision("priority-fusion", FUSED, first("producer_name"), first("consumer_name"),
                         "chosen by the cost model", first("fusion_name") or None, line=n, source="dump")
            out.append(d)
        elif kind.group(1) == "producer_ineligible":
            out.append(Decision("priority-fusion", NOT_FUSED, first("producer_name"), "",
                                first("reason"), line=n, source="dump"))
    module_text = None
    for ln in lines:
        before = _BEFORE.match(ln) if ln.startswith("hlo_module_before_fusion:") else None
        if before:
            module_text = before.group(1).encode("utf-8").decode("unicode_escape")
            break
    return out, module_text
