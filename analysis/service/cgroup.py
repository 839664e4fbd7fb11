"""Job-wide limits: memory and processes for all of one job's processes together.

Per-process resource limits (``RLIMIT_AS``) do not bound a job that forks: three children of
1.5 GB each fit under a 2.6 GB address-space limit. So every job also gets one limit for the sum
of its processes, by the best mechanism this machine allows (probed once, see ``mechanism()``):

- **cgroup v2**: a child cgroup per job with ``memory.max``, ``memory.swap.max`` and
  ``pids.max``, under a cgroup whose ``subtree_control`` already delegates the ``memory`` and
  ``pids`` controllers to us (``$XLA_EXPLORER_CGROUP``, else the app's own cgroup's parent is
  not touched: only a prepared, delegated one is used). On a systemd host, start the app with
  ``systemd-run --user --scope -p Delegate=yes ...`` and point ``XLA_EXPLORER_CGROUP`` at a
  child of that scope with the two controllers enabled;
- **cgroup v1**: a child of the app's own cgroup in the ``memory`` and ``pids`` hierarchies
  (``memory.limit_in_bytes`` / ``memory.memsw.limit_in_bytes``, ``pids.max``) -- what a root
  process in a container with the legacy hierarchy can do;
- **watchdog**: where no cgroup can be made, a thread in the parent sums the memory (PSS) of the
  job's processes four times a second and kills the whole job over the limit; processes and
  threads are counted the same way.

The kernel accounts pages a job writes to its tmpfs (``/tmp``, ``/scratch``) to its memory
cgroup, so under a cgroup the tmpfs counts against the job's memory too; under the watchdog the
tmpfs sizes (``bwrap --size``) bound them.

The worker joins its cgroup before it starts (``join_argv``: a tiny shell that writes its own pid
into the cgroup and then runs the command), so every process the job ever makes is inside.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field

CGROUP_ENV = "XLA_EXPLORER_CGROUP"
PREFIX = "xla-explorer-"


def kill_until_gone(find, tries: int = 20) -> list[int]:
    """SIGKILL the processes ``find()`` names until it names none (a process may fork while it
    is killed); returns the ones left after ``tries`` rounds."""
    for _ in range(tries):
        left = find()
        if not left:
            return []
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
    return find()


@dataclass(frozen=True)
class Mechanism:
    kind: str  # "cgroup v2" | "cgroup v1" | "watchdog"
    detail: str  # where the job cgroups live, or why there are none
    memory_dir: str | None = None  # v1: parent of job cgroups in the memory hierarchy; v2: the one parent
    pids_dir: str | None = None  # v1: parent in the pids hierarchy

    def describe(self) -> str:
        if self.kind == "watchdog":
            return f"job-wide memory and process limits by a watchdog (sums the job's processes, kills over the limit; {self.detail})"
        return f"job-wide memory and process limits by {self.kind} ({self.detail})"


_lock = threading.Lock()
_found: Mechanism | None = None


def mechanism(refresh: bool = False) -> Mechanism:
    """How job-wide limits are enforced here (probed once per process)."""
    global _found
    with _lock:
        if _found is None or refresh:
            _found = _probe()
        return _found


def _own_cgroups() -> dict[str, str]:
    """The app's cgroup path per controller (v1) and under ``""`` (v2), from /proc/self/cgroup."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) != 3:
                    continue
                for ctl in parts[1].split(",") if parts[1] else [""]:
                    out[ctl] = parts[2]
    except OSError:
        pass
    return out


