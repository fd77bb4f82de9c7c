"""Reports on a run directory, computed from its trajectory files and nothing else.

Per policy, task and guidance condition: episodes, correct ones, speedup over the PyTorch baseline,
that speedup as a fraction of the expert reference's, and the fraction of the roofline reached.
Per condition: the correctness rate and the Performance Score. Uplift from guidance: overall
(``none`` -> ``L1+L2+L3``) and per layer along the stacking ``none`` -> ``L1`` -> ``L1+L2`` ->
``L1+L2+L3``.

Definitions (applied everywhere, tables and plots alike):

- An episode is *correct* when it submitted and every workload passed on the secret inputs. Only
  ``finished`` episodes count; ``failed`` ones (the policy or the env raised) are listed apart.
- *Episode speedup*: the geometric mean over workloads of baseline time / solution time when
  correct; **1.0 when incorrect or never submitted**. A kernel that fails its checks is never
  deployed, so the operator keeps running at the baseline's speed. Counting it as 0 would make any
  geometric mean containing one failure 0 and hide everything else; dropping it would reward
  failing on hard tasks. Correctness is reported on its own. A correct kernel slower than the
  baseline keeps its measured speedup below 1: the score reports what the submissions deliver.
- Per task and condition, the *speedup* is the geometric mean of the episode speedups over seeds;
  the *correctness rate* of a condition is the mean over tasks of the fraction of correct episodes;
  its *Performance Score* is the geometric mean over tasks of the task speedups.
- *Fraction of the expert reference*: task speedup / the reference's geomean ``speedup_vs_eager``
  in the latest ``benchmarks/results/references-*.json``. *Fraction of roofline*: the mean over
  correct episodes of their geomean roofline fraction.
- On a backend that cannot time (the CPU interpreter) there are no speedups: every speed column
  and the Performance Score are reported as not measured, never estimated.
- Comparisons between conditions (uplift, the layer-stacking plot) are *paired*: computed only on
  the (task, seed) pairs finished under every condition compared, and they state how many pairs.
  Otherwise a condition run on fewer or easier tasks would look better or worse for that alone.
- A task x condition cell that never ran is shown as not run, never as a zero.
- Trajectories scored under different reward versions (:data:`d2k_env.reward.REWARD_VERSION`) are
  reported in separate sections, never averaged together, and the report warns that it mixes them.
- *Intervals over seeds*: each condition's correctness rate and Performance Score, each uplift's
  correctness delta and performance ratio, each per-layer property share and its uplift over
  ``none`` carry a 95% percentile interval from a cluster bootstrap over the run's seeds
  (:mod:`d2k_env.bootstrap`: a seed drawn brings all its tasks; 2000 resamples from a fixed
  generator, or every resample when there are few enough). A value resting on one seed has none and
  says ``one seed``; one whose statistic is undefined on too many resamples says ``no interval``.

Design properties (issue 30's per-layer table), per guidance condition (rows) and property layer
(L1/L2/L3, columns), over the condition's finished episodes, from what each summary recorded
(:func:`d2k_env.runner.property_records` and the judge's verdict):

- *Automatic*: of the properties a check settled on the submission, the share ``realised``; those
  it could not settle (the backend has no such measurement, nothing was submitted) are counted
  apart as unchecked, never guessed.
- *Judged*: of the properties the judge scored (those no check settled), the share ``realised``,
  with ``partly`` counted apart; properties left without a score (no judge, nothing submitted, a
  failed judge, an unusable answer) are counted apart as unjudged. Where both apply, the judge's
  blind agreement with the checks (``--judge-confirm``) is summed.
- *Uplift over none*: a condition's realised share minus that of ``none``, in percentage points,
  per layer, paired: both counted over the (task, seed) pairs with records under both.
- Design-only episodes (mode ``design``) have their own sections, with the per-layer table alone:
  nothing of a design runs, so every property is the judge's.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from d2k_env.bootstrap import LEVEL, RESAMPLES, Interval, seed_count, seed_intervals
from d2k_env.judge_prompt import SCORES
from d2k_env.runner import STACKING
from d2k_env.tasks.properties import LAYERS
from d2k_env.task import project_root
from d2k_env.trajectory import Trajectory, json_safe, load_run
from d2k_env.verdict import geomean
from d2k_env.wording import plural

NOT_MEASURED = "n/a"


def episode_speedup(trajectory: Trajectory) -> float | None:
    """The speedup an episode counts for (see the module docstring); ``None`` when nothing was timed."""
    if trajectory.header["backend"] != "cuda":
        return None
    s = trajectory.summary
    return s["speedup"] if s["correct"] and s["speedup"] is not None else 1.0


def latest_reference_results(root: Path | None = None) -> tuple[Path | None, dict[str, Any]]:
    """The newest ``benchmarks/results/references-*.json`` and its meta; ``(None, {})`` if none."""
    files = sorted((root or project_root()).glob("benchmarks/results/references-*.json"))
    if not files:
        return None, {}
    return files[-1], json.loads(files[-1].read_text())


def reference_speedups(data: dict[str, Any]) -> dict[str, float]:
    """Per task: the geometric mean over its workloads of the reference's ``speedup_vs_eager``."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for row in data.get("rows", []):
        if row.get("correct") and row.get("speedup_vs_eager"):
            by_task[row["task"]].append(row["speedup_vs_eager"])
    return {task: geomean(values) for task, values in by_task.items()}


@dataclass
class Cell:
    """One policy on one task under one guidance condition, over its finished episodes."""

    task: str
    condition: str
    episodes: int
    correct: int
    failed: int
    speedup: float | None
    speedup_when_correct: float | None
    reference_speedup: float | None
    reference_fraction: float | None
    roofline_fraction: float | None
    mean_steps: float
    mean_tokens: float

    @property
    def correct_rate(self) -> float:
        return self.correct / self.episodes if self.episodes else float("nan")


@dataclass
class ConditionSummary:
    condition: str
    tasks: int
    episodes: int
    correctness_rate: float
    performance_score: float | None
    speedup_when_correct: float | None
    seeds: int = 0  # distinct seeds among the episodes summarised
    correctness_interval: Interval | None = None  # over seeds (see the module docstring)
    performance_interval: Interval | None = None


