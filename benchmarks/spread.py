"""How sure a headline ratio is: its run-to-run spread, estimated from the rounds the run
already makes (queries of a single run, bound rounds, per-query latencies at a Poisson rate).

A seeded paired bootstrap: rounds are resampled with replacement (the same rounds on both sides
when both sides have one value per round), the ratio of the two statistics is recomputed, and
the 5th-95th percentiles of those ratios are the spread. A spread that covers 1.0 is noise.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from . import metrics

RESAMPLES = 1000
LOW, HIGH = 5.0, 95.0
Stat = Callable[[Sequence[float]], float]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def p95(values: Sequence[float]) -> float:
    return metrics.percentile(values, 95)


STATS: dict[str, Stat] = {"single": mean, "poisson": p95, "batch": statistics.median}


def ratio_spread(num: Sequence[float | None], den: Sequence[float | None], stat: Stat, *, den_stat: Stat | None = None,
                 resamples: int = RESAMPLES, seed: int = 0) -> dict[str, Any] | None:
    """Spread of stat(num) / den_stat(den) (den_stat: stat by default). Paired when both have the same number of rounds
    (round i of one with round i of the other, rounds with a gap on either side dropped); else
    each side is resampled on its own (a side of one value stays fixed)."""
    paired = len(num) == len(den)
    if paired:
        pairs = [(a, b) for a, b in zip(num, den) if a is not None and b is not None]
        xs, ys = [a for a, _ in pairs], [b for _, b in pairs]
    else:
        xs, ys = [a for a in num if a is not None], [b for b in den if b is not None]
    den_stat = den_stat or stat
    if not xs or not ys or den_stat(ys) <= 0:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        if paired:
            picks = [rng.randrange(len(xs)) for _ in xs]
            x, y = [xs[i] for i in picks], [ys[i] for i in picks]
        else:
            x, y = rng.choices(xs, k=len(xs)), rng.choices(ys, k=len(ys))
        if den_stat(y) > 0:
            ratios.append(stat(x) / den_stat(y))
    low, high = metrics.percentile(ratios, LOW), metrics.percentile(ratios, HIGH)
    rounds = len(xs) if paired else max(len(xs), len(ys))
    return {"low": low, "high": high, "rounds": rounds, "within_noise": rounds > 1 and low <= 1.0 <= high}


def samples(run: Any, mode: str) -> list[float | None]:
    """A system's rounds for its headline: per-query latencies, or its one makespan (batch)."""
    if run is None or run.setup_error is not None:
        return []
    return [run.makespan_s] if mode == "batch" else list(run.latencies)


def speedup_spreads(runs: dict[str, Any], baseline: str, mode: str) -> dict[str, dict[str, Any] | None]:
    """Spread of baseline's headline over each system's (the `speedup_vs_*` ratios)."""
    base = samples(runs.get(baseline), mode)
    stat = STATS[mode]
    return {name: ratio_spread(base, samples(run, mode), stat) if base else None for name, run in runs.items()}
