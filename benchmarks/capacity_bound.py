"""The capacity bound of many queries: how fast the machine could serve a workload if every
engine ran at its most efficient batch size all the time and nothing waited.

Each engine's share of one query's work (`EngineWork`) is measured in the engine's own items
(texts embedded, pairs reranked, LLM batch-1 seconds) together with the best throughput the
engine reached in its profile. Engines on the same device share that device's time, so their
times add up; engines on different devices run side by side, so the busiest device decides:

    makespan >= max over devices of  sum over its engines of  queries * items_per_query / throughput

On this project's machine every engine shares the same two CPU cores (one device); on GPU
twins each twin models its own device (the LLM's steps, each encoder server's stream), so their
work overlaps and the busiest decides (`twin_run.devices`). The bound
assumes an engine measured alone uses the device as well as it could when sharing it; on a
machine whose engines scale poorly across cores, overlapping engines can come a little under it.

`online_bound` turns the same numbers into per-query latency bounds for arrivals spread over
time (Poisson runs): a fluid queue served in arrival order at full capacity, where no query
finishes sooner than its own critical path allows. Pure functions: reusable for any workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from accel.engines.errors import InvalidRequest

ONE_DEVICE = "machine"


@dataclass(frozen=True)
class EngineWork:
    """One engine's work per query and its best measured throughput (items per second, at
    `best_batch`); `device` groups engines that share hardware."""

    engine: str
    items_per_query: float
    unit: str
    best_throughput: float
    best_batch: int
    device: str = ONE_DEVICE

    def seconds(self, queries: int) -> float:
        return queries * self.items_per_query / self.best_throughput


def _check(work: Sequence[EngineWork], queries: int) -> None:
    if queries < 1:
        raise InvalidRequest("bound", f"queries={queries}", "bound at least one query")
    bad = [w.engine for w in work if w.best_throughput <= 0 or w.items_per_query < 0]
    if bad:
        raise InvalidRequest("bound", f"engines {bad} have no positive throughput or negative work",
                             "profile each engine before computing the bound")


def device_seconds(work: Sequence[EngineWork], queries: int) -> dict[str, float]:
    """Busy seconds of each device for `queries` queries at the engines' best throughput."""
    _check(work, queries)
    busy: dict[str, float] = {}
    for w in work:
        busy[w.device] = busy.get(w.device, 0.0) + w.seconds(queries)
    return busy


def capacity_bound(work: Sequence[EngineWork], queries: int, critical_path_s: float | None = None) -> dict[str, Any]:
    """The least makespan of `queries` queries submitted together; never below one query's
    critical path (`critical_path_s`, when known)."""
    busy = device_seconds(work, queries)
    makespan = max(busy.values(), default=0.0)
    if critical_path_s is not None:
        makespan = max(makespan, critical_path_s)
    return {
        "queries": queries,
        "makespan_s": makespan,
        "throughput_qps": queries / makespan if makespan > 0 else None,
        "per_query_s": max(device_seconds(work, 1).values(), default=0.0),
        "device_seconds": busy,
        "engine_seconds": {w.engine: w.seconds(queries) for w in work},
        "engines": [asdict(w) for w in work],
        "critical_path_s": critical_path_s,
    }


def online_bound(work: Sequence[EngineWork], arrivals: Sequence[float],
                 critical_path_s: float | Sequence[float] = 0.0) -> list[float]:
    """Per-query latency bounds for queries arriving at `arrivals` (seconds, in order): each
    query's work is served at full capacity in arrival order (identical queries: no order
    finishes the k-th query sooner), and no query beats its critical path: one for every
    query, or each query's own (`critical_path_s[i]` for the i-th arrival)."""
    if not arrivals:
        return []
    floors = [critical_path_s] * len(arrivals) if isinstance(critical_path_s, (int, float)) else list(critical_path_s)
    if len(floors) != len(arrivals):
        raise InvalidRequest("bound", f"{len(floors)} critical paths for {len(arrivals)} arrivals",
                             "give one critical path per arrival, or one for all")
    service = max(device_seconds(work, 1).values(), default=0.0)
    bounds, finish = [], 0.0
    for arrival, floor in zip(arrivals, floors):
        finish = max(finish, arrival) + service
        bounds.append(max(finish - arrival, floor))
    return bounds
