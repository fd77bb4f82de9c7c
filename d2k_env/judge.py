"""The implementation judge: does a solution realise its task's design properties?

A task's ``design_properties`` (:mod:`d2k_env.tasks.properties`) say what a solution should realise,
layer by layer (L1 algorithm, L2 dataflow, L3 GPU tricks). Properties an automatic finding settles
("realised" / "not realised", from what the trusted evaluator saw) are scored by that finding and
are not asked again; the model (any OpenAI-compatible server, through the agents' client and retry
loop) scores the rest "realised", "partly" or "not", with a one-line reason.

The protocol:

- The prompt holds the task description, the guidance layers the asked properties come from, the
  solution, the properties (id, layer, text) and the settled findings, given as facts. It never
  holds the reward or the speedup (:meth:`Judge.judge` is not given them), and the verdict never
  changes the reward.
- ``confirm=n`` also asks the model, blind (that property's finding left out of the prompt), about
  ``n`` of the settled properties, chosen by hash of the cache key (so the same on every call);
  ``Verdict.agreement`` counts how often it agreed: ``{"checked": n, "agree": k}``. "partly"
  agrees with neither finding.
- The answer must be strict JSON, ``{"properties": [{"id", "score", "reason"}]}``. Properties the
  answer leaves out or gets wrong are asked again, with the reason, up to ``max_attempts`` requests
  in all; then each is recorded ``unjudged`` with the reason, never guessed.
- Complete verdicts are cached as JSON files under ``cache_dir``, keyed by sha256 of the task id,
  the solution text, the property list, the findings, ``confirm``, the rubric and prompt versions
  and the model: the same key again makes no request. A verdict with any question unanswered (an
  unjudged property, an unanswered confirmation) is not cached, so a later call asks again.
- ``budget`` caps the judge's requests and tokens (counted as the agents count them,
  :class:`~d2k_env.agents.base.TokenUsage`): a request that would exceed it raises
  :class:`JudgeBudgetError`. The token cap is checked before each request, so the last one may
  pass it.

- ``kind="design"`` judges a design written before any code (a design-only episode's
  ``submit_design``): there are no findings, so every property is asked, under the design rubric
  (does the design commit to it?). The kind is part of the cache key.

The prompt, the rubric and the reading of answers are in :mod:`d2k_env.judge_prompt`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from d2k_env.agents.base import TokenUsage
from d2k_env.judge_prompt import (KINDS, PROMPT_VERSION, RUBRIC_VERSION, SCORES, UNJUDGED, build_prompt, read_answer,
                                  system_prompt)
from d2k_env.task import Task
from d2k_env.tasks.properties import LAYERS, STATUSES, DesignProperty, Finding

_FROM_FINDING = {"realised": "realised", "not realised": "not"}


class JudgeError(RuntimeError):
    """The judge cannot give a verdict (misconfigured, or its budget is spent)."""


class JudgeBudgetError(JudgeError):
    """A request would exceed the judge's budget."""


@dataclass(frozen=True)
class Budget:
    """The most requests and tokens (prompt + completion) a :class:`Judge` may spend; None: no cap."""

    requests: int | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class PropertyVerdict:
    """One property's score. ``source``: "automatic" (settled by a finding) or "judge".
    ``automatic``: the finding's status where there is one; ``judged``: the model's score of a
    settled property it was asked to confirm."""

    id: str
    layer: str
    text: str
    score: str  # one of SCORES, or UNJUDGED
    reason: str
    source: str
    automatic: str | None = None
    judged: str | None = None


