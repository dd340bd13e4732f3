"""A benchmark indexes one workload under the same name in every run (the name reaches
self-rag's prompts through its row ids), two runs of it on one database at once still get
names of their own, and a report says when chunks of the same text leave a search's order open."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from accel.benchmarks import summary
from accel.benchmarks.index_names import lease, shared_text_chunks, workload_name

DOCS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"


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


def test_chunks_of_the_same_text_are_counted_and_the_report_says_so_within_80_columns() -> None:
    chunks = ["a heap", "Static methods inherited", "b", "Static methods inherited", "a heap", "a heap"]
    assert shared_text_chunks(chunks) == 5
    assert shared_text_chunks(["a", "b"]) == shared_text_chunks([]) == 0
    assert summary.index_line({"index": {"chunks": 6, "shared_text_chunks": 0}}) is None
    assert summary.index_line({}) is None  # reports from before the count
    report = json.loads((DOCS / "advanced-rag-langchain-batch.json").read_text())
    report["index"] = {"collection": "bench_x", "chunks": 412, "shared_text_chunks": 5}
    text = summary.render(report, width=80)
    said = " ".join(line for line in text.splitlines() if "share their text" in line or "row order" in line)
    assert said.startswith("index: 5 of 412 chunks share their text with another")
    assert max(len(line) for line in text.splitlines()) <= 80