Pair = tuple[str, int]  # (task, seed): the unit a paired comparison matches across conditions


@dataclass
class Uplift:
    """From one condition to another over ``pairs``: the (task, seed) pairs finished under both."""

    source: str
    target: str
    pairs: list[Pair]
    correctness_from: float
    correctness_to: float
    performance_from: float | None
    performance_to: float | None
    correctness_delta_interval: Interval | None = None  # over the pairs' seeds
    performance_ratio_interval: Interval | None = None

    @property
    def tasks(self) -> list[str]:
        return sorted({task for task, _ in self.pairs})

    @property
    def correctness_delta(self) -> float:
        return self.correctness_to - self.correctness_from

    @property
    def performance_ratio(self) -> float | None:
        if self.performance_from is None or self.performance_to is None:
            return None
        return self.performance_to / self.performance_from


@dataclass
class Stacking:
    """The layer stacking, paired: each stacking condition the policy ran (``conditions``), summarised
    over the same ``pairs``, those finished under every one of them. ``summaries`` is empty when no
    pair ran under all of them."""

    conditions: list[str]
    pairs: list[Pair]
    summaries: list[ConditionSummary]

    @property
    def tasks(self) -> list[str]:
        return sorted({task for task, _ in self.pairs})


@dataclass
class LayerCell:
    """One guidance condition's design properties of one layer, summed over its finished episodes:
    automatic findings (realised / not realised / unchecked) and judge scores (realised / partly /
    not / unjudged) kept apart (see the module docstring)."""

    condition: str
    layer: str
    episodes: int
    auto_realised: int = 0
    auto_not: int = 0
    auto_unchecked: int = 0
    judged_realised: int = 0
    judged_partly: int = 0
    judged_not: int = 0
    unjudged: int = 0
    seeds: int = 0  # distinct seeds among the episodes counted
    auto_interval: Interval | None = None  # of auto_share, over seeds
    judged_interval: Interval | None = None  # of judged_share, over seeds

    @property
    def auto_share(self) -> float | None:
        checked = self.auto_realised + self.auto_not
        return self.auto_realised / checked if checked else None

    @property
    def judged_share(self) -> float | None:
        scored = self.judged_realised + self.judged_partly + self.judged_not
        return self.judged_realised / scored if scored else None


@dataclass
class LayerUplift:
    """A condition's property shares against ``none``'s, per layer, paired: both counted over
    ``pairs``, the (task, seed) pairs with property records under both."""

    condition: str
    pairs: list[Pair]
    none: dict[str, LayerCell]
    cells: dict[str, LayerCell]
    intervals: dict[str, Interval | None] = field(default_factory=dict)  # f"{layer}_{share}" -> of delta, over seeds

    def delta(self, layer: str, share: str) -> float | None:
        """``share`` ("auto_share" or "judged_share") of ``layer`` minus that under none; None where
        either is n/a."""
        a, b = getattr(self.none[layer], share), getattr(self.cells[layer], share)
        return None if a is None or b is None else b - a


@dataclass
class PolicyReport:
    """One policy's results under one reward version (versions are never merged)."""

    policy: str
    reward_version: int | None  # None: recorded before reward versions were
    settings: dict[str, Any]
    gpu: str | None
    timed: bool
    cells: list[Cell]
    conditions: list[ConditionSummary]
    overall: Uplift | None
    per_layer: list[Uplift]
    stacking: Stacking
    failed: list[dict[str, Any]] = field(default_factory=list)
    label: str = ""  # how tables and plots name this section: the policy, and its reward version when mixed
    coverage: dict[str, list[Pair]] = field(default_factory=dict)  # condition -> its finished (task, seed) pairs
    mode: str = "solution"  # "design": design-only episodes (the per-layer property table alone)
    layers: list[LayerCell] = field(default_factory=list)
    agreement: dict[str, int] = field(default_factory=lambda: {"checked": 0, "agree": 0})
    judged: bool = False  # whether any episode carries a judge's verdict
    judge_errors: list[dict[str, Any]] = field(default_factory=list)  # episodes the judge gave no verdict on, why
    layer_uplift: list["LayerUplift"] = field(default_factory=list)

    @property
    def missing(self) -> list[tuple[str, str]]:
        """(task, condition) of the policy's task x condition grid that never ran at all."""
        ran = {(c.task, c.condition) for c in self.cells}
        tasks, conditions = sorted({t for t, _ in ran}), sorted({c for _, c in ran}, key=_condition_order)
        return [(t, c) for t in tasks for c in conditions if (t, c) not in ran]


@dataclass
class Report:
    run_dir: str
    policies: list[PolicyReport]
    reference_file: str | None
    reference_gpu: str | None

    @property
    def reward_versions(self) -> list[int | None]:
        """The distinct reward versions of the trajectories, ``None`` (unrecorded) last."""
        return sorted({p.reward_version for p in self.policies}, key=lambda v: (v is None, v or 0))

    @property
    def mixed_reward_versions(self) -> bool:
        return len(self.reward_versions) > 1

    def to_dict(self) -> dict[str, Any]:
        def uplift(u: Uplift | None):
            return None if u is None else {**asdict(u), "pairs": [list(pair) for pair in u.pairs], "tasks": u.tasks,
                                            "correctness_delta": u.correctness_delta,
                                            "performance_ratio": u.performance_ratio}

        return {"run_dir": self.run_dir, "reference_file": self.reference_file, "reference_gpu": self.reference_gpu,
                "intervals": {"resampled": "seeds", "level": LEVEL, "resamples": RESAMPLES},
                "reward_versions": self.reward_versions, "mixed_reward_versions": self.mixed_reward_versions,
                "policies": [{"policy": p.policy, "reward_version": p.reward_version, "settings": p.settings,
                              "gpu": p.gpu, "timed": p.timed,
                              "cells": [{**asdict(c), "correct_rate": c.correct_rate} for c in p.cells],
                              "missing": [{"task": t, "condition": c} for t, c in p.missing],
                              "conditions": [asdict(c) for c in p.conditions],
                              "uplift": {"overall": uplift(p.overall), "per_layer": [uplift(u) for u in p.per_layer]},
                              "stacking": {"conditions": p.stacking.conditions,
                                           "pairs": [list(pair) for pair in p.stacking.pairs],
                                           "summaries": [asdict(s) for s in p.stacking.summaries]},
                              "failed": p.failed, "mode": p.mode, "judged": p.judged, "agreement": p.agreement,
                              "judge_errors": p.judge_errors,
                              "property_uplift": [{"condition": u.condition, "pairs": [list(x) for x in u.pairs],
                                                   **{f"{layer}_{kind}": u.delta(layer, kind) for layer in LAYERS
                                                      for kind in SHARES},
                                                   **{f"{layer}_{kind}_interval": u.intervals.get(f"{layer}_{kind}")
                                                      for layer in LAYERS for kind in SHARES}}
                                                  for u in p.layer_uplift],
                              "property_layers": [{**asdict(c), "auto_share": c.auto_share,
                                                   "judged_share": c.judged_share} for c in p.layers]}
                             for p in self.policies]}


