"""Text from a bundle, an upload or a worker, made safe to put into Markdown that may hold HTML.

Everything a user or a worker sends is untrusted: a bundle's title, a pass's pipeline name, an
uploaded dump's module name. ``text(value)`` escapes it for HTML (``<``, ``>``, ``&``, quotes)
and also turns the characters Markdown gives a meaning (links, emphasis, code spans) into
character references, so the value shows as the characters it is, and nothing else.
``plain(value)`` does the same for Markdown rendered without HTML (a caption): each mark
Markdown could read backslash-escaped.
"""

from __future__ import annotations

import html
import re

_MARKDOWN = {c: f"&#{ord(c)};" for c in "\\`*_[](){}#+!|~$:"}
_ESCAPE = {**_MARKDOWN, "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
_MARKDOWN_MARK = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def text(value, limit: int = 300) -> str:
    """``value`` as inert text for ``st.markdown(..., unsafe_allow_html=True)`` (cut at ``limit``)."""
    s = str(value if value is not None else "")
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    # one pass, each character once: escaping for HTML first and for Markdown after would turn
    # the ``#`` of ``&#x27;`` into a reference too, and a title's apostrophe would show as ``&#x27;``
    return "".join(_ESCAPE.get(c, c) for c in s)


# GitHub's Markdown turns a URL or an e-mail address in running text into a link after the
# escapes are read (Streamlit's renderer links "http://...", "www...." and "a@b.c" found in a
# text's characters): a word joiner (U+2060, drawn as nothing) inside each keeps it text
_AUTOLINK = re.compile(r"(?i)(\\:)(?=//)|(www)(?=\\\.)|(?=@)")


def plain(text: str) -> str:
    """A string from a user's file shown as itself in Streamlit's markdown without HTML (a
    caption, a presented table's cell): every ASCII punctuation mark markdown could read
    (links, images, emphasis, colour and emoji directives, LaTeX) escaped, and no URL or
    address in it made a link."""
    return _AUTOLINK.sub(lambda m: (m.group(1) or m.group(2) or "") + "\u2060", _MARKDOWN_MARK.sub(r"\\\1", text))
