"""Reports on a run directory, computed from its trajectory files and nothing else.

Per policy, task and guidance condition: episodes, correct ones, speedup over the PyTorch baseline,
that speedup as a fraction of the expert reference's, and the fraction of the roofline reached.
Per condition: the correctness rate and the Performance Score. Uplift from guidance: overall
(``none`` -> ``L1+L2+L3``) and per layer along the stacking ``none`` -> ``L1`` -> ``L1+L2`` ->
``L1+L2+L3``, paired over the tasks present in both conditions compared.

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
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from d2k_env.runner import STACKING
from d2k_env.task import project_root
from d2k_env.trajectory import Trajectory, json_safe, load_run
from d2k_env.verdict import geomean

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


@dataclass
class Uplift:
    """From one condition to another, over the tasks both have."""

    source: str
    target: str
    tasks: list[str]
    correctness_from: float
    correctness_to: float
    performance_from: float | None
    performance_to: float | None

    @property
    def correctness_delta(self) -> float:
        return self.correctness_to - self.correctness_from

    @property
    def performance_ratio(self) -> float | None:
        if self.performance_from is None or self.performance_to is None:
            return None
        return self.performance_to / self.performance_from


@dataclass
class PolicyReport:
    policy: str
    settings: dict[str, Any]
    gpu: str | None
    timed: bool
    cells: list[Cell]
    conditions: list[ConditionSummary]
    overall: Uplift | None
    per_layer: list[Uplift]
    failed: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Report:
    run_dir: str
    policies: list[PolicyReport]
    reference_file: str | None
    reference_gpu: str | None

    def to_dict(self) -> dict[str, Any]:
        def uplift(u: Uplift | None):
            return None if u is None else {**asdict(u), "correctness_delta": u.correctness_delta,
                                            "performance_ratio": u.performance_ratio}

        return {"run_dir": self.run_dir, "reference_file": self.reference_file, "reference_gpu": self.reference_gpu,
                "policies": [{"policy": p.policy, "settings": p.settings, "gpu": p.gpu, "timed": p.timed,
                              "cells": [{**asdict(c), "correct_rate": c.correct_rate} for c in p.cells],
                              "conditions": [asdict(c) for c in p.conditions],
                              "uplift": {"overall": uplift(p.overall), "per_layer": [uplift(u) for u in p.per_layer]},
                              "failed": p.failed} for p in self.policies]}


def _condition_order(condition: str) -> tuple[int, str]:
    return (STACKING.index(condition), "") if condition in STACKING else (len(STACKING), condition)


def build_report(run_dir: str | Path, reference_root: Path | None = None) -> Report:
    """Everything the tables and plots show, from the run's trajectory files."""
    trajectories = load_run(run_dir)
    if not trajectories:
        raise ValueError(f"{run_dir} holds no finished episodes yet (episodes/ is empty): run `d2k run` first")
    ref_file, ref_data = latest_reference_results(reference_root)
    ref = reference_speedups(ref_data)
    by_policy: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        by_policy[t.header["policy"]].append(t)
    policies = [_policy_report(name, ts, ref) for name, ts in sorted(by_policy.items())]
    return Report(str(run_dir), policies, str(ref_file) if ref_file else None, ref_data.get("meta", {}).get("gpu"))


def _policy_report(policy: str, trajectories: list[Trajectory], ref: dict[str, float]) -> PolicyReport:
    first = trajectories[0].header
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
    cells = [c for c in cells if c.episodes or c.failed]
    conditions = sorted({c.condition for c in cells}, key=_condition_order)
    # A condition whose episodes all failed has no summary (its failures are listed below the table).
    finished = {cond: [c for c in cells if c.condition == cond and c.episodes] for cond in conditions}
    summaries = [_condition_summary(cond, finished[cond]) for cond in conditions if finished[cond]]
    present = [c for c in STACKING if any(s.condition == c and s.episodes for s in summaries)]
    overall = _uplift(cells, "none", "L1+L2+L3") if {"none", "L1+L2+L3"} <= set(present) else None
    per_layer = [_uplift(cells, a, b) for a, b in zip(STACKING, STACKING[1:]) if a in present and b in present]
    return PolicyReport(policy, settings, first.get("gpu"), timed, cells, summaries, overall,
                        [u for u in per_layer if u is not None], failed)


