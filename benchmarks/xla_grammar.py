"""Our HLO parser against XLA's own C++ parser over a folder of HLO modules.

For every ``*.hlo`` file under DIR both parsers read the text: ours (``analysis.hlo``) and XLA's
(``jaxlib._hlo.hlo_module_from_text``, private jaxlib API, used here only as an oracle). Each
module runs in a worker process with a timeout, since XLA aborts the process on some input.
Prints:

- modules; XLA accepts; ours accepts; both accept and agree; both accept and differ (listed);
- XLA accepts, ours rejects, grouped by our message; crashes (ours: an exception that is not an
  HloParseError; XLA: the worker died or timed out);
- ours accepts what XLA rejects (listed); the legend's exceptions (``analysis.program.kernels.kernels``
  raising on a module we accept);
- the parse-time ratio, ours / XLA's, summed over the modules both accept (and for the largest).

"Agree" means: the same computations (by name, in order), the same entry, the same root of
each computation, and per computation the same instructions in order with the same opcodes and
operands. Allowed for: XLA renames duplicate names (``p`` -> ``p.1``: names are unique
module-wide in XLA, per computation in ours); XLA turns ``X-start``/``X-done`` sugar into
``async-start``/``async-done`` over a computation it adds (``async_wrapped``; ours keeps the
sugar's opcode, and the wrapped op ``X`` must be XLA's wrapped root).

Run::

    .venv/bin/python benchmarks/xla_grammar.py DIR [--jobs 2] [--timeout 60] [--list] [--only SUBSTR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import select
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# HloOpcode enum names whose text spelling is not plain camelCase -> kebab-case.
_OPCODE_EXCEPTIONS = {
    "kClz": "count-leading-zeros", "kCos": "cosine", "kSin": "sine", "kExp": "exponential",
    "kExpm1": "exponential-minus-one", "kLog1p": "log-plus-one", "kPopulationCount": "popcnt",
    "kOptimizationBarrier": "opt-barrier", "kTopK": "topk",
}


def opcode_text(op) -> str:
    name = op.name if hasattr(op, "name") else str(op).split(".")[-1]
    return _OPCODE_EXCEPTIONS.get(name) or re.sub(r"(?<!^)(?=[A-Z])", "-", name[1:]).lower()


# ----------------------------------------------------------------------------- worker side


def _ours(text: str) -> dict:
    from analysis.hlo import HloParseError, parse_module

    t = time.perf_counter()
    try:
        mod = parse_module(text)
    except HloParseError as e:
        return {"ok": False, "time": time.perf_counter() - t, "error": str(e), "message": e.message}
    except Exception as e:  # noqa: BLE001 - a crash is what we count
        import traceback

        return {"ok": False, "time": time.perf_counter() - t, "crash": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc()[-1500:]}
    dt = time.perf_counter() - t
    comps = []
    for c in mod.computations:
        insts = []
        for i in c.instructions:
            try:
                i.shape  # decoded lazily; must not raise on an accepted module
            except Exception as e:  # noqa: BLE001
                return {"ok": False, "time": dt, "crash": f"shape of {i.name}: {type(e).__name__}: {e}"}
            insts.append([i.name, i.opcode, list(i.operands)])
        comps.append([c.name, c.is_entry, c.root.name if c.root else None, insts])
    legend = None
    try:
        from analysis.program.kernels import kernels

        kernels(mod)
    except Exception as e:  # noqa: BLE001
        legend = f"{type(e).__name__}: {e}"[:300]
    return {"ok": True, "time": dt, "comps": comps, "legend_error": legend}


_PRINT_COMP_RE = re.compile(r"^(ENTRY )?%(\S+) ")
_PRINT_ROOT_RE = re.compile(r"^\s+ROOT %(\S+) =")


def _xla(text: str) -> dict:
    from jaxlib import _hlo

    t = time.perf_counter()
    try:
        mod = _hlo.hlo_module_from_text(text)
    except Exception as e:  # noqa: BLE001
        return {"ok": False, "time": time.perf_counter() - t, "error": str(e).strip().splitlines()[-3:]}
    dt = time.perf_counter() - t
    printed, roots, current = {}, {}, None
    entry = None
    for line in mod.to_string().splitlines():
        m = _PRINT_COMP_RE.match(line)
        if m and line.rstrip().endswith("{"):
            current = m.group(2)
            printed[current] = True
            if m.group(1):
                entry = current
            continue
        m = _PRINT_ROOT_RE.match(line)
        if m and current is not None:
            roots[current] = m.group(1)
    comps = []
    for c in mod.computations():
        insts = []
        for i in c.instructions():
            op = opcode_text(i.opcode)
            row = [i.name, op, [o.name for o in i.operands()]]
            if op == "async-start":
                try:
                    row.append(opcode_text(i.async_wrapped_root().opcode))
                except Exception:  # noqa: BLE001
                    pass
            insts.append(row)
        comps.append([c.name, c.name == entry, roots.get(c.name), insts, c.name in printed])
    return {"ok": True, "time": dt, "comps": comps}


def worker() -> None:
    """Reads a path per line on stdin; writes two JSON lines per module (ours, then XLA's)."""
    import warnings

    warnings.filterwarnings("ignore")
    out = sys.stdout
    for line in sys.stdin:
        path, _, skip_xla = line.rstrip("\n").partition("\t")
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        out.write(json.dumps({"ours": _ours(text)}) + "\n")
        out.flush()
        out.write(json.dumps({"xla": None if skip_xla else _xla(text)}) + "\n")
        out.flush()


# ----------------------------------------------------------------------------- comparison

# Opcodes XLA has of its own; any other ``X-start`` / ``X-update`` / ``X-done`` is sugar for
# async-start / async-update / async-done wrapping X.
NATIVE_ASYNC = frozenset({
    "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-permute-start", "collective-permute-done", "copy-start", "copy-done",
    "async-start", "async-update", "async-done", "send-done", "recv-done",
})
_ASYNC_SUFFIX_RE = re.compile(r"^(?P<op>.+)-(?P<part>start|update|done)$")
_SUFFIX_RE = re.compile(r"\.\d+$")


def _same_name(ours: str, theirs: str) -> bool:
    if ours == theirs:
        return True
    # XLA's name uniquer: 'p' -> 'p.1', 'add.3' -> 'add.4'
    return _SUFFIX_RE.sub("", theirs) == _SUFFIX_RE.sub("", ours)


def compare(ours: dict, xla: dict) -> list[str]:
    """Differences between two module summaries ([] = agree)."""
    diffs: list[str] = []
    mine = ours["comps"]
    ours_names = {c[0] for c in mine}
    # XLA adds a computation for each X-start sugar (async_wrapped...) and does not print it;
    # it also does not print the async computations the text wrote out (printing sugar instead).
    theirs = [c for c in xla["comps"] if c[4] or c[0] in ours_names]
    if len(mine) != len(theirs):
        return [f"computations: ours {[c[0] for c in mine]} vs XLA {[c[0] for c in theirs]}"]
    # XLA may list computations in another order (post-order); match by name where possible.
    by_name = {c[0]: c for c in theirs}
    if all(c[0] in by_name for c in mine):
        pairs = [(c, by_name[c[0]]) for c in mine]
    else:
        pairs = list(zip(mine, theirs))
    for (name, entry, root, insts), (tname, tentry, troot, tinsts, _) in pairs:
        if not _same_name(name, tname):
            diffs.append(f"computation name {name!r} vs {tname!r}")
            continue
        if entry != tentry and (entry or troot is not None):  # (no entry/roots for unprinted ones)
            diffs.append(f"{name}: entry ours={entry} XLA={tentry}")
        if len(insts) != len(tinsts):
            diffs.append(f"{name}: {len(insts)} instructions vs XLA {len(tinsts)}: "
                         f"{[i[0] for i in insts][:8]} vs {[i[0] for i in tinsts][:8]}")
            continue
        rename: dict[str, str] = {}
        for i, t in zip(insts, tinsts):
            if not _same_name(i[0], t[0]):
                diffs.append(f"{name}: instruction {i[0]!r} vs {t[0]!r}")
                break
            rename[i[0]] = t[0]
        else:
            if root is not None and troot is not None and rename.get(root) != troot:
                diffs.append(f"{name}: root {root!r} vs {troot!r}")
            for i, t in zip(insts, tinsts):
                op, top = i[1], t[1]
                if op != top:
                    m = _ASYNC_SUFFIX_RE.match(op)
                    sugar = m and op not in NATIVE_ASYNC and top == f"async-{m.group('part')}"
                    if not sugar:
                        diffs.append(f"{name}/{i[0]}: opcode {op!r} vs {top!r}")
                    elif m.group("part") == "start" and len(t) > 3 and t[3] != m.group("op"):
                        diffs.append(f"{name}/{i[0]}: wraps {m.group('op')!r} vs XLA {t[3]!r}")
                if [rename.get(o, o) for o in i[2]] != t[2]:
                    diffs.append(f"{name}/{i[0]}: operands {i[2]} vs {t[2]}")
    return diffs


# ----------------------------------------------------------------------------- parent side


class Worker:
    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0, cwd=ROOT)
        self.path: str | None = None
        self.started = 0.0
        self.got: dict = {}
        self.buf = b""

    def send(self, path: str, skip_xla: bool = False) -> None:
        self.path, self.started, self.got = path, time.monotonic(), {}
        self.proc.stdin.write((path + ("\tskip" if skip_xla else "") + "\n").encode())
        self.proc.stdin.flush()

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(5)
        except Exception:  # noqa: BLE001
            pass


