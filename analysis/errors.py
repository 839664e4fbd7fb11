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

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ExplorerError":
        return cls(**{k: d.get(k) for k in ("phase", "message", "file", "line", "column", "excerpt")})


def from_parse_error(err, file: str | None = None) -> ExplorerError:
    """An HloParseError as an ExplorerError of phase ``parse``."""
    return ExplorerError("parse", err.message, file, err.line, err.column, err.snippet.strip()[:200])