def _condition_order(condition: str) -> tuple[int, str]:
    return (STACKING.index(condition), "") if condition in STACKING else (len(STACKING), condition)


def reward_version_name(version: int | None) -> str:
    return "unrecorded" if version is None else str(version)


def build_report(run_dir: str | Path, reference_root: Path | None = None) -> Report:
    """Everything the tables and plots show, from the run's trajectory files.

    Trajectories scored under different reward versions are never averaged together: each
    (policy, reward version) gets its own section, and :attr:`Report.mixed_reward_versions` says so.
    """
    trajectories = load_run(run_dir)
    if not trajectories:
        raise ValueError(f"{run_dir} holds no finished episodes yet (episodes/ is empty): run `d2k run` first")
    ref_file, ref_data = latest_reference_results(reference_root)
    ref = reference_speedups(ref_data)
    groups: dict[tuple[str, str, int | None], list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        groups[(t.header["policy"], t.header.get("mode", "solution"), t.header.get("reward_version"))].append(t)
    policies = [_policy_report(policy, version, ts, ref, mode)
                for (policy, mode, version), ts in sorted(groups.items(), key=lambda kv: (
                    kv[0][0], kv[0][1] != "solution", kv[0][2] is None, kv[0][2] or 0))]
    report = Report(str(run_dir), policies, str(ref_file) if ref_file else None, ref_data.get("meta", {}).get("gpu"))
    for p in policies:
        p.label = p.policy + (" (designs)" if p.mode == "design" else "") + (
            f" (reward version {reward_version_name(p.reward_version)})" if report.mixed_reward_versions else "")
    return report


def _count_properties(cells: dict[tuple[str, str], LayerCell], t: Trajectory) -> None:
    """Adds a finished episode's property records and verdict to ``cells``, keyed (condition, layer)."""
    verdict = t.summary.get("judge") or {}
    scores = {v["id"]: v["score"] for v in verdict.get("properties", []) if v.get("source") == "judge"}
    condition = t.header["condition"]
    for layer in LAYERS:
        cells.setdefault((condition, layer), LayerCell(condition, layer, 0)).episodes += 1
    for r in t.summary["properties"]:
        cell = cells[(condition, r["layer"])]
        if r["status"] in ("realised", "not realised"):  # settled by its check: not the judge's
            cell.auto_realised += r["status"] == "realised"
            cell.auto_not += r["status"] == "not realised"
            continue
        cell.auto_unchecked += r["status"] == "unchecked"  # None: no check (or a design): the judge's alone
        score = scores.get(r["id"])
        cell.judged_realised += score == "realised"
        cell.judged_partly += score == "partly"
        cell.judged_not += score == "not"
        cell.unjudged += score not in SCORES


def _property_layers(trajectories: list[Trajectory]):
    """The per-layer cells of finished episodes (conditions in stacking order), the paired uplift of
    each condition over ``none``, the judge's summed agreement with the checks, whether any episode
    was judged, and the episodes the judge gave no verdict on with its reason. Episodes written
    before findings were recorded (no ``properties`` in their summary) count nowhere."""
    recorded: dict[str, dict[Pair, EpisodeCounts]] = defaultdict(dict)  # condition -> episodes with records
    agreement, judged, errors = {"checked": 0, "agree": 0}, False, []
    for t in trajectories:
        if not t.finished or t.summary.get("properties") is None:
            continue
        recorded[t.header["condition"]][(t.header["task"], t.header["seed"])] = _episode_counts(t)
        verdict = t.summary.get("judge") or {}
        if verdict.get("error"):
            errors.append({"task": t.header["task"], "condition": t.header["condition"], "seed": t.header["seed"],
                           "error": verdict["error"]})
        if verdict.get("properties") is not None:
            judged = True
            for k in agreement:
                agreement[k] += (verdict.get("agreement") or {}).get(k, 0)
    cells = [cell for condition, episodes in recorded.items() for cell in _condition_layers(condition, episodes)]
    ordered = sorted(cells, key=lambda c: (_condition_order(c.condition), c.layer))
    uplift = []
    for condition in sorted(set(recorded) - {"none"}, key=_condition_order):
        pairs = sorted(set(recorded[condition]) & set(recorded.get("none", {})))
        if not pairs:
            continue
        u = _layer_uplift(recorded["none"], recorded[condition], condition, pairs)
        keys = [(layer, share) for layer in LAYERS for share in SHARES]
        found = seed_intervals(pairs, lambda rs: [_layer_uplift(recorded["none"], recorded[condition], condition,
                                                                rs).delta(*key) for key in keys])
        u.intervals = {f"{layer}_{share}": interval for (layer, share), interval in zip(keys, found)}
        uplift.append(u)
    return ordered, uplift, agreement, judged, errors


SHARES = ("auto_share", "judged_share")  # the LayerCell shares, each with its interval
_COUNTS = ("auto_realised", "auto_not", "auto_unchecked", "judged_realised", "judged_partly", "judged_not", "unjudged")
EpisodeCounts = dict[str, tuple[int, ...]]  # layer -> one episode's LayerCell counts, in the order of _COUNTS


def _episode_counts(t: Trajectory) -> EpisodeCounts:
    """One finished episode's property counts per layer, counted once so that resamples only add them."""
    cells: dict[tuple[str, str], LayerCell] = {}
    _count_properties(cells, t)
    return {layer: tuple(getattr(cells[(t.header["condition"], layer)], name) for name in _COUNTS)
            for layer in LAYERS}


def _layer_cells(condition: str, episodes: dict[Pair, EpisodeCounts], pairs: list[Pair]) -> dict[str, LayerCell]:
    """Per layer, the condition's properties counted over the episodes of ``pairs`` (repeats count again)."""
    return {layer: LayerCell(condition, layer, len(pairs),
                             **{name: sum(column) for name, column in
                                zip(_COUNTS, zip(*(episodes[pair][layer] for pair in pairs)))})
            for layer in LAYERS}


def _condition_layers(condition: str, episodes: dict[Pair, EpisodeCounts]) -> list[LayerCell]:
    """``condition``'s per-layer cells, counted over its recorded ``episodes``, with the seed intervals
    of their shares."""
    pairs = sorted(episodes)
    cells = _layer_cells(condition, episodes, pairs)

    def shares(rs: list[Pair]) -> list[float | None]:
        counted = _layer_cells(condition, episodes, rs)
        return [getattr(counted[layer], share) for layer in LAYERS for share in SHARES]

    found = iter(seed_intervals(pairs, shares))
    for cell in cells.values():
        cell.seeds = seed_count(pairs)
        cell.auto_interval, cell.judged_interval = next(found), next(found)
    return list(cells.values())


def _layer_uplift(none: dict[Pair, EpisodeCounts], episodes: dict[Pair, EpisodeCounts], condition: str,
                  pairs: list[Pair]) -> LayerUplift:
    return LayerUplift(condition, pairs, _layer_cells("none", none, pairs), _layer_cells(condition, episodes, pairs))


def _policy_report(policy: str, version: int | None, trajectories: list[Trajectory],
                   ref: dict[str, float], mode: str = "solution") -> PolicyReport:
    first = trajectories[0].header
    layers, layer_uplift, agreement, judged, judge_errors = _property_layers(trajectories)
    settings = {k: first[k] for k in ("backend", "reward", "max_steps")}
    timed = settings["backend"] == "cuda"
    groups: dict[tuple[str, str], list[Trajectory]] = defaultdict(list)
    failed = []
    for t in trajectories:
        groups[(t.header["task"], t.header["condition"])].append(t)
        if not t.finished:
            failed.append({"task": t.header["task"], "condition": t.header["condition"], "seed": t.header["seed"],
                           "error": t.summary["error"], "file": t.path.name})
    cells = [_cell(task, condition, ts, ref.get(task) if timed else None)
             for (task, condition), ts in sorted(groups.items(), key=lambda kv: (kv[0][0], _condition_order(kv[0][1])))]
    conditions = sorted({c.condition for c in cells}, key=_condition_order)
    # A condition whose episodes all failed has no summary (its failures are listed below the table).
    finished = {cond: [c for c in cells if c.condition == cond and c.episodes] for cond in conditions}
    paired = _Paired(trajectories, ref if timed else {})
    summaries = [paired.with_intervals(_condition_summary(cond, finished[cond]), sorted(paired.done[cond]))
                 for cond in conditions if finished[cond]]
    present = [c for c in STACKING if finished.get(c)]
    overall = paired.uplift("none", "L1+L2+L3") if {"none", "L1+L2+L3"} <= set(present) else None
    per_layer = [paired.uplift(a, b) for a, b in zip(STACKING, STACKING[1:]) if a in present and b in present]
    return PolicyReport(policy, version, settings, first.get("gpu"), timed, cells, summaries, overall,
                        [u for u in per_layer if u is not None], paired.stacking(present), failed, policy,
                        {c: sorted(paired.done[c]) for c in conditions if paired.done.get(c)}, mode, layers,
                        agreement, judged, judge_errors, layer_uplift)


class _Paired:
    """Summaries of conditions restricted to the (task, seed) pairs they share, so that a difference
    between conditions never comes from comparing different tasks or seeds."""

    def __init__(self, trajectories: list[Trajectory], ref: dict[str, float]):
        self.ref = ref
        self.done: dict[str, dict[Pair, Trajectory]] = defaultdict(dict)  # condition -> finished episodes
        # condition -> pair -> (correct, episode speedup): all a resample's scores need, read once
        self.outcomes: dict[str, dict[Pair, tuple[bool, float | None]]] = defaultdict(dict)
        for t in trajectories:
            if t.finished:
                pair = (t.header["task"], t.header["seed"])
                self.done[t.header["condition"]][pair] = t
                self.outcomes[t.header["condition"]][pair] = (bool(t.summary["correct"]), episode_speedup(t))

    def pairs(self, conditions: list[str]) -> list[Pair]:
        common = set.intersection(*(set(self.done[c]) for c in conditions)) if conditions else set()
        return sorted(common)

    def summary(self, condition: str, pairs: list[Pair]) -> ConditionSummary:
        by_task: dict[str, list[Trajectory]] = defaultdict(list)
        for task, seed in pairs:
            by_task[task].append(self.done[condition][(task, seed)])
        return _condition_summary(condition, [_cell(task, condition, ts, self.ref.get(task))
                                              for task, ts in sorted(by_task.items())])

    def scores(self, condition: str, pairs: list[Pair]) -> tuple[float, float | None]:
        """The correctness rate and Performance Score of ``condition`` over ``pairs`` (a pair listed
        twice counts twice): those of :meth:`summary`, without the rest of it, for the resamples."""
        by_task: dict[str, list[tuple[bool, float | None]]] = defaultdict(list)
        for task, seed in pairs:
            by_task[task].append(self.outcomes[condition][(task, seed)])
        return _condition_scores([_task_outcome(outcomes) for outcomes in by_task.values()])

    def with_intervals(self, summary: ConditionSummary, pairs: list[Pair]) -> ConditionSummary:
        """``summary``, of its condition over ``pairs``, given its seed intervals."""
        summary.seeds = seed_count(pairs)
        summary.correctness_interval, summary.performance_interval = seed_intervals(
            pairs, lambda rs: self.scores(summary.condition, rs))
        return summary

    def _uplift(self, source: str, target: str, pairs: list[Pair]) -> Uplift:
        (rate_a, score_a), (rate_b, score_b) = self.scores(source, pairs), self.scores(target, pairs)
        return Uplift(source, target, pairs, rate_a, rate_b, score_a, score_b)

    def uplift(self, source: str, target: str) -> Uplift | None:
        pairs = self.pairs([source, target])
        if not pairs:
            return None
        u = self._uplift(source, target, pairs)

        def statistics(rs: list[Pair]) -> tuple[float, float | None]:
            r = self._uplift(source, target, rs)
            return r.correctness_delta, r.performance_ratio

        u.correctness_delta_interval, u.performance_ratio_interval = seed_intervals(pairs, statistics)
        return u

    def stacking(self, conditions: list[str]) -> Stacking:
        pairs = self.pairs(conditions)
        return Stacking(conditions, pairs,
                        [self.with_intervals(self.summary(c, pairs), pairs) for c in conditions] if pairs else [])


def _cell(task: str, condition: str, trajectories: list[Trajectory], reference: float | None) -> Cell:
    done = [t for t in trajectories if t.finished]
    correct = [t for t in done if t.summary["correct"]]
    speedup = _task_outcome([(bool(t.summary["correct"]), episode_speedup(t)) for t in done])[1] if done else None
    correct_speedups = [t.summary["speedup"] for t in correct if t.summary["speedup"] is not None]
    roofline = [t.summary["roofline_fraction"] for t in correct if t.summary["roofline_fraction"] is not None]
    return Cell(task, condition, len(done), len(correct), len(trajectories) - len(done), speedup,
                geomean(correct_speedups) if correct_speedups else None, reference,
                speedup / reference if speedup is not None and reference else None,
                sum(roofline) / len(roofline) if roofline else None,
                sum(t.summary["steps"] for t in done) / len(done) if done else float("nan"),
                sum(t.summary["tokens"]["total_tokens"] for t in done) / len(done) if done else float("nan"))


def _task_outcome(episodes: list[tuple[bool, float | None]]) -> tuple[float, float | None]:
    """A task's correct rate and speedup (geomean of the episode speedups; None when any went
    untimed) from its finished episodes' (correct, episode speedup)."""
    speedups = [s for _, s in episodes]
    return sum(c for c, _ in episodes) / len(episodes), geomean(speedups) if None not in speedups else None


def _condition_scores(tasks: list[tuple[float, float | None]]) -> tuple[float, float | None]:
    """A condition's correctness rate (mean over tasks) and Performance Score (geomean over tasks;
    None when a task's speed was not measured) from its tasks' (correct rate, speedup)."""
    speedups = [s for _, s in tasks]
    return sum(r for r, _ in tasks) / len(tasks), geomean(speedups) if speedups and None not in speedups else None


def _condition_summary(condition: str, cells: list[Cell]) -> ConditionSummary:
    when_correct = [c.speedup_when_correct for c in cells if c.speedup_when_correct is not None]
    return ConditionSummary(condition, len(cells), sum(c.episodes for c in cells),
                            *_condition_scores([(c.correct_rate, c.speedup) for c in cells]),
                            geomean(when_correct) if when_correct else None)


# -- rendering -----------------------------------------------------------------------------------

def _x(v: float | None) -> str:
    return NOT_MEASURED if v is None else f"{v:.2f}x"


def _pct(v: float | None) -> str:
    return NOT_MEASURED if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.0f}%"


