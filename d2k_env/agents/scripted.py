"""Scripted and replay policies: a fixed list of actions, for demos, tests and replaying episodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from d2k_env.agents.base import Policy, PolicyError
from d2k_env.task import Task


class ScriptedPolicy(Policy):
    """Replays ``actions`` one per call, ignoring observations; then keeps submitting, or, with
    ``then_submit=False``, raises :class:`PolicyError` (the episode ends as the script did)."""

    def __init__(self, actions: Iterable[str | dict[str, Any]], name: str = "scripted", then_submit: bool = True):
        super().__init__()
        self.name = name
        self.actions = [a if isinstance(a, str) else json.dumps(a) for a in actions]
        self.then_submit = then_submit
        self._next = 0

    def __call__(self, observation: str) -> str:
        if self._next < len(self.actions):
            action = self.actions[self._next]
            self._next += 1
            return action
        if not self.then_submit:
            raise PolicyError(f"the {len(self.actions)} recorded actions are used up; the original episode "
                              "ended here without submitting")
        return json.dumps({"tool": "submit", "args": {}})

    @classmethod
    def from_trajectory(cls, path: str | Path, name: str = "replay") -> "ScriptedPolicy":
        """Replays the actions recorded in a trajectory file written by ``d2k run``, and no others: a
        replay of an episode that never submitted does not submit either."""
        from d2k_env.trajectory import read_trajectory

        return cls([step["action"] for step in read_trajectory(path).steps], name=name, then_submit=False)


def reference_policy(task: Task) -> ScriptedPolicy:
    """Reads the task, writes the expert reference as its solution, tests it and submits."""
    return ScriptedPolicy([
        {"tool": "list_files", "args": {}},
        {"tool": "read_file", "args": {"path": "baseline.py"}},
        {"tool": "write_file", "args": {"path": "solution.py", "content": task.reference_path.read_text()}},
        {"tool": "run_tests", "args": {}},
        {"tool": "submit", "args": {}},
    ], name="reference")


def reference_design_policy(task: Task) -> ScriptedPolicy:
    """For design-only episodes: reads the baseline and submits the task's own L1-L3 guidance as its
    design. The expert's design, so a judge should find it realises most properties: a check of
    the judge and its rubric, not a model's result."""
    from d2k_env.task import GUIDANCE_LAYERS

    design = "\n\n".join(f"## {layer}\n{task.guidance(layer)}" for layer in GUIDANCE_LAYERS)
    return ScriptedPolicy([
        {"tool": "read_file", "args": {"path": "baseline.py"}},
        {"tool": "submit_design", "args": {"design": design}},
    ], name="reference-design", then_submit=False)
