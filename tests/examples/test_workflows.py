"""Every other example runs stock on the real engines with the workflow shape it promises (its
number of LLM calls) and deterministic answers: repeated, concurrent (stock batch) and from
the hand-parallelised variant."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from accel.benchmarks.apps import example
from accel.benchmarks.drivers import driver_for
from accel.benchmarks.workload import build_workload
from accel.examples.stack import StackConfig

pytestmark = [pytest.mark.engines, pytest.mark.slow]

MODULES = ("heapq", "bisect", "fnmatch")

CASES = [  # example, framework, LLM calls per query (None: depends on how the chunks pack)
    ("naive-rag", "langchain", 1),
    ("naive-rag", "llamaindex", None),
    ("search-generation", "langchain", 3),
    ("contextual-retrieval", "langchain", 1),
    ("map-reduce-summary", "langchain", 9),
    ("map-reduce-lcel", "langchain", 9),
    ("chain-summary", "langchain", 8),
    ("multi-agent", "langchain", 5),
    ("role-agents", "langchain", 5),
]


@pytest.fixture(scope="module")
def workload() -> Any:
    return build_workload(2, modules=MODULES, max_chars=1500)


@pytest.mark.parametrize(("name", "framework", "calls"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_example_runs_stock_deterministically(stack: StackConfig, workload: Any, name: str, framework: str, calls: int | None) -> None:
    spec = example(name)
    module = spec.module(framework)
    index = module.build_index(stack, workload.documents, f"t_{uuid.uuid4().hex[:8]}")
    app = module.build_app(stack, index, **spec.app_options)
    parallel = module.build_app(stack, index, parallel=True, **spec.app_options)
    driver = driver_for(framework)
    try:
        with driver.timing() as timed:
            first = driver.call(app, workload.questions[0])
        answers = [first, driver.call(app, workload.questions[1])]
        assert all(isinstance(a, str) and a for a in answers)
        if calls is not None:
            assert len(timed.durations()) == calls
        else:
            assert len(timed.durations()) >= 1
        assert [driver.call(app, q) for q in workload.questions] == answers
        assert driver.batch(app, workload.questions, 2) == answers
        assert [driver.call(parallel, q) for q in workload.questions] == answers
    finally:
        driver.close()
