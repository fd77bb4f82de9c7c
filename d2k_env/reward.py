"""Rewards. Only ``submit`` earns a non-zero reward; every other step earns 0.

- ``speedup`` (default): geometric mean over workloads of baseline time / solution time when
  every workload is correct, else 0.
- ``log_speedup``: ln(1 + geomean speedup) when correct, else 0: positive for every correct
  kernel, so correctness always beats failure, and compressive for large speedups.
- ``binary``: 1 when every workload is correct, else 0.

Each workload's speedup enters the geometric mean capped at ``SPEEDUP_CAP``, so no single
workload (a launch-bound one, say) can dominate; the cap sits far above what expert kernels reach
over eager PyTorch (10-18x on the shipped tasks). On a backend that cannot time (the CPU
interpreter) a correct submission earns 1.0 under every kind. The reward never depends on which
guidance layers were shown.

Scores carry :data:`REWARD_VERSION`: in every step's ``info``, in every trajectory's header and in
``d2k report``, which reports each version apart (see the rule next to the constant).
"""

from __future__ import annotations

import math

from d2k_env.evaluator.protocol import EvalResult
from d2k_env.verdict import geomean

# The version of the scoring rules. Bump it in the same commit as any change that can give the same
# submission a different reward, correctness verdict or measured speedup: a reward formula, the cap,
# the correctness checks or tolerances, the inputs checked, how time is measured. Scores of different
# versions are not comparable, so reports never average them together. When old scores of a task
# become incomparable, its Gymnasium id's version (D2K/<task>-v0) bumps too (see registration.py).
REWARD_VERSION = 1

REWARDS = ("speedup", "log_speedup", "binary")
SPEEDUP_CAP = 100.0

NOTES = {
    "speedup": "the geometric-mean speedup over the baseline if every workload is correct on fresh secret "
               "inputs, else 0.",
    "log_speedup": "ln(1 + geometric-mean speedup over the baseline) if every workload is correct on fresh "
                   "secret inputs, else 0.",
    "binary": "1 if every workload is correct on fresh secret inputs, else 0.",
}
INTERPRETER_NOTE = " This backend cannot time: a correct submission earns 1."


def check_reward_kind(kind: str) -> str:
    if kind not in REWARDS:
        raise ValueError(f"unknown reward {kind!r}; expected one of {REWARDS}")
    return kind


def submission_reward(kind: str, result: EvalResult) -> float:
    if not result.correct:
        return 0.0
    if kind == "binary" or not result.timed:
        return 1.0
    speedup = geomean([min(s, SPEEDUP_CAP) for s in result.speedups])
    return speedup if kind == "speedup" else math.log1p(speedup)
