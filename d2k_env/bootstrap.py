"""Percentile intervals over a run's seeds, by a cluster bootstrap (the report's intervals).

A resample draws as many seeds as the run has, with replacement, and takes every (task, seed)
pair of each drawn seed along (a seed drawn twice counts twice): the unit resampled is the seed,
so each resample keeps the run's task mix and a seed's tasks stay together. The statistic is
recomputed on every resample, and the interval is the ``(1 - level) / 2`` and ``1 - (1 - level) / 2``
quantiles of those values (the inverse of their empirical distribution function).

Reproducible: with ``k`` seeds and ``k ** k <= resamples`` every ordered resample is enumerated
once (the exact bootstrap distribution, no sampling at all); otherwise ``resamples`` draws from
``random.Random(0)``, so the same run always gives the same interval.

No interval (``None``) with fewer than two distinct seeds, rather than a made-up zero-width one:
one seed says nothing about how another would have gone. (With two or more, an interval is zero
wide only when every resample gives the same value.) Resamples on which the statistic is ``None`` (or NaN)
are skipped; when fewer than ``level`` of them remain, the statistic is too often undefined to be
estimated at that level and the interval is ``None`` too.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

RESAMPLES = 2000
LEVEL = 0.95

Interval = tuple[float, float]
Pair = tuple[str, int]  # (task, seed)


def seed_count(pairs: Iterable[Pair]) -> int:
    """The number of distinct seeds among ``pairs``."""
    return len({seed for _, seed in pairs})


def seed_intervals(pairs: Sequence[Pair], statistics: Callable[[list[Pair]], Sequence[float | None]],
                   resamples: int = RESAMPLES, level: float = LEVEL) -> list[Interval | None]:
    """One interval per value ``statistics`` returns, all from the same resamples of ``pairs``'s
    seeds (see the module docstring). ``statistics`` takes a list of pairs, with repeats when a seed
    was drawn more than once, and returns a fixed number of values, each a float or ``None``."""
    if not 0 < level < 1 or resamples < 1:
        raise ValueError(f"level must lie strictly between 0 and 1 and resamples be positive, "
                         f"not level={level}, resamples={resamples}")
    by_seed: dict[int, list[Pair]] = defaultdict(list)
    for pair in pairs:
        by_seed[pair[1]].append(pair)
    seeds = sorted(by_seed)
    if len(seeds) < 2:
        return [None] * len(statistics(list(pairs)))
    k = len(seeds)
    if k ** k <= resamples:
        draws: Iterable[Sequence[int]] = itertools.product(seeds, repeat=k)
    else:
        rng = random.Random(0)
        draws = ([rng.choice(seeds) for _ in range(k)] for _ in range(resamples))
    values: list[list[float]] | None = None
    total = 0
    for draw in draws:
        out = statistics([pair for seed in draw for pair in by_seed[seed]])
        values = values if values is not None else [[] for _ in out]
        total += 1
        for kept, v in zip(values, out):
            if v is not None and not math.isnan(v):
                kept.append(v)
    return [_percentiles(sorted(kept), total, level) for kept in values or []]


def seed_interval(pairs: Sequence[Pair], statistic: Callable[[list[Pair]], float | None],
                  resamples: int = RESAMPLES, level: float = LEVEL) -> Interval | None:
    """The interval of one statistic: :func:`seed_intervals` of ``statistic`` alone."""
    return seed_intervals(pairs, lambda rs: (statistic(rs),), resamples, level)[0]


def _percentiles(values: list[float], total: int, level: float) -> Interval | None:
    """The two quantiles of sorted ``values``; None when they are fewer than ``level`` of ``total``."""
    n = len(values)
    if not n or n < level * total:
        return None
    tail = (1 - level) / 2

    def quantile(q: float) -> float:  # the smallest value at least a fraction q of the values reach
        return values[min(n - 1, max(0, math.ceil(round(q * n, 9)) - 1))]

    return quantile(tail), quantile(1 - tail)