def run_all(paths: list[str], jobs: int, timeout: float, cache: dict | None = None) -> dict[str, dict]:
    """``cache``: XLA's results from an earlier run (path -> result); XLA is not run again for those."""
    cache = cache or {}
    results: dict[str, dict] = {}
    todo = list(reversed(paths))
    workers = [Worker() for _ in range(min(jobs, len(paths)))]
    for w in workers:
        if todo:
            nxt = todo.pop()
            w.send(nxt, nxt in cache)
    done_count = 0
    while any(w.path for w in workers):
        busy = [w for w in workers if w.path]
        ready, _, _ = select.select([w.proc.stdout for w in busy], [], [], 1.0)
        now = time.monotonic()
        for i, w in enumerate(workers):
            if not w.path:
                continue
            finished = False
            if w.proc.stdout in ready:
                chunk = os.read(w.proc.stdout.fileno(), 1 << 20)
                w.buf += chunk
                while b"\n" in w.buf and not finished:
                    line, w.buf = w.buf.split(b"\n", 1)
                    w.got.update(json.loads(line))
                    finished, restart = "xla" in w.got, False
                    if finished and w.got["xla"] is None:
                        w.got["xla"] = cache[w.path]
                if not chunk and not finished:  # the worker died: XLA aborted (ours cannot take it down)
                    w.got.setdefault("ours", {"ok": False, "crash": "worker died"})
                    w.got["xla"] = {"ok": False, "crash": "XLA aborted the process"}
                    finished, restart = True, True
            elif now - w.started > timeout:
                w.got.setdefault("ours", {"ok": False, "crash": f"timeout after {timeout:.0f} s"})
                w.got["xla"] = w.got.get("xla") or {"ok": False, "crash": f"timeout after {timeout:.0f} s"}
                finished, restart = True, True
            if finished:
                results[w.path] = w.got
                done_count += 1
                if done_count % 200 == 0:
                    print(f"  ... {done_count}/{len(paths)}", file=sys.stderr)
                if restart:
                    w.kill()
                    w = workers[i] = Worker()
                w.path = None
                if todo:
                    nxt = todo.pop()
                    w.send(nxt, nxt in cache)
    for w in workers:
        w.kill()
    return results


