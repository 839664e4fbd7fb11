"""What a user's code raised, as one ``ExplorerError`` at the user's own line: the innermost
frame in the user's file, an exception a host callback raised while XLA ran the program (XLA
reports it as text), the first meaningful line as the message and the whole text as its detail.
Where no frame of the user's file is on the stack (JAX refusing what the program hands to ``jit``:
a Keras Variable written for an older JAX, a value that is no array), the line that defines what
was being run (``model``, ``example_inputs``).
Used by everything that runs user code (``load``, ``frameworks``, ``stages``, ``sweep``, the
worker)."""

from __future__ import annotations

import ast
import contextlib
import linecache
import re
import traceback
from typing import Callable

from analysis.errors import MAX_DETAIL, ExplorerError
from analysis.devices.catalog import MAX_DEVICES


def _user_frame(tb, filename: str):
    """The innermost traceback frame in the user's file, as (line, excerpt)."""
    found = None
    for fs in traceback.extract_tb(tb):
        if fs.filename == filename:
            found = fs
    if found is None:
        return None, None
    return found.lineno, (found.line or "").strip()[:160]


def defined_at(source: str, name: str) -> int | None:
    """The line of the file's last top-level ``def name``, ``class name`` or ``name = ...``
    (what ``python FILE`` leaves bound to ``name``); None where the text does not bind it there."""
    if not isinstance(source, str):
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    line = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            line = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                line = node.lineno
    return line


def error_from_exception(phase: str, exc: BaseException, filename: str, where: int | None = None) -> ExplorerError:
    """What the user's code raised, as one line at the user's line (``where``, the line of what
    was being run, when no frame of the user's file is on the stack)."""
    if isinstance(exc, ExplorerError):
        return exc
    if isinstance(exc, SyntaxError) and (exc.filename == filename or phase == "syntax"):
        return ExplorerError("syntax", exc.msg or "invalid syntax", filename, exc.lineno, exc.offset,
                             (exc.text or "").strip()[:160])
    line, excerpt = _user_frame(exc.__traceback__, filename)
    if line is None and where is not None:
        line, excerpt = where, _excerpt(filename, where)
    inner = _embedded_traceback(str(exc), filename)
    if inner is not None:  # the user's callback raised while XLA ran the program
        what, at = inner
        if at is not None:
            line, excerpt = at, (linecache.getline(filename, at).strip()[:160] or None)
        return ExplorerError(phase, f"{what} (raised by a callback while the program ran)", filename, line, None, excerpt)
    whole = str(exc).strip()
    msg = whole.splitlines()
    first = next((m for m in msg if m.strip()), "")
    # JAX prefixes long explanations: the first meaningful line is the message, the whole text
    # its detail (the app shows both)
    first, hint = _state_hint(first)
    text = (f"{type(exc).__name__}: {first}" if first else type(exc).__name__) + _device_hint(first) + hint
    if isinstance(exc, ModuleNotFoundError):
        phase = "import"
        if (exc.name or "").split(".")[0] in ("torch", "torchax"):  # PyTorch is an extra: say how to add it
            text += f" ({TORCH_MISSING})"
    detail = f"{type(exc).__name__}: {whole}"[:MAX_DETAIL] if len(msg) > 1 else None
    return ExplorerError(phase, text, filename, line, None, excerpt, detail)


# PyTorch models compile through torchax, installed with the [torch] extra (docs/pytorch.md)
TORCH_MISSING = ("PyTorch models need the torch extra: start the app with `bash scripts/dev.sh app --torch`, "
                 "or pip install -e '.[torch]'")


def _excerpt(filename: str, line: int) -> str | None:
    return linecache.getline(filename, line).strip()[:160] or None


# JAX's words when a mesh needs more devices than the process has (jax.make_mesh)
_MESH_TOO_BIG = re.compile(r"Number of devices (\d+) must be >= the product of mesh_shape \(([\d, ]+)\)")


def _device_hint(message: str) -> str:
    """What to do when the user's mesh needs more devices than the job has, naming the limit."""
    m = _MESH_TOO_BIG.search(message)
    if not m:
        return ""
    need = 1
    for n in re.findall(r"\d+", m.group(2)):
        need *= int(n)
    if need > MAX_DEVICES:
        return f" (the job has {m.group(1)} devices; at most {MAX_DEVICES} are allowed here)"
    return (f" (the job has {m.group(1)} devices: run it on {need} with DEVICES = {need} in the file, "
            f"the Devices setting or --devices {need}; at most {MAX_DEVICES})")


# Flax NNX's words when a traced program changes an object it was not handed (a module or
# optimizer the step reads from the file's globals, an Rngs a function given to nnx.grad closes
# over): under a transform its update could not be returned
_OUTER_STATE = re.compile(r"^(Cannot (?:extract graph node|mutate '?\w+'?) from (?:a )?different trace level)")


def _state_hint(message: str) -> tuple[str, str]:
    """The message (cut before Flax's dump of the variable) and what to do, where a transform
    changes Flax NNX state it was not handed."""
    m = _OUTER_STATE.match(message)
    if not m:
        return message, ""
    return m.group(1), (": a Flax NNX module, optimizer, metric or Rngs is changed inside a transform (the "
                        "compile's jit, nnx.grad, ...) it was not handed to as an argument; hand it to `model` "
                        "as an argument (from example_inputs()), and to the inner transform, so its state goes "
                        "in and comes back updated, as nnx.jit does")


_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'File "([^"\n]+)", line (\d+)')


def _embedded_traceback(text: str, filename: str) -> tuple[str, int | None] | None:
    """A Python traceback inside an exception's text (XLA reports an exception a host callback
    raised as text): its last line (``RuntimeError: ...``) and the user's last line in it."""
    if _TRACEBACK not in text:
        return None
    tail = text.rsplit(_TRACEBACK, 1)[1]
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    if not lines:
        return None
    at = None
    for m in _FRAME.finditer(tail):
        if m.group(1) == filename:
            at = int(m.group(2))
    return lines[-1][:300], at


def call_user(phase: str, fn: Callable, filename: str, *args):
    """``fn(*args)`` where ``fn`` is the user's; anything it raises (SystemExit included) becomes
    an ``ExplorerError`` of ``phase``."""
    try:
        return fn(*args)
    except BaseException as e:  # noqa: BLE001 - user code may raise anything, SystemExit included
        if isinstance(e, KeyboardInterrupt):
            raise
        raise error_from_exception(phase, e, filename) from None


@contextlib.contextmanager
def user_code(phase: str, filename: str, where: int | None = None):
    """Inside, anything the user's program raises (while JAX traces, lowers or prints it) becomes
    one ``ExplorerError`` of ``phase`` at the user's line (``where`` when none of its frames is on
    the stack); an ``ExplorerError`` passes as it is."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - the user's program may raise anything: one line, at its line
        raise error_from_exception(phase, e, filename, where) from None
