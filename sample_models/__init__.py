"""The gallery: small JAX models, each a file with a module-level ``model`` callable, an
``example_inputs()`` that returns the argument tuple, and a docstring whose first line is the
title and whose rest is the lesson (what to look for in the compile).

This package never imports JAX itself; loading a model file does.
"""

from __future__ import annotations

import ast
import re
import threading
from dataclasses import dataclass
from pathlib import Path

GALLERY_DIR = Path(__file__).resolve().parent
DEFAULT_MODEL = "mlp"


@dataclass(frozen=True)
class GalleryEntry:
    name: str
    title: str
    lesson: str
    path: Path

    @property
    def source(self) -> str:
        return self.path.read_text()


# One reading at a time, remembered until a file changes: CPython 3.11's ast.parse is not safe
# from several threads at once (measured: "SystemError: AST constructor recursion depth
# mismatch" under the load test's 20 concurrent sessions), and every job looks the gallery up.
_lock = threading.Lock()
_memo: dict = {}


def gallery() -> dict[str, GalleryEntry]:
    """Every model file in this folder, by name, read without importing it (no JAX needed)."""
    paths = sorted(p for p in GALLERY_DIR.glob("*.py") if not p.name.startswith("_"))
    stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in paths)
    with _lock:
        if _memo.get("stamp") != stamp:
            _memo["entries"], _memo["stamp"] = _read(paths), stamp
        return dict(_memo["entries"])


def _read(paths: list[Path]) -> dict[str, GalleryEntry]:
    out: dict[str, GalleryEntry] = {}
    for path in paths:
        tree = ast.parse(path.read_text())
        defines = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        defines |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        if not {"model", "example_inputs"} <= defines:
            continue  # a helper module (e.g. lessons.py), not a model
        doc = ast.get_docstring(tree) or path.stem
        title, _, lesson = doc.partition("\n")
        out[path.stem] = GalleryEntry(path.stem, title.strip(), lesson.strip(), path)
    # The default first, the rest alphabetically.
    return dict(sorted(out.items(), key=lambda kv: (kv[0] != DEFAULT_MODEL, kv[0])))


def gallery_entry(name: str) -> GalleryEntry:
    """The gallery model ``name``; an ``ExplorerError`` naming the models there are if none is."""
    entries = gallery()
    if name not in entries:
        from analysis.errors import ExplorerError

        raise ExplorerError("load", f"no gallery model named {name!r} (have: {', '.join(entries)})")
    return entries[name]


RECORDED_DIR = GALLERY_DIR / "recorded"


def preset_slug(name: str) -> str:
    """A preset's name as a file name part: "Fusion + Triton rewrites off" -> "fusion-triton-rewrites-off"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def recorded_bundle_path(name: str, target: str, preset: str = "Default") -> Path | None:
    """The gallery model ``name`` compiled by XLA:GPU for ``target`` (e.g. ``h200``) without a
    GPU with the options of ``preset`` (``analysis.options.presets('gpu')``), as
    ``scripts/record_gpu_target.py`` recorded it, if there is one."""
    slug = "" if preset == "Default" else "." + preset_slug(preset)
    path = RECORDED_DIR / target.lower() / f"{name}{slug}.bundle.json"
    return path if path.is_file() else None
