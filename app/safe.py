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

_MARKDOWN = {c: f"&#{ord(c)};" for c in "\\`*_[](){}#+!|~$:"}
_ESCAPE = {**_MARKDOWN, "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
_MARKDOWN_MARK = {ord(c): "\\" + c for c in "\\`*_{}[]()#+-.!|<>~$:"}  # each backslash-escaped


def text(value, limit: int = 300) -> str:
    """``value`` as inert text for ``st.markdown(..., unsafe_allow_html=True)`` (cut at ``limit``),
    no URL or address in it made a link."""
    s = str(value if value is not None else "")
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    # one pass, each character once: escaping for HTML first and for Markdown after would turn
    # the ``#`` of ``&#x27;`` into a reference too, and a title's apostrophe would show as ``&#x27;``
    return _unlinked("".join(_ESCAPE.get(c, c) for c in s), _ESCAPE[":"], ".")


# GitHub's Markdown turns a URL or an e-mail address in running text into a link after the
# escapes and character references are read (Streamlit's renderer links "http://...",
# "www...." and "a@b.c" found in a text's characters): a word joiner (U+2060, drawn as nothing)
# inside each keeps it text. str methods, one pass each: no pattern reads the user's text here.
_JOINER = "\u2060"


def _unlinked(s: str, colon: str, dot: str) -> str:
    """``s`` (escaped, its ``:`` written ``colon`` and its ``.`` written ``dot``) with a word joiner
    after a scheme's ``:``, between ``www`` and its ``.``, and before each ``@``."""
    s = s.replace(colon + "//", colon + _JOINER + "//").replace("@", _JOINER + "@")
    parts = s.split(dot)
    return dot.join(p + _JOINER if i < len(parts) - 1 and p[-3:].lower() == "www" else p
                    for i, p in enumerate(parts))


def plain(text: str) -> str:
    """A string from a user's file shown as itself in Streamlit's markdown without HTML (a
    caption, a presented table's cell): every ASCII punctuation mark markdown could read
    (links, images, emphasis, colour and emoji directives, LaTeX) escaped, and no URL or
    address in it made a link."""
    return _unlinked(text.translate(_MARKDOWN_MARK), "\\:", "\\.")
