"""Episode trajectories: one JSON object per line, one file per episode, written atomically.

A file holds, in order:

- a ``header`` line: task, condition (guidance shown), seed, policy and its settings, backend,
  reward and the reward version that scored it (absent in files written before reward versions),
  step budget, versions, GPU, start time, the full reset prompt, the episodes' ``mode``
  (``solution`` or ``design``) and the ``judge`` grading them (model, rubric and prompt versions,
  settings; ``null`` without one) (both absent in files written before them);
- one ``step`` line per env step: index, action text, what the model said for it (when a model was
  asked), observation (clipped to the run's limit; ``observation_chars`` is the full length),
  reward, terminated, truncated, tool, error, evaluation result (when the tool evaluated), its
  automatic findings on the task's design properties (``properties``, id -> status, detail and
  workloads; ``null`` when nothing was evaluated), wall seconds (policy and env) and tokens spent;
- a ``summary`` line: status (``finished``, or ``failed`` with the error), total reward, whether
  it submitted, correct, geomean speedup and roofline fraction of the submission (``null`` when not
  timed), the submitted ``solution.py`` (in a design episode ``submitted_design``, the design's
  text, and ``correct`` is ``null``), steps, tokens, wall seconds; ``properties``, one record per
  design property of the task (id, layer, text, check, and the automatic ``status`` and ``detail``
  on the submission: ``null`` for one only the judge decides), and ``judge``, the judge's verdict
  (:meth:`d2k_env.judge.Verdict.to_dict`), ``{"error": ...}`` saying why there is none, or
  ``null`` when the run had no judge.

Lines are written to ``<name>.jsonl.tmp`` and the file is renamed to ``<name>.jsonl`` only after the
summary is on disk, so a final file is always complete. Non-finite floats are written as ``null``.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1
SUFFIX = ".jsonl"
TMP_SUFFIX = ".jsonl.tmp"


class TrajectoryError(ValueError):
    """A trajectory file that is not a complete, well-formed episode."""


@dataclass(frozen=True, order=True)
class EpisodeKey:
    """What identifies an episode in a run: policy, task, guidance condition, seed."""

    policy: str
    task: str
    condition: str
    seed: int

    @property
    def filename(self) -> str:
        policy = re.sub(r"[^A-Za-z0-9._+-]+", "_", self.policy).strip("_") or "policy"
        return f"{policy}__{self.task}__{self.condition}__seed{self.seed}{SUFFIX}"

    def __str__(self) -> str:
        return f"{self.task} [{self.condition}] seed {self.seed} ({self.policy})"


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats replaced by ``None`` (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(json_safe(record), allow_nan=False)


class TrajectoryWriter:
    """Writes one episode to ``path + '.tmp'``; :meth:`commit` moves it to ``path`` atomically."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.tmp_path = self.path.with_name(self.path.name[: -len(SUFFIX)] + TMP_SUFFIX)
        self._file = open(self.tmp_path, "w", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(dumps(record) + "\n")
        self._file.flush()

    def commit(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self.tmp_path, self.path)
        _fsync_dir(self.path.parent)

    def discard(self) -> None:
        if not self._file.closed:
            self._file.close()
        self.tmp_path.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Trajectory:
    path: Path
    header: dict[str, Any]
    steps: list[dict[str, Any]]
    summary: dict[str, Any]

    @property
    def key(self) -> EpisodeKey:
        h = self.header
        return EpisodeKey(h["policy"], h["task"], h["condition"], h["seed"])

    @property
    def finished(self) -> bool:
        return self.summary["status"] == "finished"


def read_trajectory(path: str | Path) -> Trajectory:
    """Parse a final trajectory file; :class:`TrajectoryError` says what is wrong with it."""
    path = Path(path)
    records = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise TrajectoryError(f"{path}: line {n} is not JSON ({exc.msg})") from None
    if len(records) < 2 or records[0].get("type") != "header" or records[-1].get("type") != "summary":
        raise TrajectoryError(f"{path}: not a complete trajectory (it needs a header line first and a summary "
                              "line last)")
    header, summary, steps = records[0], records[-1], records[1:-1]
    if header.get("format") != FORMAT_VERSION:
        raise TrajectoryError(f"{path}: trajectory format {header.get('format')!r}; this version reads "
                              f"{FORMAT_VERSION}")
    if any(s.get("type") != "step" for s in steps) or [s.get("index") for s in steps] != list(range(1, len(steps) + 1)):
        raise TrajectoryError(f"{path}: the step lines are not numbered 1..{len(steps)}")
    return Trajectory(path, header, steps, summary)


def episodes_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "episodes"


def load_run(run_dir: str | Path) -> list[Trajectory]:
    """Every final trajectory of a run, sorted by episode key; unfinished ``.tmp`` files are ignored."""
    directory = episodes_dir(run_dir)
    if not directory.is_dir():
        raise FileNotFoundError(f"{run_dir} holds no episodes/ directory: is it a d2k run directory?")
    return sorted((read_trajectory(p) for p in directory.glob("*" + SUFFIX)), key=lambda t: t.key)


def chat_transcript(trajectory: Trajectory) -> list[dict[str, Any]]:
    """The episode as OpenAI chat messages (system, prompt, assistant turns, tool results), e.g. for
    fine-tuning. Steps without a model output (scripted policies) become assistant text turns.
    Observations are as stored, so clipped ones stay clipped."""
    from d2k_env.chat_format import Conversation, ModelReply, ModelToolCall

    settings = trajectory.header.get("policy_settings") or {}
    conversation = Conversation(settings.get("tool_mode", "text"), settings.get("system_prompt"))
    conversation.start(trajectory.header["prompt"])
    for step in trajectory.steps:
        output = step.get("model_output")
        if output is not None:
            conversation.add_reply(ModelReply(output["content"], tuple(ModelToolCall(**c) for c in output["tool_calls"]),
                                              output.get("reasoning")))
        elif not conversation.has_pending:  # not the second call of an earlier reply
            conversation.add_reply(ModelReply(step["action"]))
        conversation.add_observation(step["observation"])
    return conversation.messages