def _cell(task: str, condition: str, trajectories: list[Trajectory], reference: float | None) -> Cell:
    done = [t for t in trajectories if t.finished]
    correct = [t for t in done if t.summary["correct"]]
    speedups = [episode_speedup(t) for t in done]
    speedup = geomean(speedups) if done and None not in speedups else None
    correct_speedups = [t.summary["speedup"] for t in correct if t.summary["speedup"] is not None]
    roofline = [t.summary["roofline_fraction"] for t in correct if t.summary["roofline_fraction"] is not None]
    return Cell(task, condition, len(done), len(correct), len(trajectories) - len(done), speedup,
                geomean(correct_speedups) if correct_speedups else None, reference,
                speedup / reference if speedup is not None and reference else None,
                sum(roofline) / len(roofline) if roofline else None,
                sum(t.summary["steps"] for t in done) / len(done) if done else float("nan"),
                sum(t.summary["tokens"]["total_tokens"] for t in done) / len(done) if done else float("nan"))


def _condition_summary(condition: str, cells: list[Cell]) -> ConditionSummary:
    speedups = [c.speedup for c in cells]
    when_correct = [c.speedup_when_correct for c in cells if c.speedup_when_correct is not None]
    return ConditionSummary(condition, len(cells), sum(c.episodes for c in cells),
                            sum(c.correct_rate for c in cells) / len(cells),
                            geomean(speedups) if speedups and None not in speedups else None,
                            geomean(when_correct) if when_correct else None)


def _uplift(cells: list[Cell], source: str, target: str) -> Uplift | None:
    a = {c.task: c for c in cells if c.condition == source and c.episodes}
    b = {c.task: c for c in cells if c.condition == target and c.episodes}
    tasks = sorted(a.keys() & b.keys())
    if not tasks:
        return None
    ca, cb = _condition_summary(source, [a[t] for t in tasks]), _condition_summary(target, [b[t] for t in tasks])
    return Uplift(source, target, tasks, ca.correctness_rate, cb.correctness_rate, ca.performance_score,
                  cb.performance_score)


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


