"""Batch-forming functions on hand-made queues: what each policy puts in the next batch."""

from accel.runtime.policies import fifo_batch, get_policy, per_invocation_batch, topology_batch
from accel.runtime.task import EngineTask

import pytest


def task(query: str, node: str, depth: int, n: int, arrival: float, priority: int = 0) -> EngineTask:
    return EngineTask(query, node, depth, [f"{query}.{node}.{i}" for i in range(n)], arrival=arrival, priority=priority)


def picked(slices):
    return [(s.task.query_id, s.task.node, s.size) for s in slices]


def test_topology_takes_each_querys_deepest_node_first_teola_figure_7():
    # Query 1's A (deep) and B (shallow) arrive before query 2's G (shallow) and H (deep).
    queue = [task("q1", "A", 4, 1, 0.0), task("q1", "B", 2, 1, 0.1), task("q2", "G", 2, 1, 0.2), task("q2", "H", 3, 1, 0.3)]
    assert picked(topology_batch(queue, 2)) == [("q1", "A", 1), ("q2", "H", 1)]
    assert picked(fifo_batch(queue, 2)) == [("q1", "A", 1), ("q1", "B", 1)]


def test_topology_batches_siblings_of_equal_depth_together():
    queue = [task("q1", "e1", 3, 2, 0.0), task("q1", "late", 1, 2, 0.1), task("q1", "e2", 3, 2, 0.2)]
    assert picked(topology_batch(queue, 4)) == [("q1", "e1", 2), ("q1", "e2", 2)]


def test_topology_orders_buckets_by_earliest_arrival_and_splits_nodes():
    queue = [task("q2", "x", 1, 5, 1.0), task("q1", "y", 1, 5, 2.0), task("q2", "z", 0, 1, 3.0)]
    # q2's earliest arrival (1.0) beats q1 (2.0): q2's deepest node first, split at the limit.
    assert picked(topology_batch(queue, 3)) == [("q2", "x", 3)]
    assert picked(topology_batch(queue, 7)) == [("q2", "x", 5), ("q1", "y", 2)]


def test_topology_fills_free_slots_with_the_next_depth_level():
    queue = [task("q1", "A", 2, 1, 0.0), task("q1", "B", 1, 1, 0.1), task("q2", "G", 5, 1, 0.2)]
    assert picked(topology_batch(queue, 8)) == [("q1", "A", 1), ("q2", "G", 1), ("q1", "B", 1)]


def test_topology_continues_a_partly_taken_node():
    t = task("q1", "A", 2, 5, 0.0)
    t.taken = 3
    [s] = topology_batch([t], 10)
    assert (s.start, s.stop) == (3, 5)


def test_po_runs_one_node_per_batch():
    queue = [task("q1", "A", 0, 2, 0.5), task("q2", "B", 9, 3, 0.1)]
    assert picked(per_invocation_batch(queue, 10)) == [("q2", "B", 3)]
    assert picked(per_invocation_batch(queue, 2)) == [("q2", "B", 2)]


def test_to_is_fifo_across_nodes_up_to_the_limit():
    queue = [task("q1", "A", 0, 2, 0.0), task("q2", "B", 9, 3, 0.1), task("q3", "C", 5, 1, 0.2)]
    assert picked(fifo_batch(queue, 4)) == [("q1", "A", 2), ("q2", "B", 2)]


def test_query_priority_comes_before_arrival():
    queue = [task("q1", "A", 0, 1, 0.0, priority=1), task("q2", "B", 0, 1, 0.5, priority=0)]
    for policy in ("topology", "po", "to"):
        assert picked(get_policy(policy)(queue, 1)) == [("q2", "B", 1)]


def test_empty_queue_and_unknown_policy():
    assert topology_batch([], 4) == [] and fifo_batch([], 4) == [] and per_invocation_batch([], 4) == []
    with pytest.raises(ValueError, match="unknown batching policy"):
        get_policy("lifo")


def test_within_seconds_keeps_the_leading_requests_that_fit():
    from accel.runtime.policies import within_seconds
    from accel.runtime.task import EngineTask, Slice

    a = EngineTask("q1", "n", 0, [1, 2, 3])
    b = EngineTask("q2", "n", 0, [4, 5])
    batch = [Slice(a, 0, 3), Slice(b, 0, 2)]
    cost = float
    assert within_seconds(batch, cost, 100) == batch
    assert within_seconds(batch, cost, 6) == [Slice(a, 0, 3)]
    assert within_seconds(batch, cost, 3.5) == [Slice(a, 0, 2)]
    assert within_seconds([Slice(b, 1, 2)], cost, 1) == [Slice(b, 1, 2)]  # one request always goes


def test_measured_cost_per_request():
    """`accel.profiles`: a text costs between the query and the chunk class by its length;
    a pair what a measured pair costs; an unprofiled engine has no cost model."""
    from accel.profiles import CHUNK_CHARS, DEFAULT_SECONDS, QUERY_CHARS, MeasuredLimits

    measured = MeasuredLimits({}, "test", DEFAULT_SECONDS)
    embed = measured.item_seconds("all-MiniLM-L6-v2")
    query, chunk = DEFAULT_SECONDS["all-MiniLM-L6-v2"]["query"], DEFAULT_SECONDS["all-MiniLM-L6-v2"]["chunk"]
    assert embed("x" * 10) == embed("x" * QUERY_CHARS) == query
    assert embed("x" * CHUNK_CHARS) == pytest.approx(chunk)
    assert query < embed("x" * 300) < chunk < embed("x" * 2000)
    rerank = measured.item_seconds("rerank-minilm-l6")
    assert rerank(("q", "passage")) == DEFAULT_SECONDS["rerank-minilm-l6"]["pairs"]
    assert measured.item_seconds("unknown-model") is None
