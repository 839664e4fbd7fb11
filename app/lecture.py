"""Lectures: an ordered list of views, stepped through in presentation mode and shared as one link.

A lecture is a title and its steps; a step is one page of the app (``PAGES``), the query
parameters of that page's own link (the Explorer's are ``app.permalink``'s: model, backend,
options, tab, selection, ...) and a caption: the claim, and what to look at. Pure functions, no
Streamlit, no JAX (the app's part is ``app.lecture_ui``):

    from_json(text) -> Lecture        raises ExplorerError("lecture", one line) on bad input
    to_json(lecture) -> str
    shipped(name) -> Lecture          a lecture of the gallery (``sample_models/lectures/NAME.json``)

A lecture link is ``?lecture=NAME`` (a shipped lecture) or ``?lecture=ID`` (one a user made,
stored in the project's store by ``Store.put_code``, the id of its JSON text), with
``slide=K`` for its K-th step (from 1). A lecture's text is user data: it is read as JSON only,
bounded in size and number of steps, and every step passes the same checks as a link to its page
(``app.permalink.params_to_state`` for the Explorer); its captions are shown as text, never HTML.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import ExplorerError
from app import permalink

LECTURES_DIR = Path(__file__).resolve().parent.parent / "sample_models" / "lectures"

# page -> its URL path below the app ("" is the Explorer) and the link parameters it reads
PAGES = {
    "explorer": ("", ("model", "code", "backend", "opt", "view", "node", "side", "line", "measure", "compare",
                      "devices")),
    "passes": ("Pass_pipeline", ("model", "backend", "step")),
    "compare": ("Compare", ("mode", "model", "a", "b", "backend", "measure")),
    "sweep": ("Shape_sweep", ("lengths", "buckets", "backend")),
}
LINK_KEYS = ("lecture", "slide", "present")  # the lecture's own parameters, next to a step's

MAX_TEXT = 50_000  # characters of a lecture's JSON
MAX_STEPS = 40
MAX_TITLE = 120
MAX_CAPTION = 400
_NAME = re.compile(r"[a-z0-9][a-z0-9\-]{0,39}")  # a shipped lecture: xla-claims
_STORED_ID = re.compile(r"[a-z2-7]{8,52}")  # Store.put_code's ids
_VALUE = re.compile(r"[A-Za-z0-9_.\-$:=;,\\ ]{1,%d}" % permalink.MAX_PARAM)  # another page's parameter


def _gallery_names() -> set[str]:
    from sample_models import gallery

    return set(gallery())


@dataclass(frozen=True)
class Step:
    page: str  # a key of PAGES
    params: dict  # the page's link parameters {name: text}
    caption: str  # the claim and what to look at (plain text)

    def query(self) -> dict[str, str]:
        """The step's link parameters, in presentation mode."""
        return {**self.params, "present": "1"}


@dataclass(frozen=True)
class Lecture:
    title: str
    steps: tuple[Step, ...]


def _fail(where: str, what: str):
    raise ExplorerError("lecture", f"{where}: {what}")


