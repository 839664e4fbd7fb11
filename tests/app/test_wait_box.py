"""The box a page shows while a job runs (``page_helpers.WaitBox``): its phase as written, each
phase it went through, and nothing in it read as Markdown (a label may name a user's file)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _page():
    import streamlit as st

    from app.page_helpers import WaitBox

    box = WaitBox(st.empty(), st.session_state["label"], lines=st.session_state["lines"])
    for line in st.session_state["phases"]:
        box.update(line + "…")
        box.write(line)


def _shown(label: str, phases: list[str], lines: bool) -> tuple[list[str], list[str]]:
    at = AppTest.from_function(_page, default_timeout=30)
    at.session_state["label"], at.session_state["phases"], at.session_state["lines"] = label, phases, lines
    at.run()
    assert not at.exception
    return [m.value for m in at.markdown], [c.value for c in at.caption]


def test_the_box_says_its_phase_and_each_one_it_went_through():
    titles, lines = _shown("Compiling…", ["Loading the code", "Compiling with XLA"], lines=True)
    assert len(titles) == 1 and "Compiling with XLA" in titles[0]  # the phase it is in now
    assert [ln.replace("\\", "") for ln in lines] == ["Loading the code", "Compiling with XLA"]
    titles, lines = _shown("Compiling A…", ["Tracing to a jaxpr"], lines=False)  # (a section's box: the phase alone)
    assert lines == [] and "Tracing to a jaxpr" in titles[0]


def test_a_file_name_in_the_label_is_not_markdown():
    name = "![seen](http://tracker.example/p.png) *loud* [link](http://x.example).py"
    titles, _ = _shown(f"Opening {name} in the sandbox…", [], lines=False)
    title = titles[0]
    # every mark Markdown could read is escaped: no image, link or emphasis is made of the name
    for raw in ("![", "](", "*loud*", "[link]"):
        assert raw not in title, title
    assert "tracker" in title and "loud" in title
