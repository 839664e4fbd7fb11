"""The browser side of every graph view: the files under ``assets/`` (scripts, style sheets and
the app component's ``index.html``), one source for both front ends. The app's Streamlit
component serves the folder (``COMPONENT_DIR``: Streamlit serves only the files inside the folder
a component declares); the HTML report, which loads nothing from anywhere, inlines the same
files' texts (``script``, ``style``). Python reads them through ``importlib.resources``, so an
installed package (its package data) works as the source tree does."""

from __future__ import annotations

import os
from importlib import resources

COMPONENT_DIR = os.fspath(resources.files(__package__).joinpath("assets"))


def text(name: str) -> str:
    """One file of ``assets/``, as text."""
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def script(*names: str) -> str:
    """The scripts' texts, in order, for one inline ``<script>`` element. None may hold ``</script``
    or ``<!--``: the element would end (or the HTML parser change state) inside it."""
    texts = [text(n) for n in names]
    for n, t in zip(names, texts):
        low = t.lower()
        if "</script" in low or "<!--" in low:
            raise ValueError(f"assets/{n} cannot be inlined in a <script> element")
    return "\n".join(texts)


def style(*names: str) -> str:
    """The style sheets' texts, in order, for one inline ``<style>`` element."""
    texts = [text(n) for n in names]
    for n, t in zip(names, texts):
        if "</style" in t.lower():
            raise ValueError(f"assets/{n} cannot be inlined in a <style> element")
    return "\n".join(texts)
