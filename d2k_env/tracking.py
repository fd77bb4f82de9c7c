"""Weights & Biases tracking (needs the ``agents`` extra).

:class:`WandbTracker` logs per-episode metrics (``episode/*``, on the ``episode/index`` axis),
per-step metrics (``step/*``, on the ``step/global`` axis, each with ``step/episode``), a running
correctness rate per guidance condition (``condition/<name>/correct_rate``), a table of submitted
kernels, the report's plots as images (:meth:`WandbTracker.log_plots`) and the run's config, in
a run ``group`` (one per experiment) with ``tags`` (e.g. one per guidance condition). It is a :class:`~d2k_env.runner.RunCallback` for ``d2k run``, and
its ``log_*`` methods serve any training loop. No key is read or stored here: wandb's own login or
``WANDB_API_KEY`` applies, and ``WANDB_MODE=offline`` keeps everything on disk.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Iterable

from d2k_env.reward import REWARD_VERSION
from d2k_env.runner import RunCallback, RunSettings, gpu_name, versions
from d2k_env.trajectory import EpisodeKey, Trajectory

KERNEL_COLUMNS = ["policy", "task", "condition", "seed", "correct", "speedup", "reward", "steps", "code"]


def experiment_config(keys: Iterable[EpisodeKey], settings: RunSettings, policy_settings: dict[str, Any]) -> dict:
    """The run config wandb records: what ran, where, with which versions."""
    keys = list(keys)
    return {"tasks": sorted({k.task for k in keys}), "guidance_conditions": sorted({k.condition for k in keys}),
            "seeds": sorted({k.seed for k in keys}), "policy": policy_settings, **settings.compared(),
            "reward_version": REWARD_VERSION,
            "gpu": gpu_name(settings.backend), "versions": versions()}


class WandbTracker(RunCallback):
    """One wandb run; every method is thread-safe. ``run_id`` resumes an earlier run, and ``earlier``
    (the run directory's finished trajectories) lets its axes and running rates continue."""

    def __init__(self, project: str, config: dict[str, Any], directory: str | Path, run_id: str | None = None,
                 name: str | None = None, entity: str | None = None, earlier: Iterable[Trajectory] = (),
                 group: str | None = None, tags: Iterable[str] = ()):
        import wandb

        self._wandb = wandb
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=project, entity=entity, name=name, id=run_id, group=group,
                              tags=list(tags) or None, resume="allow" if run_id else None, dir=str(directory),
                              config=config)
        for axis, pattern in (("episode/index", "episode/*"), ("step/global", "step/*"),
                              ("episode/index", "condition/*")):
            self.run.define_metric(axis, hidden=False)
            self.run.define_metric(pattern, step_metric=axis)
        self._lock = threading.Lock()
        self._next_episode, self._step = 0, 0
        self._index: dict[EpisodeKey, int] = {}
        self._outcomes: dict[str, list[bool]] = {}
        for t in earlier:
            if t.finished:
                self._next_episode += 1
                self._step += t.summary["steps"]
                self._outcomes.setdefault(t.header["condition"], []).append(bool(t.summary["correct"]))

    @property
    def run_id(self) -> str:
        return self.run.id

    # -- for any loop ------------------------------------------------------------------------------
    def log_episode(self, metrics: dict[str, Any], index: int | None = None) -> int:
        """Log ``episode/<name>`` values for one episode; returns its index on the episode axis."""
        with self._lock:
            if index is None:
                index, self._next_episode = self._next_episode, self._next_episode + 1
            self.run.log({"episode/index": index, **{f"episode/{k}": v for k, v in metrics.items()}})
            return index

    def log_step(self, episode: int, metrics: dict[str, Any]) -> None:
        """Log ``step/<name>`` values for one env step of episode ``episode``."""
        with self._lock:
            self._step += 1
            self.run.log({"step/global": self._step, "step/episode": episode,
                          **{f"step/{k}": v for k, v in metrics.items()}})

    def log_kernels(self, rows: Iterable[dict[str, Any]], name: str = "kernels") -> None:
        """A table of submitted kernels, one row per episode (columns :data:`KERNEL_COLUMNS`)."""
        table = self._wandb.Table(columns=KERNEL_COLUMNS, data=[[r.get(c) for c in KERNEL_COLUMNS] for r in rows])
        with self._lock:
            self.run.log({name: table})

    def log_plots(self, paths: Iterable[str | Path]) -> None:
        """Images (the report's plots, say), each as ``plots/<file stem>``."""
        images = {f"plots/{Path(p).stem}": self._wandb.Image(str(p)) for p in paths}
        if images:
            with self._lock:
                self.run.log(images)

    def finish(self, summary: dict[str, Any] | None = None) -> None:
        with self._lock:
            for key, value in (summary or {}).items():
                self.run.summary[key] = value
            self.run.finish()

    # -- as a d2k run callback ---------------------------------------------------------------------
    def on_episode_start(self, key: EpisodeKey) -> None:
        with self._lock:
            self._index[key], self._next_episode = self._next_episode, self._next_episode + 1

    def on_step(self, key: EpisodeKey, record: dict[str, Any]) -> None:
        evaluation = record.get("evaluation")
        metrics = {"reward": record["reward"], "wall_s": record["wall_s"], "policy_s": record["policy_s"],
                   "env_s": record["env_s"], "tokens": record["tokens"]["total_tokens"],
                   "action_error": record.get("error") is not None, "evaluated": evaluation is not None}
        if evaluation is not None:
            metrics["eval_correct"] = bool(evaluation.get("correct"))
        self.log_step(self._index[key], metrics)

    def on_episode_end(self, key: EpisodeKey, header: dict[str, Any], summary: dict[str, Any]) -> None:
        finished = summary["status"] == "finished"
        metrics = {"reward": summary["total_reward"], "correct": bool(summary["correct"]),
                   "submitted": bool(summary["submitted"]), "steps": summary["steps"],
                   "tokens": summary["tokens"]["total_tokens"], "wall_s": summary["wall_s"], "failed": not finished,
                   "guided": key.condition != "none"}
        if summary.get("speedup") is not None:
            metrics["speedup"] = summary["speedup"]
        index = self.log_episode(metrics, self._index.pop(key))
        if finished:
            with self._lock:
                outcomes = self._outcomes.setdefault(key.condition, [])
                outcomes.append(bool(summary["correct"]))
                self.run.log({"episode/index": index,
                              f"condition/{key.condition}/correct_rate": sum(outcomes) / len(outcomes)})


def kernel_rows(trajectories: Iterable[Trajectory]) -> list[dict[str, Any]]:
    """One row per finished episode that submitted: what was submitted and how it scored."""
    rows = []
    for t in trajectories:
        s = t.summary
        if t.finished and s["submitted"]:
            rows.append({"policy": t.header["policy"], "task": t.header["task"], "condition": t.header["condition"],
                         "seed": t.header["seed"], "correct": s["correct"], "speedup": s["speedup"],
                         "reward": s["total_reward"], "steps": s["steps"], "code": s["submitted_code"]})
    return rows
