"""What one evaluation costs, end to end, at two commits side by side.

Each commit is checked out as a git worktree; in turn (A B A B ...), a fresh process with that
worktree on PYTHONPATH builds one ``Evaluator`` for the task on the interpreter, evaluates the
task's own reference once to warm the Triton cache, then evaluates it ``--calls`` more times and
prints each evaluation's wall time (the policy, the supervisor, the sandboxed solution worker,
the check worker: everything ``Evaluator.evaluate`` does). Pairing the rounds keeps the ratio
meaningful when the machine's speed drifts (the CPU here is shared).

    python benchmarks/evaluation_cost.py --base 8f16354 [--head HEAD] [--rounds 6] [--calls 3]

Prints, per commit, median/min/max seconds per evaluation and the paired ratio head/base.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs inside the worktree's own d2k_env: only the API both sides share (load_task, Evaluator,
# evaluate) is used.
PROBE = """
import json, sys, time
from d2k_env.task import load_task
from d2k_env.evaluator import Evaluator
task = load_task(sys.argv[1])
ev = Evaluator(task, "interpreter")
reference = task.reference_path
first = ev.evaluate(reference, mode=sys.argv[3])
assert first.correct, first.error
times = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    r = ev.evaluate(reference, mode=sys.argv[3])
    times.append(time.perf_counter() - t0)
    assert r.correct, r.error
ev.close()
print(json.dumps({"times": times, "sandbox": getattr(r, "sandbox", None)}))
"""


def worktree(commit: str, into: Path) -> Path:
    path = into / commit
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), commit],
                   check=True)
    return path


def probe(tree: Path, task: str, calls: int, mode: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", PROBE, task, str(calls), mode], cwd=tree, env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f}, n={len(xs)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the commit to compare against")
    ap.add_argument("--head", default="HEAD")
    ap.add_argument("--task", default="fused_add_rmsnorm")
    ap.add_argument("--mode", default="test", help="test: the smoke workloads only (held-out shapes "
                                                    "changed between commits, so submit compares more)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="d2k-cost-") as tmp:
        trees = {name: worktree(c, Path(tmp)) for name, c in (("base", args.base), ("head", args.head))}
        try:
            times: dict[str, list[float]] = {"base": [], "head": []}
            ratios = []
            layers = None
            for _ in range(args.rounds):
                got = {name: probe(tree, args.task, args.calls, args.mode) for name, tree in trees.items()}
                for name in times:
                    times[name] += got[name]["times"]
                ratios.append(statistics.median(got["head"]["times"]) / statistics.median(got["base"]["times"]))
                layers = got["head"]["sandbox"]
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    print(f"task {args.task}, mode {args.mode}, interpreter, {args.rounds} paired rounds of {args.calls} evaluations")
    print(f"base {args.base}: {summary(times['base'])}")
    print(f"head {args.head}: {summary(times['head'])}")
    print(f"head/base per round: {summary(ratios).replace(' s', '')}")
    print(f"head's sandbox layers: {json.dumps(layers)}")


if __name__ == "__main__":
    main()
