"""Big programs in the report and the notebook: ``xla-explorer report`` and ``xe.show`` of an
N-layer transformer stack, each in a fresh process, side by side with a bare compile of the same
model file in a fresh process, and the sizes of what they write.

Two stacks (``sample_models/_stack.py``), each layer with its own weights, written as a Python
loop: ``plain`` (the gallery's transformer block N times: the layers share no kernel) and
``shared`` (a decoder whose causal mask and rotary table are computed once before the loop and
read by every layer: XLA's common-subexpression pass merges what the layers compute alike, so
kernels hold ops of several layers, as in a real transformer).

For each stack and N, alternated and their order flipped per trial:

- **bare**: ``python`` running the model file and ``jax.jit(model).lower(*inputs).compile()``,
  nothing of XLA Explorer imported;
- **report**: ``xla-explorer report FILE --html OUT`` as a user runs it (the file compiled in the
  sandboxed worker, as by default);
- **show**: ``xe.show(model, *example_inputs())`` and its notebook output (``_repr_html_``:
  the page in an ``<iframe srcdoc>``), in a fresh Python process, as a notebook cell runs it.

    .venv/bin/python benchmarks/big_programs.py [--ns 1,12,96,192] [--stacks plain,shared]
                                                [--trials 2] [--kinds report,show]

Writes ``benchmarks/out/big_programs.json``. Goals (#52): the report of the 96-layer stack whose
layers share kernels <= 1.5x its bare compile and <= 20 MiB; a 96-layer program's ``xe.show``
<= 1.5x. The app's first graph at 96 and 192 layers with shared kernels is
``benchmarks/scaling.py --stack shared``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
OUT = os.path.join(ROOT, "benchmarks", "out")

from sample_models._stack import shared_stack_source, stack_source  # noqa: E402  (ROOT on the path first)

SOURCES = {"plain": stack_source, "shared": shared_stack_source}
MiB = 2 ** 20

# each writes the moment it is done (``time.monotonic``: the system's clock, the parent's too)
# before the interpreter tears down: a notebook's cell ends there, its kernel lives on
DONE = "\nimport time; open({mark!r}, 'w').write(repr(time.monotonic()))"
BARE = ("import runpy, jax\nns = runpy.run_path({path!r}, run_name='__main__')\n"
        "jax.jit(ns['model']).lower(*ns['example_inputs']()).compile()" + DONE)
SHOW = ("import runpy, sys\nsys.path.insert(0, {root!r})\nimport xla_explorer as xe\n"
        "ns = runpy.run_path({path!r}, run_name='__main__')\n"
        "out = xe.show(ns['model'], *ns['example_inputs'](), backend='cpu')._repr_html_()\n"
        "open({out!r}, 'w', encoding='utf-8').write(out)" + DONE)


def _timed(cmd: list[str], cwd: str, mark: str | None = None) -> tuple[float, float, float | None]:
    """(wall seconds, CPU seconds, seconds until done): ``mark``, where the command writes the
    moment it was done (``DONE``), gives the last (None without one). The CPU time of the process and every process it waited
    for (the report's sandboxed worker, Graphviz), user and system. On a loaded 2-core machine
    the wall clock mostly says how much of the machine the others left; the CPU seconds say
    what the run asked of it (a thread beside XLA adds to them whether or not a core was idle).
    Not the report's sandboxed worker: it is reaped inside its own PID namespace, so its CPU
    time never reaches this process (the report's row leaves its CPU ratio out)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, cwd=cwd, capture_output=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = None
    if mark is not None:
        with open(mark) as f:
            done = float(f.read()) - t0
        os.remove(mark)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), done


def run(stacks: list[str], ns: list[int], trials: int, kinds: list[str]) -> dict:
    out: dict = {}
    cli = os.path.join(os.path.dirname(sys.executable), "xla-explorer")
    with tempfile.TemporaryDirectory() as d:
        for stack in stacks:
            for n in ns:
                path = os.path.join(d, f"{stack}{n}.py")
                with open(path, "w") as f:
                    f.write(SOURCES[stack](n))
                report_html, show_html = os.path.join(d, "r.html"), os.path.join(d, "show.html")
                mark = os.path.join(d, "done")
                cmds = {"bare": [sys.executable, "-c", BARE.format(path=path, mark=mark)],
                        "report": [cli, "report", path, "--html", report_html],
                        "show": [sys.executable, "-c", SHOW.format(root=ROOT, path=path, out=show_html, mark=mark)]}
                marks = {"bare": mark, "show": mark}
                order = ["bare"] + kinds
                times: dict[str, list[float]] = {k: [] for k in order}
                cpu: dict[str, list[float]] = {k: [] for k in order}
                done: dict[str, list[float]] = {k: [] for k in marks}
                loads = [os.getloadavg()[0]]
                for t in range(trials):
                    for which in (order if t % 2 == 0 else order[::-1]):
                        wall, used, until = _timed(cmds[which], ROOT, marks.get(which))
                        times[which].append(wall)
                        cpu[which].append(used)
                        if until is not None:
                            done[which].append(until)
                        loads.append(os.getloadavg()[0])
                    print(f"  {stack} N={n:<4} trial {t + 1}: "
                          + ", ".join(f"{k} {v[-1]:.2f} s (CPU {cpu[k][-1]:.2f} s)" for k, v in times.items()),
                          flush=True)
                bare, bare_cpu = statistics.median(times["bare"]), statistics.median(cpu["bare"])
                row = {"fresh_bare_compile_s": round(bare, 2), "bare_s": [round(x, 2) for x in times["bare"]],
                       "bare_cpu_s": round(bare_cpu, 2), "load_average": [round(min(loads), 1), round(max(loads), 1)]}
                for k in kinds:
                    m, c = statistics.median(times[k]), statistics.median(cpu[k])
                    row[k] = {"s": round(m, 2), "ratio": round(m / bare, 2), "all_s": [round(x, 2) for x in times[k]],
                              "ratios": [round(x / y, 2) for x, y in zip(times[k], times["bare"])]}
                    if k != "report":  # (its worker's CPU is not counted: ``_timed``)
                        row[k].update(cpu_s=round(c, 2), cpu_ratio=round(c / bare_cpu, 2))
                    if k in done:  # until its output was written, against the bare compile until compiled
                        row[k].update(done_s=round(statistics.median(done[k]), 2),
                                      done_ratios=[round(x / y, 2) for x, y in zip(done[k], done["bare"])])
                row["bare_done_s"] = round(statistics.median(done["bare"]), 2)
                if "report" in kinds:
                    row["report"]["mib"] = round(os.path.getsize(report_html) / MiB, 2)
                if "show" in kinds:
                    row["show"]["mib"] = round(os.path.getsize(show_html) / MiB, 2)
                out.setdefault(stack, {})[n] = row
                print(f"  {stack} N={n}: {json.dumps(row)}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="1,12,96,192")
    ap.add_argument("--stacks", default="plain,shared")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--kinds", default="report,show")
    a = ap.parse_args()
    ns = [int(x) for x in a.ns.split(",") if x.strip()]
    res = {"machine": f"{os.cpu_count()} cores", "when": time.strftime("%Y-%m-%d %H:%M"),
           "stacks": run(a.stacks.split(","), ns, a.trials, a.kinds.split(","))}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "big_programs.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("\n| stack | N | load | fresh bare compile (CPU) | report | ratio (per trial) | CPU ratio | MiB "
          "| xe.show | ratio (per trial) | CPU ratio | MiB | until written (per trial) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for stack, rows in res["stacks"].items():
        for n, r in rows.items():
            cells = []
            for k in ("report", "show"):
                x = r.get(k) or {}
                cells.append(f"{x.get('s', '–')} s | {x.get('ratio', '–')}x ({', '.join(map(str, x.get('ratios', [])))})"
                             f" | {x.get('cpu_ratio', '–')}x | {x.get('mib', '–')}")
            sh = r.get("show") or {}
            until = (f"{sh['done_s']} s against {r['bare_done_s']} s ({', '.join(map(str, sh['done_ratios']))})"
                     if "done_s" in sh else "–")
            print(f"| {stack} | {n} | {r['load_average'][0]}-{r['load_average'][1]} | {r['fresh_bare_compile_s']:.2f} s"
                  f" ({r['bare_cpu_s']:.2f} s) | " + " | ".join(cells) + f" | {until} |")


if __name__ == "__main__":
    main()
