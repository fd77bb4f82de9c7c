"""How much honest code the reward pays: every file of the honest corpus, submitted as an agent would.

The corpus (tests/security/honest_corpus/<task>/*.py: one idiom each; tests/security/honest_refused/
<task>__<capability>__*.py: honest kernels that use a capability the sandbox contains) is evaluated
file by file:

1. the static policy alone (``check_solution``): accepted, or the rules that refuse it;
2. a full ``submit`` on the chosen backend with the policy bypassed: whether the kernel is correct
   (smoke and held-out shapes, the runtime guards, the checker process), and why not. For a file
   the policy accepts this *is* its submission (the evaluator runs the same path once the policy
   finds nothing), so its reward today is computed from it; a refused file earns 0.

Writes ``honest-corpus-<date>.md`` (and ``.json``) under ``--out``:

    python benchmarks/honest_corpus.py [--backend interpreter] [--mode submit] [--seed N] [--jobs 2]
    python benchmarks/honest_corpus.py --manifest   # also print today's outcomes as header lines
    python benchmarks/honest_corpus.py --reuse R.json --policy-at HEAD   # re-score a run under another policy
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import platform
import subprocess
import sys
import time
import types
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
import triton

import d2k_env.evaluator as evaluator_module
from d2k_env.evaluator import Evaluator
from d2k_env.evaluator.policy import check_solution
from d2k_env.reward import submission_reward
from d2k_env.task import load_task, task_ids

ROOT = Path(__file__).resolve().parents[1]
SECURITY = ROOT / "tests" / "security"
HONEST = SECURITY / "honest_corpus"
REFUSED = SECURITY / "honest_refused"


def corpus() -> list[tuple[Path, str, str]]:
    """(path, task id, set) for every corpus file: set "honest" or "refused"."""
    files = [(p, p.parent.name, "honest") for task in task_ids() for p in sorted((HONEST / task).glob("*.py"))]
    files += [(p, p.name.split("__")[0], "refused") for p in sorted(REFUSED.glob("*.py"))]
    return files


def name_of(path: Path) -> str:
    return str(path.relative_to(SECURITY))


def idiom_of(path: Path) -> str:
    """The description's one line, after the header (what the file exercises)."""
    doc = path.read_text().split('"""')[1]
    first = doc.partition("\n\n")[2].strip().rstrip(".")
    return first.split(":", 1)[1].strip() if ":" in first else first


def first_line(text: str | None, limit: int = 160) -> str:
    text = (text or "").strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ", "^", "~")):
            return line[:limit]
    return text[:limit]


def seed_for(name: str) -> int:
    """Each file's submission seed (its inputs and held-out shapes), its header's ``Seed:``: fixed per file,
    different across files (the crc32 of the file's name before the corpus moved under tests/security/).
    tests/test_security.py submits with the same seeds."""
    for line in (SECURITY / name).read_text().split('"""')[1].partition("\n\n")[0].splitlines():
        if line.startswith("Seed: "):
            return int(line.removeprefix("Seed: "))
    return zlib.crc32(name.encode())


def failure_of(result) -> str:
    """Why a submission is not correct, in one line."""
    if result.error:
        lines = [ln.strip() for ln in result.error.splitlines() if ln.strip()]
        # A load or forward crash ends with the exception itself; keep that line.
        return (lines[0] if "[" in lines[0] and "]" in lines[0] else lines[-1])[:200] if lines else "error"
    for w in result.workloads:
        if not w.correct:
            return f"{w.name}: {first_line(w.message.splitlines()[-1] if 'Error' in w.message else w.message)}"
    return ""


def policy_at(rev: str | None):
    """check_solution as of git revision ``rev`` (None: the working tree's). The policy is static and
    self-contained, so a corpus can be scored against the committed policy while another is being edited."""
    if rev is None:
        return check_solution
    source = git("show", f"{rev}:d2k_env/evaluator/policy.py")
    if not source:
        raise SystemExit(f"no d2k_env/evaluator/policy.py at {rev}")
    module = types.ModuleType(f"d2k_policy_at_{rev}")
    sys.modules[module.__name__] = module  # its @dataclass needs the module registered
    exec(compile(source, f"policy.py@{rev}", "exec"), module.__dict__)
    return module.check_solution


