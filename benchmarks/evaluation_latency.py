"""Wall time of one ``run_tests`` (``Evaluator.evaluate(reference, "test")``) per shipped task, cold
against warm workers, on the backend given (the CPU interpreter by default).

For each task and mode, one ``Evaluator`` evaluates the task's expert reference once untimed (the
Triton cache is then warm and, in the warm mode, the spares exist), then ``--calls`` times timed,
each after ``--gap`` seconds idle (an agent's turn: the time a spare has to warm up). ``cold``
starts both workers fresh per evaluation by exec (``spares=False``, and the only mode of commits
before spares existed); ``forked`` forks them fresh from the pool's fork server; ``warm`` dispatches
to spares forked from it; ``warm-exec`` to spares started by exec (the warm mode of commits before
the fork server).

    python benchmarks/evaluation_latency.py [--tasks ...] [--modes cold forked warm warm-exec] [--calls 5] [--gap 20]

Prints one JSON line per evaluation (task, mode, seconds, load average) and a Markdown table of
medians with min and max; ``--json PATH`` also writes every sample.

    python benchmarks/evaluation_latency.py --env [--backend cuda] [--calls 5] [--gap 20]

What a user of the env waits for, per task: ``reset``, and the steps ``run_tests``, ``benchmark``
(every workload) and ``submit`` of the reference, each after ``--gap`` idle seconds, through the
env's own evaluation service (after one untimed ``run_tests``); then ``d2k eval TASK REFERENCE``
as a whole command (as a user types it: no ``--backend`` where the command picks that one itself),
with its default mode and with ``--mode submit``, ``--calls`` times.

    python benchmarks/evaluation_latency.py --one-shot [--calls 5]

What spares cost an evaluator that evaluates once and is closed (as most tests' are): the
evaluation's own time (which with ``spares=True`` includes starting the two spares) and its
``close()`` (which then takes them down), each mode in turn.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from d2k_env.evaluator import Evaluator, forkserver, resolve_backend  # noqa: E402
from d2k_env.task import load_task, task_ids  # noqa: E402


def measure(task_id: str, mode: str, backend: str, calls: int, gap: float) -> list[dict]:
    task = load_task(task_id)
    # Commits before spares existed take no such option: there every evaluation is cold.
    spares = {"spares": mode.startswith("warm")} if "spares" in inspect.signature(Evaluator).parameters else {}
    if mode.startswith("warm") and not spares:
        raise SystemExit("this commit has no warm workers: measure it with --modes cold")
    try:
        from d2k_env.evaluator.pool import WorkerPool
        fork = "fork" in inspect.signature(WorkerPool).parameters
    except ImportError:
        fork = False
    if fork:  # the pool says how workers start: exec (cold, warm-exec) or fork (forked, warm)
        spares = {"pool": WorkerPool(interpret=backend == "interpreter", spares=mode.startswith("warm"),
                                     fork=mode in ("forked", "warm"))}
    elif mode in ("forked", "warm-exec"):
        raise SystemExit(f"this commit has no fork server: --modes {mode} means nothing here")
    ev = Evaluator(task, backend, **spares)
    try:
        first = ev.evaluate(task.reference_path, "test")
        assert first.correct, first.error
        samples = []
        for _ in range(calls):
            time.sleep(gap)
            load = os.getloadavg()[0]
            started = time.perf_counter()
            result = ev.evaluate(task.reference_path, "test")
            seconds = time.perf_counter() - started
            assert result.correct, result.error
            samples.append({"task": task_id, "mode": mode, "seconds": round(seconds, 3), "load1": load})
            if "pool" in spares:  # a fork server that died is replaced, and its workers start by exec
                samples[-1]["fork_servers_alive"] = sum(s.alive() for s in forkserver._servers.values())
            print(json.dumps(samples[-1]), flush=True)
        return samples
    finally:
        ev.close()
        if "pool" in spares:
            spares["pool"].close()


def env_latency(task_id: str, backend: str, calls: int, gap: float) -> list[dict]:
    import gymnasium as gym

    import d2k_env
    task = load_task(task_id)
    write = {"tool": "write_file", "args": {"path": "solution.py", "content": task.reference_path.read_text()}}
    env = gym.make(d2k_env.env_id(task_id), backend=backend)
    samples = []

    def timed(what, call):
        started = time.perf_counter()
        out = call()
        samples.append({"task": task_id, "mode": what, "seconds": round(time.perf_counter() - started, 3),
                        "load1": os.getloadavg()[0]})
        print(json.dumps(samples[-1]), flush=True)
        return out

    try:
        env.reset(seed=0)
        env.step(write)
        assert env.step({"tool": "run_tests", "args": {}})[4]["evaluation"]["correct"]
        for i in range(calls):
            for tool in ("run_tests", "benchmark", "submit"):
                time.sleep(gap)
                info = timed(tool, lambda: env.step({"tool": tool, "args": {}}))[4]
                assert info["evaluation"]["correct"], info["verdict"]
            timed("reset", lambda: env.reset(seed=i + 1))
            env.step(write)
    finally:
        env.close()
    # As a user types it: the backend named only where it is not the one the command picks itself.
    picked = [] if backend == resolve_backend("auto") else ["--backend", backend]
    for _ in range(calls):
        for what, extra in (("d2k eval", []), ("d2k eval --mode submit", ["--mode", "submit"])):
            command = [sys.executable, "-m", "d2k_env.cli", "eval", task_id, str(task.reference_path),
                       *picked, *extra]
            done = timed(what, lambda: subprocess.run(command, capture_output=True, text=True, cwd=ROOT))
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return samples


def one_shot(task_id: str, calls: int) -> None:
    task = load_task(task_id)
    rows = {False: [], True: []}
    for _ in range(calls):
        for spares in (False, True):
            ev = Evaluator(task, "interpreter", spares=spares)
            started = time.perf_counter()
            assert ev.evaluate(task.reference_path, "test").correct
            evaluated = time.perf_counter()
            ev.close()
            rows[spares].append((evaluated - started, time.perf_counter() - evaluated))
            print(json.dumps({"spares": spares, "evaluate_s": round(rows[spares][-1][0], 3),
                              "close_s": round(rows[spares][-1][1], 3), "load1": os.getloadavg()[0]}), flush=True)
    print("\n| spares | evaluate, s, median (min-max) | close, s, median (min-max) |\n|---|---|---|")
    for spares, pairs in rows.items():
        ev_s, close_s = zip(*pairs)
        print(f"| {spares} | {statistics.median(ev_s):.2f} ({min(ev_s):.2f}-{max(ev_s):.2f}) | "
              f"{statistics.median(close_s):.3f} ({min(close_s):.3f}-{max(close_s):.3f}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=None, help="default: every shipped task")
    parser.add_argument("--modes", nargs="*", default=["cold", "warm"], choices=["cold", "forked", "warm", "warm-exec"])
    parser.add_argument("--backend", default="interpreter")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--gap", type=float, default=20.0, help="idle seconds before each timed evaluation")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--one-shot", action="store_true", help="the cost of spares to a one-shot evaluator")
    parser.add_argument("--env", action="store_true", help="reset, run_tests, benchmark, submit and d2k eval "
                                                           "as the env's user waits for them")
    args = parser.parse_args()
    tasks = args.tasks or task_ids()
    import torch
    import triton
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} commit {commit}, Python {platform.python_version()}, torch "
          f"{torch.__version__}, Triton {triton.__version__}, {platform.system()} {platform.release()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()}", flush=True)
    if args.one_shot:
        one_shot(tasks[0], args.calls)
        return
    if args.env:
        samples = [s for task in tasks for s in env_latency(task, args.backend, args.calls, args.gap)]
        modes = ["reset", "run_tests", "benchmark", "submit", "d2k eval", "d2k eval --mode submit"]
    else:
        samples = [s for task in tasks for mode in args.modes
                   for s in measure(task, mode, args.backend, args.calls, args.gap)]
        modes = args.modes
    print("\n| task | mode | seconds, median (min-max) | load (1 min), median |\n|---|---|---|---|")
    for task in tasks:
        for mode in modes:
            times = [s["seconds"] for s in samples if s["task"] == task and s["mode"] == mode]
            loads = [s["load1"] for s in samples if s["task"] == task and s["mode"] == mode]
            print(f"| {task} | {mode} | {statistics.median(times):.2f} ({min(times):.2f}-{max(times):.2f}, "
                  f"n={len(times)}) | {statistics.median(loads):.1f} |")
    if args.json:
        args.json.write_text(json.dumps(samples, indent=1))


if __name__ == "__main__":
    main()
