"""The capacity bound's arithmetic (pure functions, no engines): engines on one device add up,
devices run side by side, no query beats its critical path, and arrivals spread over time
queue only when they come faster than the machine's capacity."""

from __future__ import annotations

from typing import Any

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


def test_online_bound_floors_each_query_at_its_own_critical_path() -> None:
    spread = online_bound(WORK, [0.0, 5.0, 10.0], critical_path_s=[0.4, 2.5, 1.2])
    assert spread == pytest.approx([1.0, 2.5, 1.2])  # capacity (1 s a query) or the query's own path
    together = online_bound(WORK, [0.0, 0.0], critical_path_s=[2.5, 0.1])
    assert together == pytest.approx([2.5, 2.0])
    with pytest.raises(InvalidRequest, match="one critical path per arrival"):
        online_bound(WORK, [0.0, 1.0], critical_path_s=[1.0])


def test_work_without_throughput_is_a_typed_error() -> None:
    with pytest.raises(InvalidRequest, match="profile each engine"):
        capacity_bound([EngineWork("llm", 1.0, "batch-1 s", 0.0, 1)], 4)
    with pytest.raises(InvalidRequest):
        capacity_bound(WORK, 0)


def _capacity_round(query: int, llm_s: float) -> Any:
    from accel.benchmarks.bounds import CapacityRound
    from accel.benchmarks.lower_bound import BoundRound

    work = [EngineWork("embed", 3, "texts", 30.0, 8), EngineWork("llm", llm_s, "batch-1 s", 3.0, 16)]
    return CapacityRound(BoundRound(query, (llm_s,), {}), work)


@pytest.mark.parametrize("mode", ["batch", "poisson"])
def test_batch_and_poisson_bounds_above_a_measured_system_are_re_measured_or_not_established(mode: str) -> None:
    from accel.benchmarks import bounds
    from accel.benchmarks.apps import ExampleSpec
    from accel.benchmarks.runner import SystemRun

    spec = ExampleSpec("fake", {}, "one LLM call", embed_batch=3)
    # 10 queries together: 10 x (0.1 s embed + llm_s / 3); a loaded round timed llm_s 3.0 instead of 1.2
    arrivals = {2.0: [0.0] * 10}
    system = SystemRun("accel-topology", mode, 2.0 if mode == "poisson" else None, latencies=[float(i + 1) for i in range(10)],
                       makespan_s=6.0)
    measured = bounds.Measured(spec, mode, 10, arrivals if mode == "poisson" else {})
    runs = {2.0 if mode == "poisson" else None: {"accel-topology": system}}
    loaded = [_capacity_round(0, 3.0), _capacity_round(1, 3.0)]
    held = bounds.settle(measured, list(loaded), lambda i: _capacity_round(i, 1.2), runs)
    assert held["established"] and held["remeasured"] == 1
    assert measured.value(held, 2.0) == pytest.approx(5.0 if mode == "batch" else 4.775)  # p95 of 0.5 .. 5.0 s
    failed = bounds.settle(measured, list(loaded), lambda i: _capacity_round(i, 3.0), runs)
    assert not failed["established"] and failed["remeasured"] == bounds.MAX_PASSES
    assert failed["violations"][0]["system"] == "accel-topology"
    report = {"mode": mode, "headline_metric": "makespan" if mode == "batch" else "p95 latency", "rates": []}
    bounds.attach(report, measured, failed, [runs[next(iter(runs))]], "accel-topology")
    assert report["bound"]["accel_over_bound"] is None and report["capacity_bound"]["accel_over_bound"] is None


