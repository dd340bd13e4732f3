"""A benchmark indexes one workload under the same name in every run (the name reaches
self-rag's prompts through its row ids), and two runs of it on one database at once still get
names of their own."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from accel.benchmarks.index_names import lease, workload_name


def test_the_name_follows_the_workload_and_nothing_else() -> None:
    name = workload_name("self-rag", "langchain", queries=32, seed=0, modules=("heapq", "bisect"), max_chars=4000)
    assert name == workload_name("self-rag", "langchain", queries=32, seed=0, modules=("heapq", "bisect"), max_chars=4000)
    assert name.startswith("bench_self_rag_")
    others = {workload_name("self-rag", "langchain", queries=16, seed=0, modules=("heapq", "bisect"), max_chars=4000),
              workload_name("self-rag", "langchain", queries=32, seed=1, modules=("heapq", "bisect"), max_chars=4000),
              workload_name("self-rag", "llamaindex", queries=32, seed=0, modules=("heapq", "bisect"), max_chars=4000),
              workload_name("self-rag", "langchain", queries=32, seed=0, modules=("heapq",), max_chars=4000)}
    assert name not in others and len(others) == 4


def test_a_second_run_at_once_gets_its_own_name_and_the_workloads_name_comes_back_once_released(
        postgres_factory: Callable[[str], str], caplog: pytest.LogCaptureFixture) -> None:
    dsn = postgres_factory("accel-names-pg-")
    name = workload_name("naive-rag", "langchain", queries=2, seed=0)
    first = lease(dsn, name)
    with caplog.at_level(logging.WARNING, logger="accel.benchmarks.index_names"):
        second = lease(dsn, name)
    assert (first.name, first.shared) == (name, True)
    assert second.name != name and second.name.startswith(name) and not second.shared
    assert "another run holds the index" in caplog.text and second.name in caplog.text
    first.release()
    second.release()
    third = lease(dsn, name)
    assert (third.name, third.shared) == (name, True)
    third.release()