@dataclass(frozen=True)
class Verdict:
    task: str
    model: str
    key: str
    properties: tuple[PropertyVerdict, ...]
    agreement: dict[str, int]
    usage: dict[str, int]  # what this verdict cost; zeros when it came from the cache
    cached: bool = False
    rubric_version: str = RUBRIC_VERSION
    prompt_version: str = PROMPT_VERSION
    kind: str = "solution"  # or "design" (see the module docstring)

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per layer: how many properties have each score, and the realised fraction of those
        scored (unjudged ones left out; None when none was scored)."""
        out = {}
        for layer in LAYERS:
            scores = [p.score for p in self.properties if p.layer == layer]
            counts = {s: scores.count(s) for s in (*SCORES, UNJUDGED)}
            scored = len(scores) - counts[UNJUDGED]
            out[layer] = {"properties": len(scores), **counts,
                          "realised_fraction": counts["realised"] / scored if scored else None}
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "properties": [asdict(p) for p in self.properties], "summary": self.summary()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        fields = {k: v for k, v in d.items() if k not in ("summary", "properties")}
        return cls(**fields, properties=tuple(PropertyVerdict(**p) for p in d["properties"]))


def _describe(p: DesignProperty) -> dict[str, Any]:
    return {"id": p.id, "layer": p.layer, "text": p.text, "check": p.check.describe() if p.check else None}


class Judge:
    """Scores solutions against their task's design properties with a chat model.

    ``client``: an ``openai.OpenAI`` client, else one is made for ``base_url`` (and ``api_key``, else
    ``OPENAI_API_KEY``), as the agents make theirs; ``model``: else ``D2K_MODEL``, else the server's
    only model. ``usage`` counts what the judge has spent over its life. Threads may share a judge
    (``d2k run --jobs``): it gives one verdict at a time, so its budget holds across them.
    """

    def __init__(self, client=None, model: str | None = None, cache_dir: str | Path | None = None,
                 budget: Budget | None = None, *, base_url: str | None = None, api_key: str | None = None,
                 confirm: int = 0, max_attempts: int = 3, temperature: float | None = 0.0,
                 max_retries: int = 8, backoff_s: float = 1.0, max_backoff_s: float = 60.0, timeout_s: float = 600.0):
        from d2k_env.agents.openai_chat import make_client, resolve_model  # needs the agents extra

        if not (isinstance(confirm, int) and confirm >= 0):
            raise ValueError(f"confirm: the number of settled properties to also ask, >= 0, not {confirm!r}")
        if not (isinstance(max_attempts, int) and max_attempts >= 1):
            raise ValueError(f"max_attempts: requests per verdict, >= 1, not {max_attempts!r}")
        self.client = client if client is not None else make_client(base_url, api_key, timeout_s)
        self.model = resolve_model(self.client, model)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.budget = budget or Budget()
        self.confirm, self.max_attempts, self.temperature = confirm, max_attempts, temperature
        self.retry = (max_retries, backoff_s, max_backoff_s)
        self.usage = TokenUsage()
        self._lock = threading.Lock()

    def key(self, task: Task, solution: str, findings: Mapping[str, Finding], kind: str = "solution") -> str:
        material = {"task": task.id, "solution": solution,
                    "properties": [_describe(p) for p in task.spec.design_properties],
                    "findings": {k: [f.status, f.detail] for k, f in sorted(findings.items())}, "confirm": self.confirm,
                    "rubric": RUBRIC_VERSION, "prompt": PROMPT_VERSION, "model": self.model}
        if kind != "solution":  # in the key only where it is not the default: solutions' cached keys stay valid
            material["kind"] = kind
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()

    def judge(self, task: Task, solution_source: str, findings: Mapping[str, Finding] | None = None,
              kind: str = "solution") -> Verdict:
        """The verdict on ``solution_source`` for ``task``; ``findings``: the automatic ones by property
        id (:func:`d2k_env.tasks.properties.findings`); an ``unchecked`` one settles nothing.
        ``kind="design"``: ``solution_source`` is a design's text, judged without findings."""
        with self._lock:
            return self._judge(task, solution_source, findings, kind)

    def describe(self) -> dict[str, Any]:
        """What a trajectory records of the judge: its model, versions and settings."""
        return {"model": self.model, "rubric_version": RUBRIC_VERSION, "prompt_version": PROMPT_VERSION,
                "confirm": self.confirm, "max_attempts": self.max_attempts, "temperature": self.temperature,
                "budget": asdict(self.budget), "base_url": str(getattr(self.client, "base_url", ""))}

    def _judge(self, task: Task, solution_source: str, findings: Mapping[str, Finding] | None,
               kind: str) -> Verdict:
        if kind not in KINDS:
            raise ValueError(f"kind: one of {KINDS}, not {kind!r}")
        if kind == "design" and findings:
            raise ValueError("a design has no automatic findings: nothing of it ran")
        solution = solution_source
        properties = list(task.spec.design_properties)
        if not properties:
            raise JudgeError(f"task {task.id} has no design properties: nothing to judge")
        findings = dict(findings or {})
        for pid, finding in findings.items():
            if pid not in {p.id for p in properties} or finding.status not in STATUSES:
                raise ValueError(f"finding {pid}: {finding.status!r} for a property of task {task.id}? Findings name "
                                 f"its properties ({', '.join(p.id for p in properties)}), with a status of {STATUSES}")
        key = self.key(task, solution, findings, kind)
        if (cached := self._cached(key)) is not None:
            return cached
        settled = [p for p in properties if p.id in findings and findings[p.id].status in _FROM_FINDING]
        blind = sorted(settled, key=lambda p: hashlib.sha256(f"{key}:{p.id}".encode()).hexdigest())[:self.confirm]
        asked = [p for p in properties if p not in settled] + blind
        facts = [(p, findings[p.id]) for p in settled if p not in blind]
        before = replace(self.usage)
        answers, why = self._ask(task, solution, asked, facts, kind) if asked else ({}, None)
        verdicts, checked, agree = [], 0, 0
        for p in properties:
            finding = findings.get(p.id)
            judged = answers.get(p.id)
            if p in settled:
                if judged is not None:
                    checked += 1
                    agree += judged[0] == _FROM_FINDING[finding.status]
                verdicts.append(PropertyVerdict(p.id, p.layer, p.text, _FROM_FINDING[finding.status], finding.detail,
                                                "automatic", finding.status, judged[0] if judged else None))
            elif judged is not None:
                verdicts.append(PropertyVerdict(p.id, p.layer, p.text, judged[0], judged[1], "judge",
                                                finding.status if finding else None))
            else:
                verdicts.append(PropertyVerdict(p.id, p.layer, p.text, UNJUDGED, f"no usable answer: {why}", "judge",
                                                finding.status if finding else None))
        verdict = Verdict(task.id, self.model, key, tuple(verdicts), {"checked": checked, "agree": agree},
                          self.usage.minus(before).to_dict(), kind=kind)
        if why is None:  # every question answered (confirmations too): the same key needs no request again
            self._store(verdict)
        return verdict

    def _ask(self, task, solution, asked, facts, kind) -> tuple[dict[str, tuple[str, str]], str | None]:
        pending = {p.id for p in asked}
        messages = [{"role": "system", "content": system_prompt(kind)},
                    {"role": "user", "content": build_prompt(task, solution, asked, facts, kind)}]
        answers: dict[str, tuple[str, str]] = {}
        why = None
        for attempt in range(1, self.max_attempts + 1):
            reply = self._complete(messages)
            got, why = read_answer(reply, pending)
            answers.update(got)
            pending -= set(got)
            if not pending:
                return answers, None
            why = f"{why} (after {attempt} request{'s' if attempt > 1 else ''})"
            again = (f"That answer could not be used: {why}. Answer again, one JSON object as asked, for these "
                     f"properties only: {', '.join(sorted(pending))}.")
            messages += [{"role": "assistant", "content": reply or ""}, {"role": "user", "content": again}]
        return answers, why

    def _complete(self, messages: list[dict]) -> str | None:
        from d2k_env.agents.openai_chat import create_with_retries

        if self.budget.requests is not None and self.usage.requests >= self.budget.requests:
            raise JudgeBudgetError(f"judge budget spent: {self.usage.requests} of {self.budget.requests} requests used")
        if self.budget.tokens is not None and self.usage.total_tokens >= self.budget.tokens:
            raise JudgeBudgetError(f"judge budget spent: {self.usage.total_tokens} tokens used, "
                                   f"the budget is {self.budget.tokens}")
        request: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.temperature is not None:
            request["temperature"] = self.temperature
        response = create_with_retries(self.client, request, f"judge {self.model}", *self.retry,
                                       on_retry=self._count_retry)
        self.usage.requests += 1
        if response.usage is not None:
            self.usage.prompt_tokens += response.usage.prompt_tokens or 0
            self.usage.completion_tokens += response.usage.completion_tokens or 0
        return response.choices[0].message.content if response.choices else None

    def _count_retry(self) -> None:
        self.usage.retries += 1

    def _cached(self, key: str) -> Verdict | None:
        path = self.cache_dir / f"{key}.json" if self.cache_dir else None
        if path is None or not path.is_file():
            return None
        try:
            verdict = Verdict.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            return None  # unreadable or from another layout: judged again and rewritten
        return replace(verdict, usage=TokenUsage().to_dict(), cached=True)

    def _store(self, verdict: Verdict) -> None:
        if self.cache_dir is None:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".verdict-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(verdict.to_dict(), f, indent=1)
        os.replace(tmp, self.cache_dir / f"{verdict.key}.json")  # whole or absent, never half written

    def close(self) -> None:
        self.client.close()
