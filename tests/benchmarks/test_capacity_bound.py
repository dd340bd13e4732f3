"""The capacity bound's arithmetic (pure functions, no engines): engines on one device add up,
devices run side by side, no query beats its critical path, and arrivals spread over time
queue only when they come faster than the machine's capacity."""

from __future__ import annotations

import pytest

from accel.benchmarks.capacity_bound import EngineWork, capacity_bound, device_seconds, online_bound
from accel.engines.errors import InvalidRequest

# per query: 3 texts at 30 texts/s (0.1 s), 16 pairs at 32 pairs/s (0.5 s), 1.2 batch-1 LLM s at 3x (0.4 s)
WORK = [
    EngineWork("embed", 3, "texts", 30.0, 8),
    EngineWork("rerank", 16, "pairs", 32.0, 16),
    EngineWork("llm", 1.2, "batch-1 s", 3.0, 16),
]


def test_engines_sharing_one_device_add_up() -> None:
    bound = capacity_bound(WORK, queries=10)
    assert bound["makespan_s"] == pytest.approx(10 * (0.1 + 0.5 + 0.4))
    assert bound["per_query_s"] == pytest.approx(1.0)
    assert bound["throughput_qps"] == pytest.approx(1.0)
    assert bound["engine_seconds"] == pytest.approx({"embed": 1.0, "rerank": 5.0, "llm": 4.0})


def test_engines_on_separate_devices_overlap_and_the_busiest_decides() -> None:
    split = [EngineWork(w.engine, w.items_per_query, w.unit, w.best_throughput, w.best_batch,
                        device="gpu" if w.engine == "llm" else "cpu") for w in WORK]
    assert device_seconds(split, 10) == pytest.approx({"cpu": 6.0, "gpu": 4.0})
    assert capacity_bound(split, 10)["makespan_s"] == pytest.approx(6.0)


def test_a_small_batch_is_never_faster_than_one_query_critical_path() -> None:
    assert capacity_bound(WORK, queries=1, critical_path_s=1.7)["makespan_s"] == pytest.approx(1.7)
    assert capacity_bound(WORK, queries=4, critical_path_s=1.7)["makespan_s"] == pytest.approx(4.0)


def test_online_bound_queues_only_arrivals_faster_than_capacity() -> None:
    together = online_bound(WORK, [0.0, 0.0, 0.0], critical_path_s=0.5)
    assert together == pytest.approx([1.0, 2.0, 3.0])
    spread = online_bound(WORK, [0.0, 5.0, 10.0], critical_path_s=1.5)
    assert spread == pytest.approx([1.5, 1.5, 1.5])
    assert online_bound(WORK, []) == []


def test_work_without_throughput_is_a_typed_error() -> None:
    with pytest.raises(InvalidRequest, match="profile each engine"):
        capacity_bound([EngineWork("llm", 1.0, "batch-1 s", 0.0, 1)], 4)
    with pytest.raises(InvalidRequest):
        capacity_bound(WORK, 0)