def _mounts() -> dict[str, str]:
    """Mount point per v1 controller and ``"cgroup2"`` for the unified hierarchy."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields_, rfields = left.split(), right.split()
                if len(fields_) < 5 or len(rfields) < 3:
                    continue
                point, fstype, opts = fields_[4], rfields[0], rfields[2].split(",")
                if fstype == "cgroup2":
                    out.setdefault("cgroup2", point)
                elif fstype == "cgroup":
                    for o in opts:
                        if o in ("memory", "pids"):
                            out.setdefault(o, point)
    except OSError:
        pass
    return out


def _try_child(parent: str, files: dict[str, str]) -> str | None:
    """Make a probe child under ``parent``, write ``files`` into it, remove it; None if it works,
    else why not."""
    probe = os.path.join(parent, f"{PREFIX}probe-{os.getpid()}")
    try:
        os.mkdir(probe)
    except FileExistsError:
        pass
    except OSError as e:
        return f"cannot create a cgroup under {parent}: {e.strerror}"
    try:
        for name, value in files.items():
            try:
                with open(os.path.join(probe, name), "w") as f:
                    f.write(value)
            except OSError as e:
                return f"cannot set {name} in {parent}: {e.strerror}"
        return None
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass


def _probe() -> Mechanism:
    own, mounts = _own_cgroups(), _mounts()
    why: list[str] = []
    # cgroup v2: only a parent that already delegates memory and pids (we never rearrange the
    # app's own cgroup: moving the app into a leaf is the service manager's business).
    v2 = os.environ.get(CGROUP_ENV)
    if not v2 and "cgroup2" in mounts and "" in own:
        v2 = os.path.join(mounts["cgroup2"], own[""].lstrip("/"))
    if v2:
        try:
            with open(os.path.join(v2, "cgroup.subtree_control")) as f:
                ctl = f.read().split()
        except OSError:
            ctl = []
        if {"memory", "pids"} <= set(ctl):
            err = _try_child(v2, {"memory.max": str(64 << 20), "pids.max": "64"})
            if err is None:
                return Mechanism("cgroup v2", f"one cgroup per job under {v2}", memory_dir=v2)
            why.append(err)
        else:
            why.append(f"cgroup v2 at {v2} delegates {' '.join(ctl) or 'no controllers'}, not memory and pids")
    if "memory" in mounts and "pids" in mounts and "memory" in own and "pids" in own:
        mem = os.path.join(mounts["memory"], own["memory"].lstrip("/"))
        pids = os.path.join(mounts["pids"], own["pids"].lstrip("/"))
        err = _try_child(mem, {"memory.limit_in_bytes": str(64 << 20)}) or _try_child(pids, {"pids.max": "64"})
        if err is None:
            return Mechanism("cgroup v1", f"one memory and one pids cgroup per job under {mem} and {pids}",
                             memory_dir=mem, pids_dir=pids)
        why.append(err)
    elif not why:
        why.append("no cgroup hierarchy with memory and pids controllers is mounted")
    return Mechanism("watchdog", "; ".join(why) or "no usable cgroup")


# ----------------------------------------------------------------------------- processes


def _status_fields(pid: int) -> dict[str, str]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = v.strip()
    except OSError:
        pass
    return out


def descendants(root: int) -> list[int]:
    """``root`` and every live process below it (by parent pid)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                rest = f.read().rsplit(b")", 1)[-1].split()
        except OSError:
            continue
        if rest and rest[0] != b"Z" and len(rest) > 1:
            children.setdefault(int(rest[1]), []).append(int(name))
    out, todo = [], [root]
    seen = set()
    while todo:  # iterative: a deep chain of forks cannot exhaust our stack
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        out.append(p)
        todo.extend(children.get(p, ()))
    return out