def _num(v: float, spec: str) -> str:
    return "-" if math.isnan(v) else format(v, spec)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def _pairs(pairs: list[Pair]) -> str:
    return f"{len(pairs)} ({plural(len({task for task, _ in pairs}), 'task')})"


def mixed_versions_warning(report: Report) -> str | None:
    """The warning a report mixing reward versions opens with; ``None`` when it does not mix them."""
    if not report.mixed_reward_versions:
        return None
    names = ", ".join(reward_version_name(v) for v in report.reward_versions)
    return (f"WARNING: these trajectories were scored under different reward versions ({names}). Scores of "
            "different versions are not comparable: each version has its own sections below, and nothing is "
            "averaged across versions. Compare only sections of the same reward version.")


def _pct_ends(lo: float, hi: float) -> str:
    return f"[{100 * lo:.0f}-{100 * hi:.0f}%]"


def _x_ends(lo: float, hi: float) -> str:
    return f"[{lo:.2f}-{hi:.2f}x]"


def _ratio_ends(lo: float, hi: float) -> str:
    return f"[x{lo:.2f}-x{hi:.2f}]"


def _pp_ends(lo: float, hi: float) -> str:
    return f"[{100 * lo:+.0f} to {100 * hi:+.0f} pp]"


def _no_interval(seeds: int) -> str:
    """Why a value has no seed interval: it rests on one seed, or the statistic was undefined on too
    many resamples."""
    return "one seed" if seeds < 2 else "no interval"


