"""Workload and metrics without engines: seeded and derived from the pydoc text, percentiles,
equality against the stock reference, speedups by mode, the lower bound's level arithmetic."""

from __future__ import annotations

import pytest

from accel.benchmarks import metrics
from accel.benchmarks.lower_bound import llm_path
from accel.benchmarks.runner import SystemRun
from accel.benchmarks.workload import build_workload, poisson_arrivals, questions_for
from accel.engines.errors import InvalidRequest

MODULES = ("heapq", "bisect", "fnmatch")


def test_workload_is_seeded_and_asks_about_its_own_documents() -> None:
    first = build_workload(6, modules=MODULES, max_chars=2000)
    again = build_workload(6, modules=MODULES, max_chars=2000)
    other = build_workload(6, modules=MODULES, max_chars=2000, seed=1)
    assert first.questions == again.questions
    assert first.questions != other.questions
    assert [d["id"] for d in first.documents] == [f"stdlib:{m}" for m in MODULES]
    assert all(len(d["text"]) <= 2000 for d in first.documents)
    for question, doc in zip(first.questions, first.documents * 2):
        assert question in questions_for(doc)


def test_questions_name_functions_found_in_the_text() -> None:
    doc = build_workload(1, modules=("heapq",)).documents[0]
    asked = questions_for(doc)
    assert any("heappush" in q for q in asked)
    assert all("heapq" in q for q in asked)


def test_poisson_arrivals_are_seeded_increasing_with_the_requested_mean_rate() -> None:
    arrivals = poisson_arrivals(2000, rate=4.0, seed=3)
    assert arrivals == poisson_arrivals(2000, rate=4.0, seed=3)
    assert arrivals[0] == 0.0 and all(b >= a for a, b in zip(arrivals, arrivals[1:]))
    assert 3.6 < len(arrivals) / arrivals[-1] < 4.4
    with pytest.raises(InvalidRequest):
        poisson_arrivals(3, rate=0)


def _run(name: str, latencies: list[float | None], outputs: list[str | None], makespan: float) -> SystemRun:
    return SystemRun(name, "single", latencies=latencies, outputs=outputs, makespan_s=makespan,
                     errors=["E"] * sum(x is None for x in latencies))


def test_percentiles_equality_and_speedups() -> None:
    stock = _run("stock-sequential", [1.0, 2.0, 3.0, 4.0], ["a", "b", "c", "d"], 10.0)
    fast = _run("accel-topology", [0.5, 1.0, None, 2.0], ["a", "x", None, "d"], 4.0)
    stats = metrics.latency_stats(stock)
    assert stats["mean"] == 2.5 and stats["p50"] == 2.5 and stats["p95"] == pytest.approx(3.85)
    assert metrics.equal_rate(fast, stock) == 0.5
    assert metrics.throughput(fast) == 3 / 4.0
    assert metrics.speedups({"stock-sequential": stock, "accel-topology": fast}, "stock-sequential", "single") == {
        "stock-sequential": 1.0, "accel-topology": pytest.approx(2.5 / (3.5 / 3)),
    }
    assert metrics.headline(fast, "batch") == 4.0


def test_a_system_that_could_not_start_has_no_numbers() -> None:
    broken = SystemRun("accel-topology", "single", setup_error="TypeError: cannot wrap")
    stock = _run("stock-sequential", [1.0], ["a"], 1.0)
    assert metrics.equal_rate(broken, stock) is None
    assert metrics.headline(broken, "single") is None
    assert metrics.speedups({"stock-sequential": stock, "accel-topology": broken}, "stock-sequential", "single")["accel-topology"] is None


def test_lower_bound_counts_the_slowest_call_of_each_independent_level() -> None:
    assert llm_path([1.0, 2.0, 3.0], [1, 1, 1]) == 6.0
    assert llm_path([1.0, 2.0, 3.0, 0.5], [3, 1]) == 3.5


def test_equality_reference_is_stock_sequential_else_stock_batch() -> None:
    from accel.benchmarks.harness import equality_reference

    sequential = _run("stock-sequential", [1.0], ["a"], 1.0)
    concurrent = _run("stock-concurrent", [1.0], ["a"], 1.0)
    assert equality_reference({"stock-sequential": sequential, "stock-concurrent": concurrent}) is sequential
    assert equality_reference({"stock-concurrent": concurrent, "accel-topology": sequential}) is concurrent
    assert equality_reference({"accel-topology": sequential}) is None


def test_zipf_workload_repeats_questions_over_twenty_documents() -> None:
    from collections import Counter

    from accel.benchmarks.workload import build_workload, build_zipf_workload

    first = build_zipf_workload(200, seed=0)
    assert first.questions == build_zipf_workload(200, seed=0).questions  # seeded
    assert len(first.questions) == 200 and len(first.documents) == 20
    distinct = set(build_workload(60, modules=tuple(d["metadata"]["module"] for d in first.documents), seed=0).questions)
    counts = Counter(first.questions)
    assert set(counts) <= distinct and len(counts) < 60  # drawn from the 60, repeats included
    ranked = [n for _, n in counts.most_common()]
    assert ranked[0] > 5 * ranked[len(ranked) // 2]  # a heavy head: Zipf, not uniform


def test_prompt_cache_delta_is_the_cached_share_of_the_runs_prompt_tokens() -> None:
    from accel.benchmarks.prompt_cache import _COUNTER, delta

    text = 'vllm:prompt_tokens_total{engine="0",model_name="m"} 1.5e+03\nvllm:prompt_tokens_cached_total{engine="0",model_name="m"} 600.0\n'
    assert dict(_COUNTER.findall(text)) == {"prompt_tokens_total": "1.5e+03", "prompt_tokens_cached_total": "600.0"}
    assert delta({"prompt": 1000, "cached": 100}, {"prompt": 1500, "cached": 400}) == {
        "prompt_tokens": 500, "cached_tokens": 300, "cached_fraction": 0.6}
    assert delta(None, {"prompt": 1, "cached": 0}) is None
