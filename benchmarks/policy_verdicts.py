"""Both sides of the static policy at once: its verdict on every file of tests/security/, counted.

Each file (a template once per registered task) is put in one of two sets by its header
(tests/exploits.py): *honest* when any verdict asked of it is ``paid``/``correct`` or its ``Policy:``
is ``accepts``, else *exploit*. For each set: how many files the policy accepts and how many it
refuses; for the honest corpus (tests/security/honest_corpus/) and its known refusals
(tests/security/honest_refused/) separately too. An exploit the policy accepts is not paid by that
alone: the run-time layer must then give it 0 (tests/test_security.py evaluates it). What this
measures is the policy's share; ``--policy-at REV`` scores the same files with the policy of another
git revision, and the files whose verdict differs between the two are listed, so that a change to
the policy shows both what it now pays and what it now lets through to the run-time layer.

    python benchmarks/policy_verdicts.py [--policy-at REV] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from exploits import discover  # noqa: E402
from honest_corpus import policy_at  # noqa: E402

from d2k_env.task import load_task  # noqa: E402


def honest(exploit) -> bool:
    verdicts = [v for key, v in exploit.fields.items() if key.startswith("Expect")]
    return any(v.strip() in ("paid", "correct") for v in verdicts) or exploit.fields.get("Policy") == "accepts"


def subset(exploit) -> str:
    if exploit.klass in ("honest_corpus", "honest_refused"):
        return exploit.klass
    return "honest probes" if honest(exploit) else "exploits"


def verdicts(policy) -> dict[str, dict]:
    """case id -> {"set", "accepted", "rules"} for every file (and task, for a template)."""
    exploits, broken = discover()
    if broken:
        raise SystemExit(f"headers that do not parse: {sorted(broken)}")
    tasks, out = {}, {}
    for e in exploits:
        for task_id in e.tasks:
            task = tasks.setdefault(task_id, load_task(task_id))
            violations = policy(e.source(task_id), task.allowed_torch)
            out[f"{e.id}-{task_id}" if e.template else e.id] = {
                "set": subset(e), "accepted": not violations, "rules": sorted({v.rule for v in violations})}
    return out


def table(rows: dict[str, dict], title: str) -> list[str]:
    lines = [f"{title}", "", "| set | files | accepted | refused |", "|---|---|---|---|"]
    for name in ("honest_corpus", "honest probes", "honest_refused", "exploits"):
        group = [r for r in rows.values() if r["set"] == name]
        accepted = sum(r["accepted"] for r in group)
        lines.append(f"| {name} | {len(group)} | {accepted} | {len(group) - accepted} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy-at", metavar="REV", help="also score with the policy of this git revision")
    parser.add_argument("--json", type=Path, help="write the working tree's verdicts here")
    args = parser.parse_args(argv)
    now = verdicts(policy_at(None))
    lines = table(now, "Working tree's policy:")
    if args.policy_at:
        then = verdicts(policy_at(args.policy_at))
        lines += [""] + table(then, f"Policy at {args.policy_at}:") + ["", "Verdicts that differ:"]
        for case in sorted(now):
            a, b = then.get(case), now[case]
            if a is None or a["accepted"] != b["accepted"]:
                before = "new" if a is None else ("accepted" if a["accepted"] else "refused " + ",".join(a["rules"]))
                after = "accepted" if b["accepted"] else "refused " + ",".join(b["rules"])
                lines.append(f"- {b['set']}: `{case}`: {before} -> {after}")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(now, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
