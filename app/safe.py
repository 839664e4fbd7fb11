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


def plain(text: str) -> str:
    """A string from a user's file shown as itself in Streamlit's markdown without HTML (a
    caption): every ASCII punctuation mark markdown could read (links, images, emphasis, colour
    and emoji directives, LaTeX) escaped."""
    return _MARKDOWN_MARK.sub(r"\\\1", text)