def measure(backend: str, mode: str, seed: int | None, jobs: int, only: list[str] | None,
            policy=check_solution, reuse: dict | None = None) -> list[dict]:
    """One row per corpus file. ``reuse``: rows of an earlier run (file -> row) whose evaluation is kept,
    so that only the policy's verdicts are recomputed."""
    files = [f for f in corpus() if not only or any(o in name_of(f[0]) for o in only)]
    tasks = {t: load_task(t) for t in {task for _, task, _ in files}}
    rows = []
    for path, task, kind in files:
        violations = policy(path.read_text(), tasks[task].allowed_torch)
        rows.append({"file": name_of(path), "task": task, "set": kind, "idiom": idiom_of(path),
                     "accepted": not violations, "rules": sorted({v.rule for v in violations}),
                     "violations": [str(v) for v in violations]})
    if reuse is not None:
        for row in rows:
            old = reuse[row["file"]]
            row.update({k: old[k] for k in ("seed", "seconds", "correct", "failure", "reward_if_accepted")})
            row["reward"] = row["reward_if_accepted"] if row["accepted"] else 0.0
        return rows
    evaluators = {t: Evaluator(spec, backend=backend) for t, spec in tasks.items()}
    # The evaluator reads check_solution from its module at each call: bypass the policy there.
    stock = evaluator_module.check_solution
    evaluator_module.check_solution = lambda *args, **kwargs: []
    try:
        def run(row):
            t0 = time.monotonic()
            row["seed"] = seed_for(row["file"]) if seed is None else seed
            result = evaluators[row["task"]].evaluate(SECURITY / row["file"], mode, seed=row["seed"])
            row["seconds"] = round(time.monotonic() - t0, 1)
            row["correct"] = bool(result.correct)
            row["failure"] = "" if result.correct else failure_of(result)
            row["reward_if_accepted"] = submission_reward("speedup", result)
            row["reward"] = row["reward_if_accepted"] if row["accepted"] else 0.0
            print(f"{row['file']:75s} policy={'ok' if row['accepted'] else ','.join(row['rules']):40s} "
                  f"correct={row['correct']} reward={row['reward']:.3g} ({row['seconds']} s)", flush=True)
            return row

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            rows = list(pool.map(run, rows))
    finally:
        evaluator_module.check_solution = stock
        for ev in evaluators.values():
            ev.close()
    return rows


def outcome(row: dict) -> str:
    """Today's outcome in the words of the file's header (tests/exploits.py): what it would say."""
    if not row["accepted"]:
        return "Policy: exactly " + " ".join(f"[{r}]" for r in row["rules"])
    if row["reward"] > 0:
        return "Expect: paid"
    return f"fails on interpreter ({row['failure']}): no header says so yet"


def git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def tree_state() -> str:
    """The commit, and the paths of the code measured that differ from it ("5e0fb43 with uncommitted ...")."""
    head = git("rev-parse", "--short", "HEAD").strip() or "?"
    dirty = sorted({line[3:] for line in git("status", "--porcelain", "--", "tests/security/honest_corpus", "tests/security/honest_refused",
                                              "d2k_env", "tasks", "benchmarks/honest_corpus.py").splitlines() if line[3:]})
    return head + (" with uncommitted changes to " + ", ".join(f"`{d}`" for d in dirty) if dirty else "")


