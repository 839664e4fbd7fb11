"""Errors a user can cause, as one line with the place it happened.

Every failure that comes from the user's input (a model file, pasted code, an HLO text, an
uploaded bundle, an option) is raised as an ``ExplorerError``: the phase (``syntax``,
``import``, ``trace``, ``lower``, ``compile``, ``run``, ``parse``, ``load``, ``limit``, ...),
a message, and where known the file, line and column plus a short excerpt. The UI and the CLI
print ``one_line()``; nothing else of the traceback reaches the user.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class ExplorerError(Exception):
    phase: str
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    excerpt: str | None = None
    # the whole text of what was raised, where it says more than ``message`` (its first line):
    # the app shows it, as text, under the one line
    detail: str | None = None

    def __post_init__(self):
        super().__init__(self.one_line())

    def where(self) -> str:
        parts = [self.file or ""]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts).strip(":")

    def one_line(self) -> str:
        where = self.where()
        msg = " ".join(str(self.message).split())
        if len(msg) > 300:
            msg = msg[:297] + "..."
        return f"{self.phase} error" + (f" at {where}" if where else "") + f": {msg}"

    def __str__(self) -> str:
        return self.one_line()

    def full_text(self) -> str:
        """The one line, then the whole text of the error where it says more (the app's view)."""
        head = self.one_line()
        extra = (self.detail or "").strip()
        first, _, rest = extra.partition("\n")
        if first.strip() == str(self.message).strip():  # the one line says that much already
            extra = rest.strip()
        if not extra or " ".join(extra.split()) == " ".join(str(self.message).split()):
            return head
        return head + "\n" + extra

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ExplorerError":
        """From a worker's message (untrusted): texts as bounded strings, places as numbers."""
        def text(k, most):
            v = d.get(k)
            return None if v is None else str(v)[:most]

        def number(k):
            v = d.get(k)
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        return cls(text("phase", 40) or "run", text("message", MAX_DETAIL) or "", text("file", 500), number("line"),
                   number("column"), text("excerpt", 300), text("detail", MAX_DETAIL))


MAX_DETAIL = 8000  # characters of an error's whole text kept (a JAX error explains itself at length)


def from_parse_error(err, file: str | None = None) -> ExplorerError:
    """An HloParseError as an ExplorerError of phase ``parse``, at ``file`` or the text it names."""
    return ExplorerError("parse", err.message, file or getattr(err, "source", None), err.line, err.column,
                         err.snippet.strip()[:200])
