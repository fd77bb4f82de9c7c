"""Human-readable verdicts for evaluation results (what the agent and the CLI see)."""

from __future__ import annotations

import math
import re

from d2k_env.evaluator.protocol import EvalResult
from d2k_env.evaluator.rules import advice

LEASE_WAIT_SAID_S = 1.0  # shorter waits go unsaid in the verdict (the result's lease lists them all)
_RULE = re.compile(r"\[([a-z][a-z0-9-]*)\]")


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def format_result(result: EvalResult, title: str = "") -> str:
    """A verdict line, then one row per workload, then whatever the solution printed."""
    lines = [title] if title else []
    if result.error:
        lines.append(f"FAILED: {result.error}")
    elif result.correct:
        if result.timed:
            lines.append(f"PASSED: every workload correct; geomean speedup over the PyTorch baseline "
                         f"{geomean(result.speedups):.3f}x on {result.device_name}.")
        else:
            lines.append("PASSED: every workload correct. Nothing was timed: the "
                         f"{result.backend} backend checks correctness only.")
    else:
        failing = [w.name for w in result.workloads if not w.correct]
        lines.append(f"FAILED: incorrect on workload(s) {', '.join(failing)}.")
    if result.workloads:
        if result.timed:
            lines.append(f"{'workload':<16} {'ok':<3} {'baseline ms':>11} {'solution ms':>11} {'speedup':>8} "
                         f"{'95% CI':>13} {'roofline':>8}")
        for w in result.workloads:
            ok = "yes" if w.correct else "NO"
            if result.timed and w.correct and w.speedup is not None:
                ci = f"{w.speedup_ci[0]:.2f}-{w.speedup_ci[1]:.2f}" if w.speedup_ci else "-"
                lines.append(f"{w.name:<16} {ok:<3} {_fmt(w.baseline_ms, '11.4f')} {_fmt(w.solution_ms, '11.4f')} "
                             f"{w.speedup:7.2f}x {ci:>13} {_fmt(w.roofline_fraction, '8.0%')}")
                if w.graph_solution_ms is not None:
                    lines.append(f"{'':<16}     in a CUDA graph (launch-bound): baseline "
                                 f"{_fmt(w.graph_baseline_ms, '.4f')} ms, solution {w.graph_solution_ms:.4f} ms")
                if w.baseline_note:
                    lines.append(f"{'':<16}     baseline {w.baseline_note}")
            else:
                errs = ""
                if w.max_abs_err is not None and w.correct:
                    errs = f" (max abs err {w.max_abs_err:.3g}, max rel err {w.max_rel_err:.3g})"
                lines.append(f"{w.name:<16} {ok:<3} {w.message}{errs}")
    # Every GPU verdict says whether the memory checker ran on the held-out shapes, and how it ended.
    if result.backend == "cuda" and result.sandbox.get("memcheck"):
        lines.append(f"memory check: {result.sandbox['memcheck']}")
    # A wait for the GPU's lease is another evaluation's timed phase: it explains a slow evaluation.
    if waited := sum(held.get("waited_s", 0) for held in result.lease):
        if waited >= LEASE_WAIT_SAID_S:
            lines.append(f"waited {waited:.1f} s for the GPU's lease (other evaluations' phases held it)")
    # What an honest solution does instead, once per rule the verdict names (the policy's refusals
    # carry theirs already; run-time rules get theirs here).
    named = _RULE.findall("\n".join([result.error or "", *(w.message for w in result.workloads if not w.correct)]))
    told = set(re.findall(r"^\[([a-z0-9-]+)\] instead:", result.error or "", re.M))
    if hint := advice(r for r in named if r not in told):
        lines.append(hint)
    if result.profile is not None:
        lines.append(f"{'kernel':<60} {'calls':>5} {'us/call':>10}")
        for row in result.profile[:30]:
            lines.append(f"{row['kernel'][:60]:<60} {row['calls']:>5} {row['us_per_call']:>10.2f}")
        if not result.profile:
            lines.append("(no GPU kernels were recorded)")
    if result.output.strip():
        lines.append("--- output of the evaluation process ---")
        lines.append(result.output.rstrip())
    return "\n".join(lines)


def format_properties(properties, result: EvalResult) -> str:
    """One line per design property of the task (``properties``: its DesignProperty list): the
    evaluation's automatic finding over the workloads (:attr:`EvalResult.properties`), or that the
    judge decides it. Empty for a task without properties."""
    found = result.properties
    lines = []
    for p in properties:
        if p.check is None:
            lines.append(f"property {p.id} ({p.layer}): judge (no automatic check)")
        elif p.id in found:
            lines.append(f"property {p.id} ({p.layer}): {found[p.id]['detail']}"
                         if found[p.id]["status"] != "unchecked" else
                         f"property {p.id} ({p.layer}): unchecked: {found[p.id]['detail']}")
        else:
            lines.append(f"property {p.id} ({p.layer}): unchecked: no workload reached the replay")
    return "\n".join(lines)