def to_markdown(report: Report) -> str:
    lines = [f"# d2k report: {report.run_dir}", ""]
    for p in report.policies:
        lines += [f"## Policy `{p.policy}`", "",
                  f"Backend {p.settings['backend']}{f' ({p.gpu})' if p.gpu else ''}, reward {p.settings['reward']}, "
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
        lines += _table(["task", "condition", "correct", "speedup", "speedup when correct", "of expert ref",
                         "of roofline", "mean steps", "mean tokens"],
                        [[c.task, c.condition, f"{c.correct}/{c.episodes}" + (f" ({c.failed} failed)" if c.failed else ""),
                          _x(c.speedup), _x(c.speedup_when_correct), _pct(c.reference_fraction),
                          _pct(c.roofline_fraction), _num(c.mean_steps, ".1f"), _num(c.mean_tokens, ".0f")]
                         for c in p.cells])
        lines += ["", "### Summary per condition", ""]
        lines += _table(["condition", "tasks", "episodes", "correctness rate", "Performance Score",
                         "speedup when correct"],
                        [[s.condition, str(s.tasks), str(s.episodes), _pct(s.correctness_rate),
                          _x(s.performance_score), _x(s.speedup_when_correct)] for s in p.conditions])
        lines += ["", "### Uplift from guidance", ""]
        uplifts = ([("overall", p.overall)] if p.overall else []) + [("per layer", u) for u in p.per_layer]
        if uplifts:
            lines += _table(["", "from", "to", "tasks", "correctness rate", "Performance Score"],
                            [[kind, u.source, u.target, str(len(u.tasks)),
                              f"{_pct(u.correctness_from)} -> {_pct(u.correctness_to)} "
                              f"({100 * u.correctness_delta:+.0f} pp)",
                              NOT_MEASURED if u.performance_ratio is None else
                              f"{_x(u.performance_from)} -> {_x(u.performance_to)} (x{u.performance_ratio:.2f})"]
                             for kind, u in uplifts])
            if len(p.per_layer) < 3:
                lines += ["", "Per-layer uplift needs every stacking condition: "
                              "`d2k run ... --guidance none L1 L1+L2 L1+L2+L3`."]
        else:
            lines += ["No two guidance conditions of the stacking none -> L1 -> L1+L2 -> L1+L2+L3 share a task yet."]
        if p.failed:
            lines += ["", "### Failed episodes (run `d2k run` again to retry them)", ""]
            lines += _table(["task", "condition", "seed", "error"],
                            [[f["task"], f["condition"], str(f["seed"]), (f["error"] or "").splitlines()[0][:120]]
                             for f in p.failed])
        lines.append("")
    lines += ["## Definitions", "",
              "An episode is correct when it submitted and every workload passed on fresh secret inputs. Episode "
              "speedup: the geometric mean over workloads of baseline time / solution time when correct, and 1.0 "
              "when incorrect or never submitted (a failing kernel is not deployed, so the baseline keeps running). "
              "Task speedup: geometric mean over seeds. Correctness rate: mean over tasks of the fraction of correct "
              "episodes. Performance Score: geometric mean over tasks of the task speedups. Uplift compares two "
              "conditions on the tasks both have. Expert reference: "
              f"{report.reference_file or 'no benchmarks/results/references-*.json found'}.", ""]
    return "\n".join(lines)


def write_plots(report: Report, out_dir: Path) -> list[Path]:
    """``guidance_pairs.png`` (per task, bars per condition) and ``layer_stacking.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = any(p.timed for p in report.policies)
    metrics = [("correct_rate", "correctness rate")] + ([("speedup", "speedup over baseline")] if timed else [])
    paths = []

    fig, axes = plt.subplots(len(report.policies), len(metrics), squeeze=False,
                             figsize=(6.5 * len(metrics), 3.8 * len(report.policies)))
    for row, p in zip(axes, report.policies):
        tasks = sorted({c.task for c in p.cells})
        conditions = [s.condition for s in p.conditions]
        width = 0.8 / max(len(conditions), 1)
        for ax, (attr, label) in zip(row, metrics):
            for i, cond in enumerate(conditions):
                cells = {c.task: c for c in p.cells if c.condition == cond and c.episodes}
                values = [getattr(cells[t], attr) if t in cells and getattr(cells[t], attr) is not None else 0.0
                          for t in tasks]
                xs = [j + (i - (len(conditions) - 1) / 2) * width for j in range(len(tasks))]
                bars = ax.bar(xs, values, width, label=cond)
                ax.bar_label(bars, fmt="%.2f", fontsize=7)
            ax.set_xticks(range(len(tasks)), tasks, rotation=15, fontsize=8)
            ax.set_ylabel(label)
            ax.margins(y=0.12)
            if attr == "correct_rate":
                ax.set_ylim(0, 1.12)
            else:
                ax.axhline(1.0, color="gray", lw=0.8, ls="--")
            ax.set_title(f"{p.policy}: {label}" + ("" if p.timed or attr != "correct_rate"
                                                    else " (speed not measured on this backend)"), fontsize=9)
        row[-1].legend(fontsize=7, title="guidance", title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    paths.append(out_dir / "guidance_pairs.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(metrics), squeeze=False, figsize=(5.5 * len(metrics), 3.8))
    for ax, (attr, label) in zip(axes[0], [("correctness_rate", "correctness rate"),
                                             ("performance_score", "Performance Score")][:len(metrics)]):
        for p in report.policies:
            points = [(s.condition, getattr(s, attr)) for s in p.conditions
                      if s.condition in STACKING and getattr(s, attr) is not None]
            if points:
                ax.plot([c for c, _ in points], [v for _, v in points], marker="o", label=p.policy)
                for c, v in points:
                    ax.annotate(f"{v:.2f}", (c, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
        ax.set_xlabel("guidance layers shown (cumulative)")
        ax.set_ylabel(label)
        if attr == "correctness_rate":
            ax.set_ylim(0, 1.12)
        else:
            ax.set_ylim(bottom=0)
        ax.set_title(f"layer stacking: {label}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(out_dir / "layer_stacking.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def write_report(run_dir: str | Path, out_dir: str | Path | None = None) -> tuple[Report, list[Path]]:
    """Write ``report.md``, ``report.json`` and the PNG plots (into the run directory by default)."""
    report = build_report(run_dir)
    out = Path(out_dir or run_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(to_markdown(report))
    (out / "report.json").write_text(json.dumps(json_safe(report.to_dict()), indent=2, allow_nan=False) + "\n")
    return report, [out / "report.md", out / "report.json", *write_plots(report, out)]
