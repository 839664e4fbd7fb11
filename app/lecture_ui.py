"""A lecture in the app (``app.lecture`` is the model): a link's lecture opened, the lecture bar
at the top of every page (step k of n, its caption, Back and Next, the ← and → keys), and the
lecturer's own lecture built from the Explorer's Share area (add this view, reorder, remove,
share as one link).

Going to a step opens its view as its link would in a fresh session: the session's page state
is dropped (only the lecture and the session's id stay) and the step's page is opened with the
step's link parameters, which every page reads as it reads a shared link.
"""

from __future__ import annotations

import streamlit as st

from analysis.errors import ExplorerError
from analysis.service.store import default_store
from app import lecture, permalink, safe
from app.page_helpers import as_text

# session keys that outlive a step (the rest is the page's state, made afresh by each step's link)
KEEP = ("session_id", "lecture", "lecture_ref", "lecture_at", "lecture_read", "lecture_note", "my_lecture")


def open_from_link(pages: dict, current) -> None:
    """A link's ``lecture=``, once per session: the lecture loaded and its ``slide=`` (else the
    first step) opened, unless ``current`` (the page ``st.navigation`` runs) with the link's
    parameters is that step already (a reload); a problem becomes a note above the page."""
    ss = st.session_state
    if ss.get("lecture_read"):
        return
    ss.lecture_read = True
    q = st.query_params.to_dict()
    ref = q.get("lecture")
    if not ref:
        return
    try:
        lec = lecture.load(ref, default_store())
    except ExplorerError as e:
        ss.lecture_note = e.one_line()
        return
    at, problem = lecture.slide(q.get("slide"), len(lec.steps))
    ss.lecture, ss.lecture_ref, ss.lecture_at = lec, ref.strip().lower(), at
    ss.lecture_note = problem
    step = lec.steps[at]
    here = {k: v for k, v in q.items() if k not in lecture.LINK_KEYS}
    if here == step.params and getattr(current, "url_path", None) == pages[step.page].url_path:
        return
    go(pages, at)


def go(pages: dict, at: int) -> None:
    """Step ``at`` of the lecture on show, opened as its link opens in a fresh session."""
    ss = st.session_state
    lec: lecture.Lecture = ss.lecture
    at = max(0, min(at, len(lec.steps) - 1))
    step = lec.steps[at]
    for k in list(ss.keys()):
        if k not in KEEP:
            del ss[k]
    ss.lecture_at = at
    st.switch_page(pages[step.page], query_params={**step.query(), **link_params()})


def link_params() -> dict[str, str]:
    """The lecture's own link parameters (``lecture``, ``slide``) while one is on show, for a
    page that writes its link in the address bar."""
    ss = st.session_state
    if ss.get("lecture") is None:
        return {}
    return {"lecture": ss.lecture_ref, "slide": str(ss.get("lecture_at", 0) + 1)}


def address(params: dict | None) -> dict[str, str]:
    """What a page writes in the address bar: its own link (``params``; none: the page has no
    link), ``present=1`` while presenting, and the lecture on show, so a reload keeps all three."""
    out = dict(params or {})
    if out and st.session_state.get("presenting"):
        out["present"] = "1"
    return {**out, **link_params()}


def bar(pages: dict) -> None:
    """The lecture bar, above the page: Back, step k of n with the step's caption, Next (← and →
    press them), and End."""
    ss = st.session_state
    note = ss.pop("lecture_note", None)
    if note:
        st.warning(as_text(note))
    lec: lecture.Lecture | None = ss.get("lecture")
    if lec is None:
        return
    at = ss.get("lecture_at", 0)
    n = len(lec.steps)
    with st.container(key="lecture_bar", border=True):
        back, text, nxt, end = st.columns([1.1, 8, 1.1, 0.9], vertical_alignment="center")
        with text:
            st.markdown(f"**Step {at + 1} of {n}** · {safe.plain(lec.steps[at].caption)}")
        go_back = back.button("◀ Back", key="lecture_back", shortcut="left", disabled=at == 0, width="stretch",
                              help="The previous step (←)")
        go_next = nxt.button("Next ▶", key="lecture_next", shortcut="right", disabled=at >= n - 1,
                             width="stretch", help="The next step (→)")
        stop = end.button("End", key="lecture_end", width="stretch", help="Leave the lecture (the view stays)")
    if go_back:
        go(pages, at - 1)
    if go_next:
        go(pages, at + 1)
    if stop:
        for k in ("lecture", "lecture_ref", "lecture_at"):
            ss.pop(k, None)
        st.rerun()