def report(rows: list[dict], backend: str, mode: str, seed: int | None, elapsed_s: float | None, tree: str,
           note: str = "") -> str:
    honest = [r for r in rows if r["set"] == "honest"]
    refused_set = [r for r in rows if r["set"] == "refused"]
    n = len(honest)
    accepted = sum(r["accepted"] for r in honest)
    paid = sum(r["reward"] > 0 for r in honest)
    correct = sum(r["correct"] for r in honest)
    by_rule = collections.Counter(rule for r in honest for rule in r["rules"])
    only_rule = collections.Counter(r["rules"][0] for r in honest if len(r["rules"]) == 1)
    checked = ("a full submit (the task's smoke workloads and its held-out shapes, the runtime guards, the "
               "checker process)" if mode == "submit" else
               f"a `{mode}` evaluation (the {'GPU' if backend == 'cuda' else 'smoke'} workloads, the runtime "
               "guards, the checker process; no held-out shapes)")
    lines = [
        "# Honest corpus: what the reward pays today",
        "",
        f"{datetime.date.today().isoformat()}, backend `{backend}`, mode `{mode}`, "
        f"{'seeds fixed per file (crc32 of the name)' if seed is None else f'seed {seed}'}, commit {tree}; "
        f"torch {torch.__version__}, triton {triton.__version__}, numpy {np.__version__}, "
        f"python {platform.python_version()}; "
        + (f"{elapsed_s / 60:.1f} min for {len(rows)} files. " if elapsed_s is not None else
           f"{len(rows)} files (re-scored). ")
        + "Written by `benchmarks/honest_corpus.py`." + (f" {note}" if note else ""),
        "",
        "Each file is one honest, numerically correct `solution.py` written in an idiom real projects "
        "and strong coding models use (tests/security/honest_corpus/<task>/), named after that idiom. *Policy*: the static "
        "policy's verdict alone. *Correct*: " + checked + " with the policy bypassed, so it says whether the "
        "kernel would be paid if the policy let it run. *Reward*: what the file earns today (0 when the policy "
        "refuses it; for an accepted file the policy-bypassed evaluation is its evaluation, since the evaluator "
        "then runs the same path).",
        "",
        "## Summary",
        "",
        f"- Honest corpus: **{n} files; {accepted} accepted by the policy, {paid} paid** "
        f"({100 * paid / max(n, 1):.0f}%); {correct} of {n} correct with the policy bypassed.",
        f"- Refusals by rule (files refused by each rule; a file can break several): "
        + (", ".join(f"`[{rule}]` {count}" for rule, count in by_rule.most_common()) or "none") + ".",
        f"- Files refused by one rule only: "
        + (", ".join(f"`[{rule}]` {count}" for rule, count in only_rule.most_common()) or "none") + ".",
        f"- Honest kernels using a capability (files, environment, processes, threads: tests/security/honest_refused/; "
        f"the policy refused them before the trust boundary, the sandbox now contains them): "
        f"{len(refused_set)} files, {sum(not r['accepted'] for r in refused_set)} refused, "
        f"{sum(r['reward'] > 0 for r in refused_set)} paid.",
        "",
        "## Honest corpus",
        "",
        "| file | idiom | policy | refused by | correct (policy off) | reward |",
        "|---|---|---|---|---|---|",
    ]
    for r in honest:
        why = "yes" if r["correct"] else f"no: {r['failure']}".replace("|", "\\|")
        lines.append(f"| `{r['file']}` | {r['idiom']} | {'accepted' if r['accepted'] else 'refused'} | "
                     f"{' '.join(f'`[{x}]`' for x in r['rules'])} | {why} | {r['reward']:.3g} |")
    lines += ["", "## Honest kernels using a capability the sandbox contains", "",
              "| file | capability | policy | refused by | correct (policy off) | reward |", "|---|---|---|---|---|---|"]
    for r in refused_set:
        capability = r["file"].split("__")[1] if "__" in r["file"] else ""
        why = "yes" if r["correct"] else f"no: {r['failure']}".replace("|", "\\|")
        lines.append(f"| `{r['file']}` | {capability} | {'accepted' if r['accepted'] else 'refused'} | "
                     f"{' '.join(f'`[{x}]`' for x in r['rules'])} | {why} | {r['reward']:.3g} |")
    lines += ["", "## Policy verdicts", ""]
    for r in rows:
        if r["violations"]:
            lines.append(f"- `{r['file']}`:")
            lines += [f"  - {v}".replace("\n", " ")[:400] for v in r["violations"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="interpreter", choices=("interpreter", "cuda"))
    parser.add_argument("--mode", default="submit", choices=("submit", "test"))
    parser.add_argument("--seed", type=int, default=None,
                        help="one seed for every submission (default: each file's own, as the test uses)")
    parser.add_argument("--jobs", type=int, default=2, help="evaluations at once (each is its own process)")
    parser.add_argument("--only", nargs="*", help="substrings of the file names to evaluate")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--manifest", action="store_true", help="print today's outcomes as header lines")
    parser.add_argument("--note", default="", help="a sentence for the report's header (where it ran, ...)")
    parser.add_argument("--policy-at", metavar="REV", help="score with the policy of this git revision")
    parser.add_argument("--reuse", type=Path, metavar="JSON",
                        help="keep the evaluations of an earlier run's JSON; recompute only the policy's verdicts")
    args = parser.parse_args(argv)
    t0, before = time.monotonic(), tree_state()
    reuse = {row["file"]: row for row in json.loads(args.reuse.read_text())} if args.reuse else None
    rows = measure(args.backend, args.mode, args.seed, args.jobs, args.only, policy_at(args.policy_at), reuse)
    after = tree_state()
    tree = before if after == before else f"{before} at the start and {after} at the end"
    if args.policy_at:
        tree += f"; the policy's verdicts from `d2k_env/evaluator/policy.py` at {args.policy_at}"
    if reuse is not None:
        tree += f"; evaluations (correct, reward if accepted) reused from `{args.reuse.name}`"
    text = report(rows, args.backend, args.mode, args.seed, None if reuse else time.monotonic() - t0, tree,
                  args.note)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"honest-corpus-{datetime.date.today().isoformat()}" + ("" if args.backend == "interpreter" else
                                                                     f"-{args.backend}")
    (args.out / f"{stem}.md").write_text(text)
    (args.out / f"{stem}.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {args.out / stem}.md")
    if args.manifest:
        for r in rows:
            print(f'    "{r["file"]}": "{outcome(r)}",')
    return 0


if __name__ == "__main__":
    sys.exit(main())
