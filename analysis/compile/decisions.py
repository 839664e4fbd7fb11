"""Capture XLA's fusion decisions during one compile.

The fusion passes log each decision at a verbose level (``analysis.fusion.decisions.VMODULES``).
Setting ``TF_CPP_VMODULE`` only works before jaxlib loads; jaxlib's ``utils`` also exposes
absl's ``absl_set_vlog_level`` / ``absl_set_min_log_level``, which take effect at once (checked
with jax 0.10.2), so ``capture`` raises the levels for the one compile, points file descriptor 2
at a file in the compile's dump folder while it runs (the log is written by C++ straight to
fd 2, from XLA's compile threads), and puts everything back. The same code serves the sandboxed
worker and in-process compiles (the CLI's gallery path, tests); no environment variable is needed.

``read_decisions(bundle, dump_dir)`` parses that log (and XLA:GPU's fusion process dump, when
the dump folder has one) into ``bundle.fusion_decisions``. A compile in ``analysis.compile.stages``
reads the log while XLA writes it (``LogFollower``, polled from the thread beside the compile),
so the parse is done by the time XLA is.

Set ``XLA_EXPLORER_FUSION_DECISIONS=0`` to compile without capturing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import sys

import jax  # noqa: F401 - jaxlib's own logging reads the environment as it loads: before the lines below

from analysis.bundle.core import Bundle
from analysis.fusion.decisions import from_texts
from analysis.fusion.log import VMODULES, LogParser, log_line
from analysis.fusion.decisions import RecordMatcher

_USER_MIN_LEVEL = os.environ.get("TF_CPP_MIN_LOG_LEVEL")  # "1" unless the user chose: JAX sets it on import


def _prepare_plugin_logging() -> None:
    """XLA:GPU's plugin carries its own copy of absl logging, which reads ``TF_CPP_VMODULE`` and
    ``TF_CPP_MIN_LOG_LEVEL`` once, when JAX loads the plugin (at its first backend use), and has
    no runtime switch that reaches it. So the GPU fusion passes' levels are put in the
    environment now, before that (jaxlib's CPU side has read its environment already and is
    switched per compile by ``capture``). A user's own settings win."""
    if not enabled():
        return
    os.environ.setdefault("TF_CPP_VMODULE", ",".join(f"{m}={v}" for m, v in VMODULES["gpu"].items()))
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "1") == "1":  # JAX's own default (jax/__init__.py)
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"

LOG_FILE = "xla-explorer.fusion-decisions.log"
_KEEP_FILES = frozenset(f"{m}.{ext}" for v in VMODULES.values() for m in v for ext in ("cc", "h"))
_GLOG = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ")
_SHOW = re.compile(r"^[WEF]\d{4} ")  # warnings and errors still reach the real stderr


def enabled() -> bool:
    return os.environ.get("XLA_EXPLORER_FUSION_DECISIONS", "1").strip().lower() not in ("0", "false", "no", "off")


def _utils():
    try:
        from jax._src.lib import utils  # absl's runtime log controls, as jaxlib exposes them
    except Exception:  # noqa: BLE001 - an older jaxlib without them: no capture
        return None
    if not hasattr(utils, "absl_set_vlog_level") or not hasattr(utils, "absl_set_min_log_level"):
        return None
    return utils


class LogFollower:
    """The capture's log read while XLA writes it. A big program logs megabytes; parsed after
    the compile that was pure Python added to the wait (docs/performance.md), and XLA's fusion
    passes are done long before its code generation is: ``poll`` (called beside the compile)
    reads the complete lines that are new and feeds the fusion passes' lines to a ``LogParser``,
    numbered as in the log ``_filter`` would leave; any other line is kept, to be echoed.
    ``close`` (as the capture ends) reads the rest. Once closed, ``parser`` holds the whole log,
    unless reading failed."""

    def __init__(self, path: str):
        self.path = path
        self.parser = LogParser()
        self.show: list[str] = []
        self.closed = self.failed = False
        self._offset = 0
        self._partial = b""
        self._kept = 0
        # decisions made from this log beside the compile: (lines fed then, provenance used,
        # the result); ``read_decisions`` takes them if no line came after
        self.decided: tuple | None = None
        # the records matched to the module before optimization as they are read (``match_onto``)
        self.matcher = None

    @property
    def complete(self) -> bool:
        return self.closed and not self.failed

    def poll(self, final: bool = False) -> bool:
        """Read and parse what is new; True if there was something."""
        if self.closed or self.failed:
            return False
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            self.failed = final  # not there yet, while the compile runs
            return False
        self._offset += len(data)
        data = self._partial + data
        cut = len(data) if final else data.rfind(b"\n") + 1  # lines end at a newline byte: UTF-8 is whole there
        self._partial = data[cut:]
        # decoded and split as _filter reads the file (text mode: str.splitlines of the whole)
        for line in data[:cut].decode("utf-8", errors="replace").splitlines():
            kind, file, message = _split(line)
            if kind == "keep":
                self._kept += 1
                self.parser.feed_message(file, message, self._kept)
            elif kind == "show":
                self.show.append(line)
        if cut > 0:
            self._advance()
        return cut > 0

    def match_onto(self, pre) -> None:
        """From now on, each poll matches the new records of ``pre``'s module to its ops
        (``RecordMatcher``), so that little is left to match once the optimized module is
        there: the matching reads the module before optimization alone, and runs while XLA
        still optimizes (docs/performance.md)."""
        self.matcher = RecordMatcher(pre, known=self.parser.instructions(pre.name))
        self._advance()

    def _advance(self) -> None:
        m = self.matcher
        if m is None:
            return
        records = self.parser.records_of(m.pre.name)
        if records is not None and (m.records is None or m.records is records):
            m.feed(records, complete=False)

    def close(self) -> None:
        try:
            self.poll(final=True)
        except Exception:  # noqa: BLE001 - the log is then read from its file, as before
            self.failed = True
        self.closed = True


