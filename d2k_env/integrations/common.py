"""What every adapter shares: the training conditions (tasks x guidance x seeds) as plain rows,
and one lazily built env per adapter that changes task only when a row asks for another.

No framework is imported here.
"""

from __future__ import annotations

import json
from itertools import product
from typing import Any, Iterable

from d2k_env.task import task_ids

# The guidance conditions of the D2K-Bench ablation: none, then each layer added in turn.
GUIDANCE_CONDITIONS = ("none", "L1", "L1+L2", "L1+L2+L3")


def condition_rows(tasks: Iterable[str] | None = None, guidance: Iterable[str] = GUIDANCE_CONDITIONS,
                   seeds: Iterable[int] = (0,)) -> list[dict[str, Any]]:
    """One row per (task, guidance condition, seed), in that nesting order: ``{"task", "guidance",
    "seed"}``. ``tasks`` defaults to every registered task; an unknown task or guidance layer is a
    ValueError here, not in the middle of a training run."""
    from d2k_env.env import parse_guidance  # imports torch: only when rows are actually built

    known = task_ids()
    tasks = list(known if tasks is None else tasks)
    unknown = [t for t in tasks if t not in known]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; registered: {known}")
    guidance = list(guidance)
    for condition in guidance:
        parse_guidance(condition)
    return [{"task": t, "guidance": g, "seed": int(s)} for t, g, s in product(tasks, guidance, seeds)]


def tool_action(tool: str, **args: Any) -> str:
    """The env action for one tool call (arguments left out when None, as the schema allows)."""
    return json.dumps({"tool": tool, "args": {k: v for k, v in args.items() if v is not None}})


class LazyEnv:
    """A :class:`~d2k_env.env.KernelEnv` made on first use from keyword arguments, remade only when
    a reset names another task (so a Triton cache lives as long as the task does).
    ``env_kwargs`` go to the env as they are."""

    def __init__(self, **env_kwargs: Any):
        if "task_id" in env_kwargs:
            raise ValueError("the task comes from each reset, not from the adapter's arguments")
        self.env_kwargs = env_kwargs
        self.env = None

    def reset(self, task: str, guidance: str | None = None,
              seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode of ``task`` (under ``guidance``, if given): the env's ``(prompt, info)``."""
        from d2k_env.env import KernelEnv

        if self.env is None or self.env.task.id != task:
            self.close()
            self.env = KernelEnv(task, **self.env_kwargs)
        options = None if guidance is None else {"guidance": guidance}
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str | dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """One env step; a RuntimeError before the first reset."""
        if self.env is None:
            raise RuntimeError("call reset() before using a tool")
        return self.env.step(action)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None
