"""How a worker that gave no result failed, in one line: the limit that stopped it (time,
output, memory, processes, scratch, CPU), the signal it died of, or its last words, with the
line of the user's file its traceback names (``ExplorerError``)."""

from __future__ import annotations

import re
import signal

from analysis.errors import ExplorerError
from analysis.service.settings import Limits
from analysis.service.worker_process import WorkerResult

_SIGNAL_NAMES = {signal.SIGSEGV: "segmentation fault", signal.SIGKILL: "killed", signal.SIGABRT: "aborted",
                 signal.SIGXCPU: "CPU time limit", signal.SIGXFSZ: "file size limit", signal.SIGBUS: "bus error",
                 signal.SIGILL: "illegal instruction", signal.SIGTERM: "terminated"}


def describe_failure(res: WorkerResult, limits: Limits, filename: str | None = None,
                     source: str | None = None) -> ExplorerError:
    """An ExplorerError for a worker that gave no result (killed, crashed, exited)."""
    line, excerpt = _last_user_line(res.stderr_tail, filename, source)
    if res.limit_hit == "timeout":
        return ExplorerError("limit", f"the job took longer than the time limit ({limits.timeout_s:g} s) and was stopped",
                             filename, line, None, excerpt)
    if res.limit_hit == "output":
        return ExplorerError("limit", f"the job wrote more than the output limit ({limits.output_mb} MB) and was stopped",
                             filename, line, None, excerpt)
    if res.limit_hit == "cancelled":
        return ExplorerError("run", "the job was cancelled", filename)
    if res.limit_hit == "memory":
        return ExplorerError("limit", f"the job's processes together used more than the memory limit "
                                      f"({limits.memory_mb} MB; {res.containment or 'job-wide limit'}) and were stopped",
                             filename, line, None, excerpt)
    if res.limit_hit == "processes":
        return ExplorerError("limit", f"the job started more than the process limit ({limits.nproc} processes "
                                      f"and threads; {res.containment or 'job-wide limit'})", filename, line, None, excerpt)
    if res.limit_hit == "scratch":
        return ExplorerError("limit", f"the job wrote more than the scratch limit ({limits.scratch_mb} MB) and was stopped",
                             filename, line, None, excerpt)
    rc = res.returncode
    sig = -rc if rc is not None and rc < 0 else (rc - 128 if rc is not None and 128 < rc < 160 else None)
    last = next((ln for ln in reversed(res.stderr_tail.strip().splitlines()) if ln.strip()), "")
    if "MemoryError" in res.stderr_tail or "Cannot allocate memory" in res.stderr_tail:
        return ExplorerError("limit", f"out of memory (limit {limits.memory_mb} MB)", filename, line, None, excerpt)
    if sig == signal.SIGXCPU:
        return ExplorerError("limit", f"the job used more than the CPU limit ({limits.cpu_s} s)", filename, line, None, excerpt)
    if sig is not None:
        try:
            name = _SIGNAL_NAMES.get(signal.Signals(sig), signal.Signals(sig).name)
        except ValueError:
            name = f"signal {sig}"
        return ExplorerError("run", f"the worker crashed ({name})", filename, line, None, excerpt)
    return ExplorerError("run", f"the worker ended without a result (exit {rc})" + (f": {last[:160]}" if last else ""),
                         filename, line, None, excerpt)


def _last_user_line(stderr: str, filename: str | None, source: str | None = None) -> tuple[int | None, str | None]:
    """The last line of the user's file named in a traceback or faulthandler dump."""
    if not filename:
        return None, None
    found = None
    pat = r'File "([^"]+)", line (\d+)'
    dump = stderr.rfind("most recent call first")  # faulthandler: innermost frame first
    if dump >= 0:
        for m in re.finditer(pat, stderr[dump:]):
            if m.group(1) == filename:
                found = int(m.group(2))
                break
    else:  # a Python traceback: innermost frame last
        for m in re.finditer(pat, stderr):
            if m.group(1) == filename:
                found = int(m.group(2))
    excerpt = None
    if found and source:
        lines = source.splitlines()
        if 0 < found <= len(lines):
            excerpt = lines[found - 1].strip()[:160]
    return found, excerpt