@contextlib.contextmanager
def capture(dump_dir: str, follower: LogFollower | None = None):
    """Around one compile: XLA's fusion log goes to ``dump_dir/LOG_FILE`` (filtered to the
    fusion passes' lines when it is closed); warnings and errors are echoed to stderr. With a
    ``follower`` (made for this path, polled during the compile), the log is parsed as it is
    written and closed here; the file is then left as XLA wrote it."""
    utils = _utils() if enabled() else None
    if utils is None:
        yield None
        return
    path = os.path.join(dump_dir, LOG_FILE)
    modules = sorted({m: v for p in VMODULES.values() for m, v in p.items()}.items())
    merged: dict[str, int] = {}
    for p in VMODULES.values():
        for m, v in p.items():
            merged[m] = max(v, merged.get(m, 0))
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.dup2(fd, 2)
        utils.absl_set_min_log_level(0)
        for m, v in merged.items():
            utils.absl_set_vlog_level(m, v)
        yield path
    finally:
        for m, _ in modules:
            utils.absl_set_vlog_level(m, 0)
        utils.absl_set_min_log_level(_default_min_level())
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)
        if follower is not None and follower.path == path:
            follower.close()
        if follower is not None and follower.complete:
            if follower.show:
                sys.stderr.write("\n".join(follower.show) + "\n")
        else:
            _filter(path)


def _default_min_level() -> int:
    try:
        return int(_USER_MIN_LEVEL if _USER_MIN_LEVEL is not None else "1")
    except ValueError:
        return 1


def _split(line: str) -> tuple[str | None, str | None, str | None]:
    """The line's kind, and for a fusion pass's line the file that logged it and its message
    (the line split once, for sorting and for the parser). ``keep``: a fusion pass's line;
    ``show``: XLA's warnings and errors, and whatever else was printed (the user's own prints
    while tracing), for the real stderr; None: the rest."""
    got = log_line(line)
    if got is not None and got[0] in _KEEP_FILES:
        return "keep", got[0], line[got[1]:]
    if _SHOW.match(line) or not _GLOG.match(line):
        return "show", None, None
    return None, None, None


def _filter(path: str) -> None:
    """Keep the fusion passes' lines; echo XLA's warnings and errors, and anything that is not
    a log line (the user's own prints while tracing), to the real stderr."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return
    keep, show = [], []
    for ln in lines:
        kind = _split(ln)[0]
        if kind == "keep":
            keep.append(ln)
        elif kind == "show":
            show.append(ln)
    if show:
        sys.stderr.write("\n".join(show) + "\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(keep) + ("\n" if keep else ""))


_prepare_plugin_logging()


def read_decisions(bundle: Bundle, dump_dir: str, follower: LogFollower | None = None) -> None:
    """The captured log (and a fusion process dump, if XLA wrote one) -> ``bundle.fusion_decisions``.
    A complete ``follower`` has read the log already, and may have made the decisions from it
    (``decide``): taken if the log ended there and the bundle has the provenance they used."""
    dumps = sorted(glob.glob(os.path.join(dump_dir, "*priority_fusion_dump.txt")))
    complete = follower is not None and follower.complete
    if complete and not dumps and follower.decided is not None:
        fed, provenance, result = follower.decided
        if fed == follower.parser.fed and provenance is bundle.provenance:
            bundle.fusion_decisions = result
            return
    bundle.fusion_decisions = decisions_from_files(bundle, os.path.join(dump_dir, LOG_FILE), dumps,
                                                   follower.parser if complete else None)


def decide(follower: LogFollower, pre, post, provenance, platform: str, dump_dir: str) -> None:
    """The decisions from the log read so far (beside the compile, once the optimized module
    is analyzed: XLA's fusion passes are done by then), kept on ``follower`` for
    ``read_decisions``. Not with a fusion process dump (XLA:GPU): that is read after."""
    import jax

    if glob.glob(os.path.join(dump_dir, "*priority_fusion_dump.txt")):
        return
    fed = follower.parser.fed
    result = from_texts(pre, post, provenance, platform, None, [], {"jax": jax.__version__}, follower.parser,
                        follower.matcher)
    follower.decided = (fed, provenance, result)


def decisions_from_files(bundle: Bundle, log_path: str | None, dump_paths: list[str],
                         parsed: LogParser | None = None) -> dict | None:
    log = None
    if parsed is None and log_path and os.path.exists(log_path):
        with open(log_path, encoding="utf-8", errors="replace") as f:
            log = f.read()
    dumps = []
    for p in dump_paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            dumps.append(f.read())
    return decisions_from_texts(bundle, log, dumps, parsed)


def decisions_from_texts(bundle: Bundle, log: str | None, dumps: list[str],
                         parsed: LogParser | None = None) -> dict | None:
    import jax

    return from_texts(bundle.module("hlo_before"), bundle.module("hlo_after"), bundle.provenance,
                      bundle.environment.get("platform", ""), log, dumps, {"jax": jax.__version__}, parsed)
