"""The judge's words: its prompt, its rubric, and how its answers (and findings given as JSON) are read.

:mod:`d2k_env.judge` sends these; a change to what the model is told or how its answer is read is a
new ``PROMPT_VERSION`` (a change to the scores' meaning a new ``RUBRIC_VERSION``), so cached verdicts
of the old wording are not reused.
"""

from __future__ import annotations

import json
import re
from typing import Any

from d2k_env.reply import mask_reasoning
from d2k_env.task import Task
from d2k_env.tasks.properties import STATUSES, DesignProperty, Finding

RUBRIC_VERSION = "1"
PROMPT_VERSION = "1"
SCORES = ("realised", "partly", "not")
UNJUDGED = "unjudged"
KINDS = ("solution", "design")  # what is judged: a solution's code, or a design written before any code
_FENCED = re.compile(r"^```[A-Za-z]*[ \t]*\n(.*?)\n?```$", re.DOTALL)

SYSTEM_PROMPT = (
    "You review GPU kernels written in Triton. You decide whether a solution realises given design "
    "properties, reading its code against the task's guidance. You answer with one JSON object and nothing else.")

DESIGN_SYSTEM_PROMPT = (
    "You review designs of GPU kernels to be written in Triton. You decide whether a design realises given design "
    "properties, reading it against the task's guidance. You answer with one JSON object and nothing else.")

RUBRIC = (
    'Scores: "realised": the code does what the property states, on every path forward takes; '
    '"partly": it does so only on some paths or shapes, or only in part; '
    '"not": it does not, or the code gives no evidence that it does. Judge the code, not its comments. '
    "Give each score a one-line reason naming the code that decides it.")

DESIGN_RUBRIC = (
    'Scores: "realised": the design commits to what the property states, concretely enough to build it; '
    '"partly": it commits to it only on some paths or shapes, only in part, or leaves it open among options; '
    '"not": it does not, contradicts it, or does not say. Judge what the design commits to, not what it says '
    "it might consider. Give each score a one-line reason naming the part of the design that decides it.")


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def system_prompt(kind: str = "solution") -> str:
    return DESIGN_SYSTEM_PROMPT if kind == "design" else SYSTEM_PROMPT


def build_prompt(task: Task, solution: str, asked: list[DesignProperty],
                 facts: list[tuple[DesignProperty, Finding]], kind: str = "solution") -> str:
    """The judge's request for ``asked``, with ``facts`` (settled findings) stated as true.
    ``kind="design"``: ``solution`` is a design written before any code (there are no facts), read
    under :data:`DESIGN_RUBRIC`."""
    layers = sorted({p.layer for p in asked})
    guidance = "\n\n".join(f"## {layer}\n{task.guidance(layer)}" for layer in layers)
    wanted = "\n".join(f"- {p.id} [{p.layer}]: {p.text}" for p in asked)
    # A fence longer than any run of backticks in the solution: its text cannot close the block early.
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", solution)), default=0))
    if kind == "design":
        judged = (f"# The design (written before any code; nothing was run)\n"
                  f"{fence}text\n{solution.rstrip()}\n{fence}\n\n")
        rubric = DESIGN_RUBRIC
    else:
        known = "\n".join(f"- {p.id} ({p.layer}, {p.text}): {f.status}; {f.detail}" for p, f in facts) or "(none)"
        judged = (f"# The solution (solution.py)\n{fence}python\n{solution.rstrip()}\n{fence}\n\n"
                  f"# Automatic findings (measured by the evaluator: take them as true)\n{known}\n\n")
        rubric = RUBRIC
    return (f"# Task: {task.id}\n{task.description}\n\n# Design guidance\n{guidance}\n\n{judged}"
            f"# Properties to judge\n{wanted}\n\n# Answer\n{rubric}\n"
            'Reply with one JSON object and nothing else: {"properties": [{"id": "<property id>", '
            '"score": "realised" | "partly" | "not", "reason": "<one line>"}]}, one entry per property to judge.')


def read_answer(text: str | None, asked: set[str]) -> tuple[dict[str, tuple[str, str]], str | None]:
    """The usable ``{id: (score, reason)}`` in a reply, and what was wrong with it (None: nothing)."""
    masked, unclosed = mask_reasoning(text or "")
    body = masked.strip()
    if fenced := _FENCED.match(body):
        body = fenced.group(1).strip()
    if not body:
        return {}, "the reply holds no answer" + (" (a reasoning block was never closed)" if unclosed else "")
    try:
        answer = json.loads(body)
    except json.JSONDecodeError as exc:
        return {}, f"the reply is not one JSON object ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if not (isinstance(answer, dict) and isinstance(answer.get("properties"), list)):
        return {}, 'the reply is not a JSON object with a "properties" list'
    got: dict[str, tuple[str, str]] = {}
    problems, wrong = [], set()
    ids = [e.get("id") if isinstance(e, dict) and isinstance(e.get("id"), str) else None for e in answer["properties"]]
    for pid, entry in zip(ids, answer["properties"]):
        if pid not in asked:
            problems.append(f"entry {_one_line(json.dumps(entry), 80)} names no property asked")
            continue
        wrong.add(pid)
        if ids.count(pid) > 1:  # two answers for one property: neither is taken
            problems.append(f"{pid}: answered more than once")
        elif entry.get("score") not in SCORES:
            problems.append(f"{pid}: score must be one of {', '.join(SCORES)}, not {entry.get('score')!r}")
        elif not (isinstance(entry.get("reason"), str) and entry["reason"].strip()):
            problems.append(f"{pid}: no reason given")
        else:
            wrong.discard(pid)
            got[pid] = (entry["score"], _one_line(entry["reason"]))
    if missing := sorted(asked - set(got) - wrong):
        problems.append(f"no entry for {', '.join(missing)}")
    return got, "; ".join(dict.fromkeys(problems)) or None


def read_findings(data: Any, properties: list[DesignProperty]) -> dict[str, Finding]:
    """Findings from JSON data, ``{"<property id>": {"status": ..., "detail": ...}}``; ValueError
    naming the first thing wrong (an id the task lacks, a status not one of STATUSES, no detail)."""
    if not isinstance(data, dict):
        raise ValueError('findings: a JSON object {"<property id>": {"status": ..., "detail": ...}}')
    ids = [p.id for p in properties]
    out = {}
    for pid, f in data.items():
        if pid not in ids:
            raise ValueError(f"findings: {pid!r} is no property of the task (its properties: {', '.join(ids)})")
        if not (isinstance(f, dict) and f.get("status") in STATUSES and isinstance(f.get("detail"), str)):
            raise ValueError(f"findings: {pid}: an object with status ({', '.join(STATUSES)}) and detail (text)")
        out[pid] = Finding(f["status"], _one_line(f["detail"]))
    return out