def test_a_capacity_round_passes_the_query_widest_llm_level_to_the_probe() -> None:
    from accel.benchmarks import bounds
    from accel.benchmarks.apps import ExampleSpec, plan_fan_out_fan_in, sequential

    asked: list[tuple[float, int]] = []

    class Probe:
        def work(self, llm_s: float, width: int, progress: Any) -> list[EngineWork]:
            asked.append((llm_s, width))
            return [EngineWork("llm", llm_s, "batch-1 s", 3.0, 16)]

    class Steps:
        def time(self, query: int) -> dict[str, float]:
            return {}

    for levels, width in ((sequential, 1), (plan_fan_out_fan_in, 3)):
        spec = ExampleSpec("fake", {}, "five LLM calls", llm_levels=levels)
        meter = bounds.Meter(spec, lambda i: [0.5] * 5, Steps(), Probe())  # type: ignore[arg-type]
        meter.round(0)
        assert asked[-1] == (pytest.approx(2.5), width)


def test_a_batch_never_ends_before_its_longest_query_could_alone() -> None:
    """The rounds time two queries (0.3 s of LLM each, under the batch's capacity); stock's lone
    run of every query shows one whose two dependent calls take 2.5 s: the bound is that query's
    path, plus the rounds' non-LLM steps. A failed query (no calls) counts for nothing."""
    from accel.benchmarks import bounds
    from accel.benchmarks.apps import ExampleSpec, sequential
    from accel.benchmarks.capacity_bound import capacity_bound as capacity
    from accel.benchmarks.lower_bound import BoundRound

    spec = ExampleSpec("fake", {}, "two dependent LLM calls", llm_levels=sequential, embed_batch=3)
    work = [EngineWork("embed", 3, "texts", 30.0, 8), EngineWork("llm", 0.3, "batch-1 s", 3.0, 16)]
    rounds = [bounds.CapacityRound(BoundRound(q, (0.1, 0.2), {"embed x3": 0.05}), work) for q in (0, 1)]
    alone = [[0.1, 0.2], [1.0, 1.5], [], [0.2, 0.2]]
    lone = bounds.Measured(spec, "batch", 4, {}, alone).summary(rounds)
    assert capacity(work, 4, 0.35)["makespan_s"] == pytest.approx(0.8)  # what the rounds alone allow
    assert lone["lone_queries"] == {"queries": 3, "longest_s": pytest.approx(2.55), "median_s": pytest.approx(0.45),
                                    "steps_s": pytest.approx(0.05)}
    assert lone["median_s"] == pytest.approx(2.55)
    without = bounds.Measured(spec, "batch", 4, {}).summary(rounds)
    assert without["lone_queries"] is None and without["median_s"] == pytest.approx(0.8)



def test_a_poisson_bound_floors_each_arrival_at_its_query_own_path() -> None:
    """The rounds time query 0 (0.35 s); stock-sequential's run timed every query alone, one of
    them 2.55 s. Arrivals 10 s apart never queue, so each arrival's bound is its own query's
    path; the query that failed alone keeps the round's. The round's one path stood for all
    four before: a p95 of 0.35 s, under the slow query's own 2.55 s."""
    from accel.benchmarks import bounds, metrics
    from accel.benchmarks.apps import ExampleSpec, sequential
    from accel.benchmarks.lower_bound import BoundRound

    spec = ExampleSpec("fake", {}, "two dependent LLM calls", llm_levels=sequential, embed_batch=3)
    work = [EngineWork("embed", 3, "texts", 30.0, 8), EngineWork("llm", 0.3, "batch-1 s", 3.0, 16)]
    rounds = [bounds.CapacityRound(BoundRound(0, (0.1, 0.2), {"embed x3": 0.05}), work)]
    arrivals = {1.0: [0.0, 10.0, 20.0, 30.0]}
    alone = [[0.1, 0.2], [1.0, 1.5], [], [0.2, 0.2]]
    own = bounds.Measured(spec, "poisson", 4, arrivals, alone).summary(rounds)
    assert own["lone_queries"]["longest_s"] == pytest.approx(2.55)
    assert own["rates"][1.0] == [pytest.approx(metrics.percentile([0.35, 2.55, 0.35, 0.45], 95))]
    without = bounds.Measured(spec, "poisson", 4, arrivals).summary(rounds)
    assert without["lone_queries"] is None and without["rates"][1.0] == [pytest.approx(0.35)]