def _with_interval(text: str, interval: Interval | None, seeds: int, ends) -> str:
    """``text`` (a formatted value) followed by its seed interval (``ends`` formats it: ``[lo-hi]``)
    or why it has none; a value n/a stays bare."""
    if text == NOT_MEASURED:
        return text
    return f"{text} {ends(*interval) if interval is not None else f'({_no_interval(seeds)})'}"


def _share(share: float | None, counted: int, total: int, *apart: str, interval: Interval | None = None,
           seeds: int = 0) -> str:
    notes = [f"{counted}/{total}", *(a for a in apart if not a.startswith("0 "))]
    if share is None:
        return f"{_pct(share)} ({'; '.join(notes)})"
    if interval is None:  # said among the counts rather than in a second pair of brackets
        return f"{_pct(share)} ({'; '.join([*notes, _no_interval(seeds)])})"
    return f"{_pct(share)} {_pct_ends(*interval)} ({'; '.join(notes)})"


def _pp(delta: float | None) -> str:
    return NOT_MEASURED if delta is None else f"{100 * delta:+.0f} pp"


def _layer_sections(p: PolicyReport) -> list[str]:
    """The per-layer design-property tables of one section (see the module docstring)."""
    lines = ["### Design properties per layer", ""]
    if not p.layers:
        return lines + ["No finished episode recorded design-property findings (trajectories written before "
                        "d2k-env recorded them, or no episode finished).", ""]
    conditions = list(dict.fromkeys(c.condition for c in p.layers))
    by = {(c.condition, c.layer): c for c in p.layers}
    header = ["condition", "episodes", *LAYERS]
    if p.mode == "design":
        lines += ["Nothing of a design runs: every property is the judge's.", ""]
    else:
        lines += ["Automatic checks on the submission: share realised of the properties a check settled "
                  "(realised/settled; unchecked apart, never guessed).", ""]
        lines += _table(header, [[cond, str(by[(cond, LAYERS[0])].episodes),
                                  *(_share(c.auto_share, c.auto_realised, c.auto_realised + c.auto_not,
                                           f"{c.auto_unchecked} unchecked", interval=c.auto_interval, seeds=c.seeds)
                                    for c in (by[(cond, layer)] for layer in LAYERS))] for cond in conditions])
        lines.append("")
    if p.judge_errors:
        first = p.judge_errors[0]
        lines += [f"The judge gave no verdict on {plural(len(p.judge_errors), 'episode')} (their properties count as "
                  f"unjudged), e.g. {first['task']} [{first['condition']}] seed {first['seed']}: "
                  f"{first['error'].splitlines()[0][:160]}", ""]
    if not p.judged:
        lines += ["Judge: no episode was judged; `d2k run ... --judge-model NAME` scores the properties no check "
                  "settles.", ""]
    else:
        lines += ["Judge: share realised of the properties it scored (realised/scored; partly and unjudged apart).", ""]
        lines += _table(header, [[cond, str(by[(cond, LAYERS[0])].episodes),
                                  *(_share(c.judged_share, c.judged_realised,
                                           c.judged_realised + c.judged_partly + c.judged_not,
                                           f"{c.judged_partly} partly", f"{c.unjudged} unjudged",
                                           interval=c.judged_interval, seeds=c.seeds)
                                    for c in (by[(cond, layer)] for layer in LAYERS))] for cond in conditions])
        lines.append("")
        if p.agreement["checked"]:
            lines += [f"Judge agreement with the automatic checks (asked blind): {p.agreement['agree']} of "
                      f"{p.agreement['checked']}.", ""]
    kinds = ([] if p.mode == "design" else [("automatic", "auto_share")]) + (
        [("judged", "judged_share")] if p.judged else [])
    if p.layer_uplift and kinds:
        lines += ["Uplift over none, per property layer (realised share minus that under none, paired: over the "
                  "(task, seed) pairs recorded under both):", ""]
        lines += _table(["condition", "(task, seed) pairs",
                         *(f"{layer} {kind}" for layer in LAYERS for kind, _ in kinds)],
                        [[u.condition, _pairs(u.pairs),
                          *(_with_interval(_pp(u.delta(layer, attr)), u.intervals.get(f"{layer}_{attr}"),
                                           seed_count(u.pairs), _pp_ends)
                            for layer in LAYERS for _, attr in kinds)] for u in p.layer_uplift])
        lines.append("")
    return lines


