"""app.safe and the page's notes: a user's text shows as the characters it is, once escaped."""

from __future__ import annotations

import html

from app.page_helpers import wrapped_text
from app.safe import text


def test_a_title_with_an_apostrophe_and_markup_reads_back_as_written():
    title = "Flax's classifier <b>#1</b> & [link](x) `code`"
    shown = text(title)
    assert "<b>" not in shown and "[" not in shown and "`" not in shown and "#1" not in shown
    assert html.unescape(shown) == title  # one layer of references, never a reference of a reference


def test_a_note_wraps_as_prose_and_keeps_its_lines_and_its_characters():
    note = "Returns __dict__ and *args: 6 parameter arrays\nsecond line [x](y)"
    md = wrapped_text(note)
    assert "```" not in md and md.count("  \n") == 1
    assert "\\_\\_dict\\_\\_" in md and "\\[x\\]\\(y\\)" in md


def test_plain_text_keeps_every_mark_and_makes_no_link():
    from app.safe import plain

    assert plain("![x](y.png)") == "\\!\\[x\\]\\(y\\.png\\)"
    for s in ("see http://127.0.0.1:9/x", "HTTPS://a.b", "www.example.com", "mail@example.com", "![x](y.png)",
              "**b** _i_ `c` [l](u) $x$ :red[r] :smile:"):
        shown = plain(s)
        # no run of characters GitHub's Markdown finds a link in: a scheme's "://", "www.", an "@"
        # right after a word
        assert "://" not in shown and "www\\." not in shown.lower()
        assert all(shown[i - 1] == "\u2060" for i in range(1, len(shown)) if shown[i] == "@")
        # and, the escapes and the joiners taken off, the characters as written
        assert shown.replace("\u2060", "").replace("\\", "") == s


def test_html_safe_text_makes_no_link_either():
    for s in ("see http://127.0.0.1:9/x", "WWW.example.com", "mail@example.com"):
        shown = text(s)
        assert "&#58;//" not in shown and "www." not in shown.lower() and "l@" not in shown
        assert html.unescape(shown).replace("\u2060", "") == s