# ----------------------------------------------------------------------------- the lecturer's own


def my_lecture() -> list[dict]:
    """The lecture being made in this session: ``[{"page", "link", "caption"}, ...]``."""
    return st.session_state.setdefault("my_lecture", [])


def editor(link: dict | None) -> None:
    """In the Explorer's Share area: "Add this view to my lecture" (``link``: the view's
    ``app.permalink`` state, None when the view has no link), the steps so far (move, remove),
    and the lecture shared as one link, or presented."""
    steps = my_lecture()
    with st.expander(f"My lecture ({len(steps)} step{'s' if len(steps) != 1 else ''})", expanded=bool(steps)):
        if link is not None:
            cap = st.text_input("Caption for this view (the claim, and what to look at)", key="lecture_caption",
                                max_chars=lecture.MAX_CAPTION)
            if st.button("Add this view to my lecture", key="lecture_add"):
                params = permalink.state_to_params({**link, "present": False})
                try:
                    lecture.check_step("explorer", params, cap or "(no caption)", f"step {len(steps) + 1}")
                except ExplorerError as e:
                    st.warning(as_text(e.one_line()))
                else:
                    if len(steps) >= lecture.MAX_STEPS:
                        st.warning(f"A lecture has at most {lecture.MAX_STEPS} steps.")
                    else:
                        steps.append({"page": "explorer", "link": params, "caption": cap or "(no caption)"})
                        st.rerun()
        else:
            st.caption("This view has no link (an upload), so it cannot be a lecture's step.")
        for i, s in enumerate(steps):
            row = st.columns([8, 0.7, 0.7, 0.7], vertical_alignment="center")
            what = " · ".join(safe.plain(str(v)) for v in (s["link"].get("model") or s["link"].get("code") or s["page"],
                                                           s["link"].get("backend"), s["link"].get("view")) if v)
            row[0].markdown(f"{i + 1}. **{what}** — {safe.plain(s['caption'])}")
            if row[1].button("↑", key=f"lecture_up_{i}", disabled=i == 0, help="Move up"):
                steps[i - 1], steps[i] = steps[i], steps[i - 1]
                st.rerun()
            if row[2].button("↓", key=f"lecture_down_{i}", disabled=i == len(steps) - 1, help="Move down"):
                steps[i + 1], steps[i] = steps[i], steps[i + 1]
                st.rerun()
            if row[3].button("✕", key=f"lecture_rm_{i}", help="Remove"):
                steps.pop(i)
                st.rerun()
        if steps:
            title = st.text_input("Lecture title", key="lecture_title", value="My lecture",
                                  max_chars=lecture.MAX_TITLE)
            if st.button("Share lecture", key="lecture_share"):
                try:
                    lec = lecture.from_dict({"title": title or "My lecture", "steps": steps})
                    st.session_state.lecture_link_id = default_store().put_code(lecture.to_json(lec))
                except ExplorerError as e:
                    st.warning(as_text(e.one_line()))
            lid = st.session_state.get("lecture_link_id")
            if lid:
                public, _ = permalink.public_url()
                base = permalink.link_base(st.context.url, public)
                st.caption("The whole lecture, one link (it opens the first step in presentation mode):")
                st.code(f"{base}?lecture={lid}", language=None, wrap_lines=True)
