"""Where an evaluation's wall time goes: each worker's phases, the env-side work around them, and
the start of a one-shot evaluator such as ``d2k eval``'s.

Per task, on the backend given (``--backend cuda`` on a GPU):

- ``one-shot``: what ``d2k eval`` does in-process (a fresh evaluator with spares, its workers started
  at once, one ``benchmark`` of every workload), with workers forked from the fork server and then
  started by exec; each first with an empty Triton cache, then with the cache the first left.
- ``command``: ``d2k eval`` itself, in a child process (twice: the first may find the Triton cache
  empty), with the steps of the command around the spans: its imports, the workers' start, the
  task's load, the evaluator's, the evaluation, the teardown and the process's exit, in seconds
  since the child was started.
- ``episode``: an evaluator with spares, as the env holds one: an untimed ``test``, then ``test``,
  ``benchmark``, ``submit`` and a second ``submit``, each after ``--gap`` idle seconds.

Every evaluation prints one JSON line: its wall seconds and a list of spans, each the env-side step
(``take`` of a worker, ``fill`` of its directories, ``run``, ``harvest`` of its cache, ``wait_warm``)
with its start and length in seconds since the evaluation began; a ``run`` span carries the worker's
kind and its phases as the channel announced them (phase, workload, second since the dispatch).

    python benchmarks/evaluation_phases.py --backend cuda [--tasks ...] [--gap 10] [--parts one-shot command episode]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import d2k_env.evaluator as evaluator_module  # noqa: E402
from d2k_env.evaluator import Evaluator  # noqa: E402
from d2k_env.evaluator.pool import WorkerPool  # noqa: E402
from d2k_env.evaluator.sandbox import Worker  # noqa: E402
from d2k_env.task import load_task, task_ids  # noqa: E402


class Spans:
    """The spans of the evaluation under way, relative to its start."""

    def __init__(self):
        self.origin, self.items = time.perf_counter(), []

    def restart(self) -> None:
        self.origin, self.items = time.perf_counter(), []

    def wrap(self, owner, name: str, label: str, describe=None) -> None:
        """Replace ``owner.name`` by a version that records one span per call."""
        original = getattr(owner, name)
        spans = self

        def timed(*args, **kwargs):
            started = time.perf_counter()
            out = original(*args, **kwargs)
            span = {"step": label, "at": round(started - spans.origin, 3),
                    "s": round(time.perf_counter() - started, 3)}
            if describe is not None:
                span.update(describe(args, out))
            spans.items.append(span)
            return out

        setattr(owner, name, timed)


def _run_details(args, outcome) -> dict:
    worker, req = args[0], args[1]
    kind = "memcheck" if worker.memcheck else req.role
    return {"kind": kind, "phases": outcome.timeline, "began": outcome.began}


def instrument(spans: Spans) -> None:
    spans.wrap(WorkerPool, "take", "take", lambda args, out: {"kind": args[1], "spare": out[1]})
    spans.wrap(WorkerPool, "wait_warm", "wait_warm")
    spans.wrap(evaluator_module, "snapshot_task", "fill")
    spans.wrap(evaluator_module, "seed_cache", "fill")
    spans.wrap(evaluator_module, "harvest_cache", "harvest")
    spans.wrap(Worker, "run", "run", _run_details)


@contextmanager
def evaluator(task, backend: str, fork: bool, cache_dir: Path):
    pool = WorkerPool(interpret=backend == "interpreter", spares=True, fork=fork)
    ev = Evaluator(task, backend, cache_dir=cache_dir, pool=pool)
    try:
        yield ev
    finally:
        ev.close()
        pool.close()


def report(spans: Spans, **fields) -> dict:
    line = {**fields, "seconds": round(time.perf_counter() - spans.origin, 3),
            "load1": round(os.getloadavg()[0], 2), "spans": spans.items}
    print(json.dumps(line), flush=True)
    return line


def one_shot(task, backend: str, spans: Spans) -> list[dict]:
    lines = []
    for fork in (True, False):
        with tempfile.TemporaryDirectory(prefix="d2k-phases-cache-") as cache:
            for cache_state in ("empty", "warm"):
                spans.restart()
                with evaluator(task, backend, fork, Path(cache)) as ev:
                    ev.pool.replenish()
                    spans.items.append({"step": "replenish", "at": 0.0,
                                        "s": round(time.perf_counter() - spans.origin, 3)})
                    result = ev.evaluate(task.reference_path, "benchmark" if ev.can_time else "test")
                    assert result.correct, result.error
                    lines.append(report(spans, task=task.id, part="one-shot", fork=fork, cache=cache_state))
    return lines


def command(task, backend: str, mode: str | None) -> list[dict]:
    lines = []
    for run in (1, 2):
        started = time.time()
        child = subprocess.run([sys.executable, __file__, "--command-child", repr(started), task.id,
                                str(task.reference_path), backend, *([mode] if mode else [])],
                               capture_output=True, text=True)
        wall = time.time() - started
        line = json.loads(child.stdout.strip().splitlines()[-1]) if child.returncode in (0, 1) else \
            {"error": child.stderr[-2000:]}
        line.update(task=task.id, part="command", mode=mode or "default", run=run, seconds=round(wall, 3), load1=round(os.getloadavg()[0], 2))
        print(json.dumps(line), flush=True)
        lines.append(line)
    return lines


def command_child(started: float, task_id: str, reference: str, backend: str, mode: str | None = None) -> None:
    """``d2k eval TASK_ID REFERENCE --backend BACKEND [--mode MODE]`` in this process, its steps timed from ``started``
    (the parent's clock when it started this process); prints one JSON line of spans at exit."""
    import atexit
    import d2k_env.task

    spans = Spans()
    spans.origin = time.perf_counter() - (time.time() - started)
    spans.items.append({"step": "imports", "at": 0.0, "s": round(time.perf_counter() - spans.origin, 3)})
    instrument(spans)
    spans.wrap(WorkerPool, "replenish", "replenish")
    spans.wrap(WorkerPool, "close", "pool.close")
    spans.wrap(d2k_env.task, "load_task", "load_task")
    spans.wrap(Evaluator, "__init__", "Evaluator()")
    spans.wrap(Evaluator, "evaluate", "evaluate")
    spans.wrap(Evaluator, "close", "Evaluator.close")
    atexit.register(lambda: print(json.dumps({"exit_at": round(time.perf_counter() - spans.origin, 3),
                                              "spans": spans.items}), flush=True))
    from d2k_env import cli

    cli.main(["eval", task_id, reference, "--backend", backend, *(["--mode", mode] if mode else [])])


def episode(task, backend: str, gap: float, spans: Spans) -> list[dict]:
    lines = []
    with tempfile.TemporaryDirectory(prefix="d2k-phases-cache-") as cache, \
            evaluator(task, backend, True, Path(cache)) as ev:
        ev.pool.replenish()
        timed_modes = ("benchmark", "submit", "submit") if ev.can_time else ("submit",)
        for mode in ("test", "test", *timed_modes):
            time.sleep(gap if lines or mode != "test" else 0)
            spans.restart()
            result = ev.evaluate(task.reference_path, mode)
            assert result.correct, result.error
            lines.append(report(spans, task=task.id, part="episode", mode=mode, first=not lines,
                                memcheck=result.sandbox.get("memcheck", "")[:80]))
    return lines


def main() -> None:
    if sys.argv[1:2] == ["--command-child"]:
        command_child(float(sys.argv[2]), *sys.argv[3:7])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=None, help="default: every shipped task")
    parser.add_argument("--backend", default="interpreter")
    parser.add_argument("--gap", type=float, default=10.0, help="idle seconds before each episode evaluation")
    parser.add_argument("--parts", nargs="*", default=["one-shot", "episode"],
                        choices=["one-shot", "command", "episode"])
    parser.add_argument("--mode", default=None, choices=["test", "benchmark", "submit"],
                        help="the command part's d2k eval --mode (default: the command's own default)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    import torch
    import triton
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} Python {platform.python_version()}, torch {torch.__version__}, "
          f"Triton {triton.__version__}, {platform.system()} {platform.release()}, {os.cpu_count()} CPUs", flush=True)
    spans = Spans()
    instrument(spans)
    lines = []
    for task_id in args.tasks or task_ids():
        task = load_task(task_id)
        if "one-shot" in args.parts:
            lines += one_shot(task, args.backend, spans)
        if "command" in args.parts:
            lines += command(task, args.backend, args.mode)
        if "episode" in args.parts:
            lines += episode(task, args.backend, args.gap, spans)
    if args.json:
        args.json.write_text(json.dumps(lines, indent=1))


if __name__ == "__main__":
    main()