def to_markdown(report: Report) -> str:
    lines = [f"# d2k report: {report.run_dir}", ""]
    if warning := mixed_versions_warning(report):
        lines += [f"> **{warning}**", ""]
    for p in report.policies:
        if p.mode == "design":
            lines += [f"## Policy `{p.policy}`, design-only episodes"
                      + (f", reward version {reward_version_name(p.reward_version)}"
                         if report.mixed_reward_versions else ""), "",
                      f"{sum(c.episodes for c in p.layers if c.layer == LAYERS[0])} finished episodes, "
                      f"{len(p.failed)} failed; at most {p.settings['max_steps']} steps per episode. A design is "
                      "graded by the judge alone and never rewarded.", ""]
            lines += _layer_sections(p)
            lines += _failed_section(p)
            continue
        lines += [f"## Policy `{p.policy}`" + (f", reward version {reward_version_name(p.reward_version)}"
                                              if report.mixed_reward_versions else ""), "",
                  f"Backend {p.settings['backend']}{f' ({p.gpu})' if p.gpu else ''}, reward {p.settings['reward']} "
                  f"(reward version {reward_version_name(p.reward_version)}), "
                  f"at most {p.settings['max_steps']} steps per episode; "
                  f"{sum(c.episodes for c in p.cells)} finished episodes, {len(p.failed)} failed.", ""]
        if not p.timed:
            lines += [f"Speeds not measured: the {p.settings['backend']} backend checks correctness only, so "
                      "speedups, fractions of the expert reference and of the roofline, and the Performance "
                      f"Score are {NOT_MEASURED}.", ""]
        elif report.reference_gpu and p.gpu and report.reference_gpu not in p.gpu:
            lines += [f"Expert reference speedups were measured on {report.reference_gpu}, this run on {p.gpu}: "
                      "their ratio compares different machines.", ""]
        lines += ["### Per task and condition", ""]
        header = ["task", "condition", "correct", "speedup", "speedup when correct", "of expert ref", "of roofline",
                  "mean steps", "mean tokens"]
        rows = {(c.task, c.condition): [c.task, c.condition,
                                        f"{c.correct}/{c.episodes}" + (f" ({c.failed} failed)" if c.failed else ""),
                                        _x(c.speedup), _x(c.speedup_when_correct), _pct(c.reference_fraction),
                                        _pct(c.roofline_fraction), _num(c.mean_steps, ".1f"),
                                        _num(c.mean_tokens, ".0f")] for c in p.cells}
        # A cell never run is a row that says so: its absence must not read as a zero elsewhere.
        rows.update({(t, c): [t, c, "not run"] + ["-"] * (len(header) - 3) for t, c in p.missing})
        lines += _table(header, [rows[k] for k in sorted(rows, key=lambda k: (k[0], _condition_order(k[1])))])
        lines += ["", "### Summary per condition", ""]
        lines += _table(["condition", "tasks", "episodes", "correctness rate", "Performance Score",
                         "speedup when correct"],
                        [[s.condition, str(s.tasks), str(s.episodes),
                          _with_interval(_pct(s.correctness_rate), s.correctness_interval, s.seeds, _pct_ends),
                          _with_interval(_x(s.performance_score), s.performance_interval, s.seeds, _x_ends),
                          _x(s.speedup_when_correct)] for s in p.conditions])
        if len({frozenset(pairs) for pairs in p.coverage.values()}) > 1:
            lines += ["", "These conditions ran on different tasks or seeds: each row averages over its own "
                          "episodes, so rows are not comparable. Compare conditions through the paired uplift below."]
        lines += ["", "### Uplift from guidance (paired)", ""]
        uplifts = ([("overall", p.overall)] if p.overall else []) + [("per layer", u) for u in p.per_layer]
        if uplifts:
            lines += _table(["", "from", "to", "(task, seed) pairs", "correctness rate", "Performance Score"],
                            [[kind, u.source, u.target, _pairs(u.pairs),
                              f"{_pct(u.correctness_from)} -> {_pct(u.correctness_to)}: "
                              + _with_interval(_pp(u.correctness_delta), u.correctness_delta_interval,
                                               seed_count(u.pairs), _pp_ends),
                              NOT_MEASURED if u.performance_ratio is None else
                              f"{_x(u.performance_from)} -> {_x(u.performance_to)}: "
                              + _with_interval(f"x{u.performance_ratio:.2f}", u.performance_ratio_interval,
                                               seed_count(u.pairs), _ratio_ends)]
                             for kind, u in uplifts])
            if len(p.per_layer) < 3:
                lines += ["", "Per-layer uplift needs every stacking condition run on common tasks and seeds: "
                              "`d2k run ... --guidance none L1 L1+L2 L1+L2+L3`."]
        else:
            lines += ["No two guidance conditions of the stacking none -> L1 -> L1+L2 -> L1+L2+L3 share a "
                      "(task, seed) pair yet."]
        if len(p.stacking.conditions) > 1:
            lines += ["", f"Layer stacking plot ({', '.join(p.stacking.conditions)}): "
                          + (f"paired over {plural(len(p.stacking.pairs), '(task, seed) pair')} "
                             f"({plural(len(p.stacking.tasks), 'task')}), those every one of these conditions ran."
                             if p.stacking.pairs else
                             "no (task, seed) pair ran under every one of these conditions, so nothing is drawn.")]
        lines += ["", *_layer_sections(p)]
        lines += _failed_section(p)
    lines += ["## Definitions", "",
              "An episode is correct when it submitted and every workload passed on fresh secret inputs. Episode "
              "speedup: the geometric mean over workloads of baseline time / solution time when correct, and 1.0 "
              "when incorrect or never submitted (a failing kernel is not deployed, so the baseline keeps running). "
              "Task speedup: geometric mean over seeds. Correctness rate: mean over tasks of the fraction of correct "
              "episodes. Performance Score: geometric mean over tasks of the task speedups. Uplift and the layer "
              "stacking are paired: they compare conditions only on the (task, seed) pairs finished under every "
              f"condition compared. Intervals are {LEVEL:.0%} percentile intervals over seeds: a cluster bootstrap "
              f"({RESAMPLES} resamples of the run's seeds with replacement, or every possible one when they are "
              "fewer; a drawn seed brings every task it ran), shown as `value [low-high]`; a value resting on one "
              "seed says `one seed`, one undefined on too many resamples `no interval`. A cell never run is shown "
              "as not run, never as zero. Trajectories of different "
              "reward versions are reported apart, never averaged together. Expert reference: "
              f"{report.reference_file or 'no benchmarks/results/references-*.json found'}.", "",
              "Design properties per layer: per guidance condition and property layer, over the condition's "
              "finished episodes. Automatic: the share realised of the properties a check settled on the "
              "submission; unchecked ones (no such measurement on the backend, nothing submitted) are counted "
              "apart, never guessed. Judged: the share realised of the properties the judge scored (those no "
              "check settled), partly and unjudged counted apart. Their uplift over none is paired, over the (task, "
              "seed) pairs recorded under both conditions. The judge is a model reading the code or "
              "design: its scores are not measurements, and never change the reward.", ""]
    return "\n".join(lines)


