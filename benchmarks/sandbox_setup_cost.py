"""The sandbox's own set-up, timed: what each evaluation worker pays before it execs.

In forked children of a ``python -I -S`` that loaded confine.py by path (as the supervisor forks
the worker), ``Confinement.apply()`` (rlimits, the Landlock domain, dropped root or capabilities)
and then ``seccomp(processes=False)`` (the interpreter's filter, which the worker installs once
started), each timed with ``time.perf_counter`` inside the child; the Confinement is the one
``confinement_for`` builds for a real interpreter evaluation. Also, in the parent: building that Confinement, and making and
removing the evaluation's memory cgroup (the supervisor's part), where the machine offers one;
and the supervisor's start-up (a ``python -I -S`` with the supervisor's imports before the
sandbox against one with its imports now, confine.py loaded by path, in turn).

    python benchmarks/sandbox_setup_cost.py [--runs 50] [--site-entries 3000] [--no-namespaces]

``--site-entries N`` adds a read root laid out as a wheel install: a site-packages of N entries
holding the package with its references, which no worker may read. ``--no-namespaces`` builds the
confinement without a view (``D2K_SANDBOX_NAMESPACES=0``): Landlock steps around the hidden paths.
Prints median, min and max in milliseconds for each part.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from d2k_env.evaluator import confine, sandbox  # noqa: E402
from d2k_env.evaluator.sandbox import confinement_for  # noqa: E402
from d2k_env.task import load_task  # noqa: E402


# Run in a fresh ``python -I -S`` that loads confine.py by path, as the supervisor does: forks come
# from a small process, as the supervisor's do (a fork of this one, which has torch imported,
# would charge the child's copy-on-write faults of a large address space to the layers).
MEASURE = r"""
import importlib.util, json, os, sys, time
spec = importlib.util.spec_from_file_location("d2k_confine", sys.argv[1])
confine = importlib.util.module_from_spec(spec)
spec.loader.exec_module(confine)
conf = confine.Confinement.from_json(open(sys.argv[2]).read())
rows = []
for _ in range(int(sys.argv[3])):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            t0 = time.perf_counter()
            layers = conf.apply()
            t1 = time.perf_counter()
            filtered = confine.seccomp(processes=False)
            t2 = time.perf_counter()
            os.write(w, json.dumps({"apply_ms": (t1 - t0) * 1e3, "seccomp_ms": (t2 - t1) * 1e3,
                                    "layers": {**layers, "seccomp": filtered}}).encode())
        except BaseException as exc:
            os.write(w, json.dumps({"error": repr(exc)}).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        rows.append(json.loads(f.read()))
    os.waitpid(pid, 0)
print(json.dumps(rows))
"""


def in_children(conf: confine.Confinement, runs: int) -> list[dict]:
    """Fork ``runs`` children of a supervisor-like process; each applies every layer and reports
    how long each took."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as spec:
        spec.write(conf.to_json())
        spec.flush()
        out = subprocess.run([sys.executable, "-I", "-S", "-c", MEASURE, str(Path(confine.__file__).resolve()),
                              spec.name, str(runs)], check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)
    for row in rows:
        if "error" in row:
            raise RuntimeError(row["error"])
    return rows


def cgroup_ms(conf: confine.Confinement) -> float | None:
    params = inspect.signature(confine.MemoryCgroup.create).parameters
    args = [f"d2k-eval-setup-{os.getpid()}", conf.cgroup_bytes]
    if len(params) > 2:  # a later signature also takes the worker's process limit
        args.append(conf.max_processes)
    t0 = time.perf_counter()
    group = confine.MemoryCgroup.create(*args)
    if group is None:
        return None
    group.remove()
    return (time.perf_counter() - t0) * 1e3


# The supervisor's imports before the sandbox (reaper.py at 8f16354) and with it (it also imports
# importlib.util and threading, and loads confine.py by path).
SUPERVISOR_BEFORE = "import ctypes, json, os, signal, sys, time"
SUPERVISOR_AFTER = ("import ctypes, importlib.util, json, os, signal, sys, threading, time; "
                    "s = importlib.util.spec_from_file_location('d2k_confine', %r); "
                    "m = importlib.util.module_from_spec(s); s.loader.exec_module(m)")


def supervisor_load_ms(runs: int) -> tuple[list[float], list[float]]:
    """The supervisor's own share: a ``python -I -S`` with the supervisor's imports before the
    sandbox, and one with its imports now (confine.py loaded by path), started in turn; wall ms."""
    after = SUPERVISOR_AFTER % str(Path(confine.__file__).resolve())
    bare, loaded = [], []
    for _ in range(runs):
        for argv, out in ((["-c", SUPERVISOR_BEFORE], bare), (["-c", after], loaded)):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-I", "-S", *argv], check=True)
            out.append((time.perf_counter() - t0) * 1e3)
    return bare, loaded


def stats(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.2f} ms, min {min(xs):.2f}, max {max(xs):.2f} (n={len(xs)})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--site-entries", type=int, default=0)
    ap.add_argument("--no-namespaces", action="store_true")
    args = ap.parse_args()
    task = load_task("fused_add_rmsnorm")
    with tempfile.TemporaryDirectory(prefix="d2k-eval-") as private:
        scratch, outputs, cache, view = (Path(private) / n for n in ("scratch", "outputs", "triton", "view"))
        scratch.mkdir()
        outputs.mkdir()
        view.mkdir()
        if args.site_entries:
            site = Path(private) / "site-packages"
            for i in range(args.site_entries):
                (site / f"dist_{i:05d}").mkdir(parents=True)
            (site / "d2k_env" / "builtin" / "references").mkdir(parents=True)
            roots, hidden = sandbox._python_roots, sandbox._hidden_from_workers
            sandbox._python_roots = lambda: [*roots(), str(site)]
            sandbox._hidden_from_workers = lambda: [*hidden(), str(site / "d2k_env" / "builtin" / "references")]
        build, group = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            conf = confinement_for(str(scratch), cache, str(task.root), str(outputs), "solution", interpret=True,
                                   view=None if args.no_namespaces else str(view))
            build.append((time.perf_counter() - t0) * 1e3)
            ms = cgroup_ms(conf)
            if ms is not None:
                group.append(ms)
        rows = in_children(conf, args.runs)
        apply, sec, layers = [r["apply_ms"] for r in rows], [r["seccomp_ms"] for r in rows], rows[-1]["layers"]
    print("layers:", json.dumps(layers))
    print("Confinement.apply() in a forked child:", stats(apply))
    print("seccomp(processes=False) in the same child:", stats(sec))
    both = [a + s for a, s in zip(apply, sec)]
    print("apply + seccomp:", stats(both))
    print("confinement_for() in the parent:", stats(build))
    print("memory cgroup create + remove:", stats(group) if group else confine.MemoryCgroup.absent)
    bare, loaded = supervisor_load_ms(max(args.runs // 4, 5))
    print("supervisor start-up, imports before the sandbox:", stats(bare))
    print("supervisor start-up, imports now (confine.py loaded by path):", stats(loaded))
    diffs = [a - b for a, b in zip(loaded, bare)]
    print("paired difference (now - before):", stats(diffs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