def _group(message: str) -> str:
    """Our error message with the specifics (quoted text, numbers) taken out, to group by."""
    m = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)
    return re.sub(r"\d+", "N", m)[:120]


def report(results: dict[str, dict], show_list: bool) -> dict:
    n = len(results)
    xla_ok = [p for p, r in results.items() if r["xla"].get("ok")]
    ours_ok = [p for p, r in results.items() if r["ours"].get("ok")]
    agree, differ, rejects, over, crashes, legend = [], [], collections.defaultdict(list), [], [], []
    for p, r in sorted(results.items()):
        o, x = r["ours"], r["xla"]
        if "crash" in o:
            crashes.append((p, "ours: " + o["crash"]))
        if "crash" in x:
            crashes.append((p, "XLA: " + x["crash"]))
        if o.get("ok") and o.get("legend_error"):
            legend.append((p, o["legend_error"]))
        if x.get("ok") and o.get("ok"):
            d = compare(o, x)
            (differ.append((p, d)) if d else agree.append(p))
        elif x.get("ok"):
            rejects[_group(o.get("message") or o.get("crash", "?"))].append((p, o.get("error") or o.get("crash")))
        elif o.get("ok"):
            over.append((p, x.get("error") or x.get("crash")))
    name = os.path.basename
    print(f"modules                          {n}")
    print(f"XLA accepts                      {len(xla_ok)}")
    print(f"ours accepts                     {len(ours_ok)}")
    pct = 100 * len(agree) / max(len(xla_ok), 1)
    print(f"both accept and agree            {len(agree)}  ({pct:.1f}% of what XLA accepts)")
    print(f"both accept and differ           {len(differ)}")
    print(f"XLA accepts, ours rejects        {sum(len(v) for v in rejects.values())}")
    print(f"crashes                          {len(crashes)}")
    print(f"ours accepts, XLA rejects        {len(over)}")
    print(f"legend exceptions                {len(legend)}")
    both = [p for p in agree]
    t_ours = sum(results[p]["ours"]["time"] for p in both)
    t_xla = sum(results[p]["xla"]["time"] for p in both)
    if both:
        print(f"parse time over agreed modules   ours {t_ours:.2f} s, XLA {t_xla:.2f} s, "
              f"ratio {t_ours / max(t_xla, 1e-9):.2f}x")
        big = max(both, key=lambda p: os.path.getsize(p))
        bo, bx = results[big]["ours"]["time"], results[big]["xla"]["time"]
        print(f"largest agreed module            {name(big)} ({os.path.getsize(big) / 1e6:.2f} MB): "
              f"ours {bo * 1e3:.0f} ms, XLA {bx * 1e3:.0f} ms, ratio {bo / max(bx, 1e-9):.2f}x")
    if differ:
        print("\nboth accept and differ:")
        for p, d in differ:
            print(f"  {name(p)}: {'; '.join(d[:3])[:300]}")
    if crashes:
        print("\ncrashes:")
        for p, c in crashes:
            print(f"  {name(p)}: {c[:200]}")
    if rejects:
        print("\nXLA accepts, ours rejects (by our message):")
        for g, items in sorted(rejects.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(items):4d}  {g}")
            for p, e in items[: (len(items) if show_list else 2)]:
                print(f"          {name(p)}: {str(e)[:200]}")
    if over:
        print("\nours accepts, XLA rejects:")
        for p, e in over[: (len(over) if show_list else 40)]:
            print(f"  {name(p)}: {' / '.join(e)[:200] if isinstance(e, list) else str(e)[:200]}")
    if legend:
        print("\nlegend exceptions:")
        for p, e in legend:
            print(f"  {name(p)}: {e}")
    return {"modules": n, "xla_accepts": len(xla_ok), "ours_accepts": len(ours_ok), "agree": len(agree),
            "differ": len(differ), "rejects": sum(len(v) for v in rejects.values()), "crashes": len(crashes),
            "over": len(over), "legend": len(legend)}


def main() -> None:
    if "--worker" in sys.argv:
        worker()
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per module")
    ap.add_argument("--list", action="store_true", help="list every rejected module, not two per group")
    ap.add_argument("--only", default="", help="only files whose name contains this")
    ap.add_argument("--json", help="write the raw per-module results here")
    ap.add_argument("--xla-cache", help="JSON file of XLA's results: read if it exists (XLA is not run "
                    "again for those modules; its times are then from that run), else written")
    args = ap.parse_args()
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(args.dir) for f in fs
                   if f.endswith(".hlo") and args.only in f)
    t = time.perf_counter()
    cache = None
    if args.xla_cache and os.path.exists(args.xla_cache):
        with open(args.xla_cache) as f:
            cache = json.load(f)
    results = run_all(paths, args.jobs, args.timeout, cache)
    if args.xla_cache and cache is None:
        with open(args.xla_cache, "w") as f:
            json.dump({p: r["xla"] for p, r in results.items()}, f)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)
    report(results, args.list)
    print(f"\n({time.perf_counter() - t:.0f} s wall, {args.jobs} workers)")


if __name__ == "__main__":
    main()