def _failed_section(p: PolicyReport) -> list[str]:
    if not p.failed:
        return []
    return ["### Failed episodes (run `d2k run` again to retry them)", "",
            *_table(["task", "condition", "seed", "error"],
                    [[f["task"], f["condition"], str(f["seed"]), (f["error"] or "").splitlines()[0][:120]]
                     for f in p.failed]), ""]


def write_plots(report: Report, out_dir: Path) -> list[Path]:
    """``guidance_pairs.png`` (per task, bars per condition) and ``layer_stacking.png`` (paired), for
    the sections of solution episodes; ``property_layers.png`` (realised share per property layer,
    bars per condition) for every section with property findings. The stacking and property plots
    draw each value's seed interval, where it has one, as a vertical line.

    A cell never run gets no bar but a ``not run`` mark (``failed`` when every episode failed): a
    zero-height bar would read as a measured zero. Matplotlib is the ``agents`` extra's: an
    ImportError without it.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    solutions = [p for p in report.policies if p.mode == "solution"]
    if solutions:
        paths += _solution_plots(plt, solutions, out_dir)
    if any(p.layers for p in report.policies):
        paths.append(_property_plot(plt, [p for p in report.policies if p.layers], out_dir))
    return paths


def _property_plot(plt, policies: list[PolicyReport], out_dir: Path) -> Path:
    """Per section, the realised share per property layer, a bar per guidance condition: automatic
    (solution episodes) and judged side by side, with the seed interval as a vertical line where
    there is one. A share with nothing settled or scored gets an ``n/a`` mark, not a bar."""
    kinds = [("auto_share", "automatic checks"), ("judged_share", "judge")]
    intervals = {"auto_share": "auto_interval", "judged_share": "judged_interval"}
    fig, axes = plt.subplots(len(policies), len(kinds), squeeze=False, figsize=(13, 3.8 * len(policies)))
    for row, p in zip(axes, policies):
        conditions = list(dict.fromkeys(c.condition for c in p.layers))
        by = {(c.condition, c.layer): c for c in p.layers}
        width = 0.8 / max(len(conditions), 1)
        for ax, (attr, label) in zip(row, kinds):
            for i, cond in enumerate(conditions):
                drawn = []
                for j, layer in enumerate(LAYERS):
                    x = j + (i - (len(conditions) - 1) / 2) * width
                    value = getattr(by[(cond, layer)], attr)
                    if value is None:
                        ax.text(x, 0, f"{cond}: {NOT_MEASURED}", rotation=90, ha="center", va="bottom", fontsize=6,
                                color="gray")
                    else:
                        drawn.append((x, value, getattr(by[(cond, layer)], intervals[attr])))
                bars = ax.bar([x for x, _, _ in drawn], [v for _, v, _ in drawn], width, label=cond, color=f"C{i}")
                ax.bar_label(bars, fmt="%.2f", fontsize=7)
                _error_bars(ax, [(x, iv) for x, _, iv in drawn])
            ax.set_xticks(range(len(LAYERS)), [f"{layer} properties" for layer in LAYERS], fontsize=8)
            ax.set_xlim(-0.5, len(LAYERS) - 0.5)
            ax.set_ylim(0, 1.12)
            ax.set_ylabel("share realised")
            note = (" (designs: nothing runs)" if p.mode == "design" and attr == "auto_share" else
                    " (no episode judged)" if attr == "judged_share" and not p.judged else "")
            ax.set_title(f"{p.label}: {label}{note}", fontsize=9)
        row[-1].legend(fontsize=7, title="guidance", title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    path = out_dir / "property_layers.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _error_bars(ax, points: list[tuple[float, Interval | None]], color: str = "black") -> None:
    """A vertical line from the low to the high end of each seed interval, at its x; none where
    there is no interval. Drawn as lines between the ends, not as errors around the value: a
    percentile interval need not contain the value it is for."""
    drawn = [(x, interval) for x, interval in points if interval is not None]
    if drawn:
        ax.vlines([x for x, _ in drawn], [lo for _, (lo, _) in drawn], [hi for _, (_, hi) in drawn], colors=color,
                  linewidth=1, label="_seed intervals")


def _solution_plots(plt, policies: list[PolicyReport], out_dir: Path) -> list[Path]:
    timed = any(p.timed for p in policies)
    metrics = [("correct_rate", "correctness rate")] + ([("speedup", "speedup over baseline")] if timed else [])
    paths = []

    fig, axes = plt.subplots(len(policies), len(metrics), squeeze=False,
                             figsize=(6.5 * len(metrics), 3.8 * len(policies)))
    for row, p in zip(axes, policies):
        tasks = sorted({c.task for c in p.cells})
        conditions = [s.condition for s in p.conditions]
        width = 0.8 / max(len(conditions), 1)
        for ax, (attr, label) in zip(row, metrics):
            for i, cond in enumerate(conditions):
                cells = {c.task: c for c in p.cells if c.condition == cond}
                drawn = []
                for j, task in enumerate(tasks):
                    x = j + (i - (len(conditions) - 1) / 2) * width
                    cell = cells.get(task)
                    value = getattr(cell, attr) if cell is not None and cell.episodes else None
                    if value is None:
                        mark = "not run" if cell is None else "failed" if not cell.episodes else NOT_MEASURED
                        ax.text(x, 0, f"{cond}: {mark}", rotation=90, ha="center", va="bottom", fontsize=6,
                                color="gray")
                    else:
                        drawn.append((x, value))
                bars = ax.bar([x for x, _ in drawn], [v for _, v in drawn], width, label=cond, color=f"C{i}")
                ax.bar_label(bars, fmt="%.2f", fontsize=7)
            ax.set_xticks(range(len(tasks)), tasks, rotation=15, fontsize=8)
            ax.set_ylabel(label)
            ax.margins(y=0.12)
            if attr == "correct_rate":
                ax.set_ylim(0, 1.12)
            else:
                ax.axhline(1.0, color="gray", lw=0.8, ls="--")
            ax.set_title(f"{p.label}: {label}" + ("" if p.timed or attr != "correct_rate"
                                                   else " (speed not measured on this backend)"), fontsize=9)
        row[-1].legend(fontsize=7, title="guidance", title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    paths.append(out_dir / "guidance_pairs.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(metrics), squeeze=False, figsize=(6.5 * len(metrics), 4.2))
    for ax, (attr, label) in zip(axes[0], [("correctness_rate", "correctness rate"),
                                             ("performance_score", "Performance Score")][:len(metrics)]):
        notes = []
        for p in policies:
            st = p.stacking
            not_run = [c for c in STACKING if c not in st.conditions]
            suffix = f"; not run: {', '.join(not_run)}" if not_run else ""
            interval = "correctness_interval" if attr == "correctness_rate" else "performance_interval"
            points = [(STACKING.index(s.condition), getattr(s, attr), getattr(s, interval)) for s in st.summaries
                      if getattr(s, attr) is not None]
            if not points:
                notes.append(f"{p.label}: no (task, seed) pair ran under every condition{suffix}" if not st.pairs
                             else f"{p.label}: {label} not measured")
                continue
            [line] = ax.plot([x for x, _, _ in points], [v for _, v, _ in points], marker="o",
                             label=f"{p.label}: {plural(len(st.pairs), '(task, seed) pair')}, "
                                   f"{plural(len(st.tasks), 'task')}{suffix}")
            _error_bars(ax, [(x, iv) for x, _, iv in points], line.get_color())
            for x, v, _ in points:
                ax.annotate(f"{v:.2f}", (x, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
        for n, note in enumerate(notes):
            ax.text(0.01, 0.02 + 0.06 * n, note, transform=ax.transAxes, fontsize=7, color="gray")
        ax.set_xticks(range(len(STACKING)), STACKING)
        ax.set_xlim(-0.5, len(STACKING) - 0.5)
        ax.set_xlabel("guidance layers shown (cumulative)")
        ax.set_ylabel(label)
        if attr == "correctness_rate":
            ax.set_ylim(0, 1.12)
        else:
            ax.set_ylim(bottom=0)
        ax.set_title(f"layer stacking, paired over the (task, seed) pairs every condition ran: {label}", fontsize=8)
        if ax.get_lines():
            ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(out_dir / "layer_stacking.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def write_report(run_dir: str | Path, out_dir: str | Path | None = None,
                 plots: bool = True) -> tuple[Report, list[Path]]:
    """Write ``report.md``, ``report.json`` and (``plots``) the PNG plots, into the run directory by
    default. The tables are written first: without matplotlib they are there when the plots' ImportError
    is raised."""
    report = build_report(run_dir)
    out = Path(out_dir or run_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(to_markdown(report))
    (out / "report.json").write_text(json.dumps(json_safe(report.to_dict()), indent=2, allow_nan=False) + "\n")
    return report, [out / "report.md", out / "report.json", *(write_plots(report, out) if plots else [])]