def _text(value, where: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        _fail(where, "must be some text")
    value = " ".join(value.split())
    if len(value) > limit:
        _fail(where, f"is {len(value)} characters long (at most {limit})")
    return value


def check_step(page, params, caption, where: str, gallery_names=None) -> Step:
    """One step, checked as a link to its page is: an ExplorerError naming ``where`` and the
    first problem."""
    if page not in PAGES:
        _fail(where, f"unknown page {str(page)[:30]!r} ({', '.join(PAGES)})")
    if not isinstance(params, dict):
        _fail(where, "its link must be an object of parameters")
    allowed = PAGES[page][1]
    clean: dict[str, str] = {}
    for k, v in params.items():
        if k not in allowed:
            _fail(where, f"parameter {str(k)[:30]!r} is not one the {page} page reads ({', '.join(allowed)})")
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            _fail(where, f"parameter {k} must be text or a whole number")
        clean[k] = str(v).strip()
    if page == "explorer":
        if not (clean.get("model") or clean.get("code")):
            _fail(where, "an Explorer step names a gallery model (model=) or pasted code (code=)")
        state = permalink.params_to_state(clean, gallery_names)
        if state["errors"]:
            _fail(where, state["errors"][0].removeprefix("link: "))
        clean = permalink.state_to_params({**state, "present": False})
    else:
        names = _gallery_names() if gallery_names is None else set(gallery_names)
        for k, v in clean.items():
            if not _VALUE.fullmatch(v):
                _fail(where, f"parameter {k}={v[:30]!r} has characters a link of this page never has")
        if "model" in clean and clean["model"] not in names:
            _fail(where, f"no gallery model named {clean['model'][:40]!r}")
        if clean.get("backend") and clean["backend"].lower() not in permalink.BACKENDS:
            _fail(where, f"unknown backend {clean['backend'][:20]!r} ({', '.join(permalink.BACKENDS)})")
    return Step(page, clean, _text(caption, f"{where} caption", MAX_CAPTION))


def from_dict(d, gallery_names=None) -> Lecture:
    if not isinstance(d, dict):
        _fail("lecture", "must be an object with a title and steps")
    unknown = set(d) - {"title", "steps"}
    if unknown:
        _fail("lecture", f"unknown field {sorted(unknown)[0][:30]!r} (title, steps)")
    title = _text(d.get("title"), "title", MAX_TITLE)
    steps = d.get("steps")
    if not isinstance(steps, list) or not steps:
        _fail("steps", "must be a list of one step or more")
    if len(steps) > MAX_STEPS:
        _fail("steps", f"{len(steps)} steps (at most {MAX_STEPS})")
    out = []
    for i, s in enumerate(steps, 1):
        if not isinstance(s, dict):
            _fail(f"step {i}", "must be an object with page, link and caption")
        extra = set(s) - {"page", "link", "caption"}
        if extra:
            _fail(f"step {i}", f"unknown field {sorted(extra)[0][:30]!r} (page, link, caption)")
        out.append(check_step(s.get("page", "explorer"), s.get("link"), s.get("caption"), f"step {i}", gallery_names))
    return Lecture(title, tuple(out))


def from_json(text, gallery_names=None) -> Lecture:
    """A lecture from its JSON text; an ExplorerError with one line saying where it is wrong."""
    if not isinstance(text, str):
        _fail("lecture", "must be text")
    if len(text) > MAX_TEXT:
        _fail("lecture", f"is {len(text)} characters long (at most {MAX_TEXT})")
    try:
        d = json.loads(text)
    except ValueError as e:
        _fail("lecture", f"not JSON (line {getattr(e, 'lineno', '?')}, column {getattr(e, 'colno', '?')})")
    return from_dict(d, gallery_names)


def to_dict(lecture: Lecture) -> dict:
    return {"title": lecture.title,
            "steps": [{"page": s.page, "link": dict(s.params), "caption": s.caption} for s in lecture.steps]}


def to_json(lecture: Lecture) -> str:
    return json.dumps(to_dict(lecture), indent=1, ensure_ascii=False)


def shipped_names() -> list[str]:
    return sorted(p.stem for p in LECTURES_DIR.glob("*.json"))


def shipped(name: str, gallery_names=None) -> Lecture:
    """The gallery's lecture ``name``."""
    if not _NAME.fullmatch(name or "") or name not in shipped_names():
        _fail("lecture", f"no lecture named {str(name)[:40]!r} (there are: {', '.join(shipped_names())})")
    return from_json((LECTURES_DIR / f"{name}.json").read_text(), gallery_names)


def load(ref: str, store, gallery_names=None) -> Lecture:
    """The lecture a link's ``lecture=`` names: a shipped one by name, else one in ``store`` by id."""
    ref = (ref or "").strip().lower()
    if ref in shipped_names():
        return shipped(ref, gallery_names)
    if not _STORED_ID.fullmatch(ref):
        _fail("lecture", f"{ref[:40]!r} is neither a lecture of the gallery ({', '.join(shipped_names())}) "
                         "nor a stored lecture's id")
    text = store.get_code(ref)
    if text is None:
        _fail("lecture", f"no lecture with id {ref!r} on this server (it may have been made on another one)")
    return from_json(text, gallery_names)


def slide(value, n: int) -> tuple[int, str | None]:
    """A link's ``slide=`` (from 1) as a step index, and a one-line problem when it is not one
    (then the first step)."""
    if value is None or str(value).strip() == "":
        return 0, None
    v = str(value).strip()
    if v.isdigit() and 1 <= int(v) <= n:
        return int(v) - 1, None
    return 0, f"lecture: slide must be a number from 1 to {n}, not {v[:20]!r}; showing the first"
