"""The overhead benchmark runs on a tiny size and prints its table; its figures are not
checked here (no timed tests: the goal is read from the table of a full run)."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph")

from accel.benchmarks import overhead  # noqa: E402


def test_overhead_bench_prints_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    overhead.main(["--calls", "1", "--rounds", "2", "--apps", "lambda sequence,router graph"])
    out = capsys.readouterr().out
    for app in ("lambda sequence", "router graph"):
        for mode in overhead.MODES:
            assert f"{app} | {mode}" in out
    assert "worst median ratio, lcel under ACCEL_AUTO" in out
    assert "worst median ratio, langgraph under accel.wrap" in out
    assert "DIFFER" not in out  # each system's answers are stock's


def test_auto_mode_patches_and_restores_the_entry_points() -> None:
    from langchain_core.runnables.base import RunnableSequence
    from langgraph.pregel.main import Pregel

    before = (RunnableSequence.invoke, Pregel.invoke)
    with overhead.auto_mode():
        assert RunnableSequence.invoke is not before[0] and Pregel.invoke is not before[1]
    assert (RunnableSequence.invoke, Pregel.invoke) == before