def memory_of(pid: int) -> int:
    """Bytes of memory a process uses: its proportional set size (shared pages split among the
    processes sharing them), else its resident set size."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    rss = _status_fields(pid).get("VmRSS", "0 kB").split()[0]
    try:
        return int(rss) * 1024
    except ValueError:
        return 0


def threads_of(pid: int) -> int:
    try:
        return int(_status_fields(pid).get("Threads", "1"))
    except ValueError:
        return 1


def folder_bytes(path: str, most: int = 100_000) -> int:
    """Bytes of the files under ``path`` (iterative walk; past ``most`` entries, counted as huge)."""
    total, seen, todo = 0, 0, [path]
    while todo:
        try:
            with os.scandir(todo.pop()) as it:
                for e in it:
                    seen += 1
                    if seen > most:
                        return 1 << 62
                    try:
                        if e.is_dir(follow_symlinks=False):
                            todo.append(e.path)
                        else:
                            total += e.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        pass
        except OSError:
            pass
    return total


# ----------------------------------------------------------------------------- one job


@dataclass
class JobLimits:
    """The job-wide limits of one job: made before the worker starts, closed after it ended."""

    token: str
    memory_mb: int
    nproc: int
    mech: Mechanism = field(default_factory=mechanism)
    hit: str | None = None  # "memory" | "processes" | "scratch" once a limit stopped the job
    peak_bytes: int = 0
    dirs: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self):
        name = PREFIX + self.token
        mb = self.memory_mb << 20
        try:
            if self.mech.kind == "cgroup v2":
                d = os.path.join(self.mech.memory_dir, name)
                os.mkdir(d)
                self.dirs = [d]
                self._write(d, "memory.max", mb)
                self._write(d, "memory.swap.max", 0, optional=True)
                self._write(d, "pids.max", self.nproc)
            elif self.mech.kind == "cgroup v1":
                m = os.path.join(self.mech.memory_dir, name)
                p = os.path.join(self.mech.pids_dir, name)
                os.mkdir(m)
                self.dirs.append(m)
                os.mkdir(p)
                self.dirs.append(p)
                self._write(m, "memory.limit_in_bytes", mb)
                self._write(m, "memory.memsw.limit_in_bytes", mb, optional=True)  # no swapping around it
                self._write(p, "pids.max", self.nproc)
        except OSError:
            # The machine changed under us (cgroup removed, permissions): fall back for this job.
            self._remove_dirs()
            self.mech = Mechanism("watchdog", "the job's cgroup could not be made")

    @staticmethod
    def _write(d: str, name: str, value, optional: bool = False) -> None:
        try:
            with open(os.path.join(d, name), "w") as f:
                f.write(str(value))
        except OSError:
            if not optional:
                raise

    def join_argv(self) -> list[str]:
        """A prefix for the worker's command line that moves it into the job's cgroups before
        it runs anything (empty under the watchdog)."""
        if not self.dirs:
            return []
        script = ('for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; done; '
                  'while [ "$1" != -- ]; do shift; done; shift; exec "$@"')
        return ["/bin/sh", "-c", script, "sh"] + [os.path.join(d, "cgroup.procs") for d in self.dirs] + ["--"]

    def pids(self, root: int | None = None, extra=()) -> list[int]:
        """Live processes of the job: the cgroup's members, or the tree under ``root`` plus ``extra``."""
        if self.dirs:
            out: set[int] = set()
            for d in self.dirs:
                try:
                    with open(os.path.join(d, "cgroup.procs")) as f:
                        out |= {int(x) for x in f.read().split()}
                except (OSError, ValueError):
                    pass
            return sorted(out)
        found = set(descendants(root)) if root else set()
        return sorted(found | set(extra))

    def watch(self, root: int, kill, extra=lambda: (), disk: tuple[str, int] | None = None) -> None:
        """Four times a second: under the watchdog sum the job's memory and threads, under a
        cgroup read whether the kernel enforced a limit, and (``disk``: a folder and its size in
        MB, for a job without a sandbox) measure what it wrote; over a limit, record which and
        call ``kill`` (the whole job ends, not just the process the kernel chose)."""
        limit = self.memory_mb << 20

        def loop():
            n = 0
            while not self._stop.wait(0.25):
                n += 1
                if self.dirs:
                    if self.read_hit():
                        kill()
                        return
                else:
                    pids = self.pids(root, extra())
                    total = sum(memory_of(p) for p in pids)
                    self.peak_bytes = max(self.peak_bytes, total)
                    if total > limit:
                        self.hit = "memory"
                        kill()
                        return
                    if sum(threads_of(p) for p in pids) > self.nproc:
                        self.hit = "processes"
                        kill()
                        return
                if disk and n % 4 == 0 and folder_bytes(disk[0]) > disk[1] << 20:
                    self.hit = "scratch"
                    kill()
                    return

        self._thread = threading.Thread(target=loop, name=f"xla-explorer-watchdog-{self.token}", daemon=True)
        self._thread.start()

    def kill_all(self) -> None:
        kill_until_gone(self.pids)

    def read_hit(self) -> str | None:
        """Which job-wide limit the kernel enforced (an OOM kill, forks refused), if any."""
        if self.hit or not self.dirs:
            return self.hit
        for d in self.dirs:
            for name, word, limit in (("memory.events", "oom_kill", "memory"), ("memory.oom_control", "oom_kill", "memory"),
                                      ("pids.events", "max", "processes")):
                try:
                    with open(os.path.join(d, name)) as f:
                        for line in f:
                            k, _, v = line.partition(" ")
                            if k == word and v.strip().isdigit() and int(v) > 0:
                                self.hit = limit
                                return limit
                except OSError:
                    continue
        for d in self.dirs:
            for name in ("memory.peak", "memory.max_usage_in_bytes"):
                try:
                    with open(os.path.join(d, name)) as f:
                        self.peak_bytes = max(self.peak_bytes, int(f.read().strip()))
                except (OSError, ValueError):
                    pass
        return None

    def close(self) -> None:
        """Stop the watchdog, kill what is left of the job, and remove its cgroups."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.read_hit()
        self.kill_all()
        self._remove_dirs()

    def _remove_dirs(self) -> None:
        for d in self.dirs:
            for _ in range(40):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # still has members for a moment after the kill
                    time.sleep(0.05)
        self.dirs = [d for d in self.dirs if os.path.isdir(d)]
