"""A window's LLM steps in a few numbers: what steps paid for the weights' read beyond their own
work, what prefill added to decoders' waits, how full decoding steps were."""

from __future__ import annotations

import json

import pytest

from accel.benchmarks.llm_steps import StepLog, line, summarise

FIELDS = ("at", "seconds", "prefill_tokens", "prefill_seqs", "decode_seqs", "context_tokens", "work_s", "stall_s")


def test_a_window_of_steps_in_numbers() -> None:
    steps = StepLog(0.010, 3e-5, FIELDS, (
        (0.000, 0.010, 0, 0, 8, 800, 0.001, 0.0),      # 8 decoding: the floor, 9 ms beyond its work
        (0.010, 0.090, 3000, 1, 8, 900, 0.090, 0.080),  # a prompt held the 8 decoders 80 ms
        (0.100, 0.010, 0, 0, 4, 400, 0.0005, 0.0),     # 4 decoding: the floor again
    ))
    summary = summarise(steps)
    assert summary == {"steps": 3, "busy_s": pytest.approx(0.110), "under_floor_steps": 2,
                       "floor_s": pytest.approx(0.009 + 0.0095), "stall_s": pytest.approx(0.080),
                       "prefill_tokens": 3000, "decode_tokens": 20, "decoding_per_step": pytest.approx(6.7)}
    report = {"systems": {"stock-concurrent": {"llm_steps": summary}, "accel-topology": {"llm_steps": None}}}
    assert line(report) == ("the LLM twin's steps: stock-conc 3 steps (2 under the floor), 7 decoding a step, "
                            "floor 0.02 s and prefill stalls 0.08 s of 0.11 s")
    assert line({"systems": {"stock-concurrent": {}}}) is None
    assert StepLog.from_json(steps.as_json()) == steps


def test_a_poisson_reports_rows_move_out_into_one_picture_a_panel_per_rate(tmp_path) -> None:
    from accel.benchmarks.llm_steps import write

    def served(first_at: float) -> dict:
        return StepLog(0.010, 3e-5, FIELDS, ((first_at, 0.010, 0, 0, 8, 800, 0.001, 0.0),
                                              (first_at + 0.010, 0.090, 3000, 1, 8, 900, 0.090, 0.080))).as_json()

    at_rates = [{"rate": rate, "systems": {name: {"llm_step_rows": served(rate)} for name in ("stock-concurrent", "accel-topology")}}
                for rate in (2.0, 4.0)]
    headline = {name: {"llm_step_rows": served(4.0)} for name in ("stock-concurrent", "accel-topology")}  # the top rate's
    report = {"example": "advanced-rag", "framework": "langchain", "mode": "poisson", "config": {"queries": 2},
              "rates": at_rates, "systems": headline}
    picture = write(report, tmp_path / "steps.json")
    assert picture == tmp_path / "steps.png" and picture.stat().st_size > 0
    kept = json.loads((tmp_path / "steps.json").read_text())
    assert list(kept) == [f"{name} @ {rate}/s" for rate in (2.0, 4.0) for name in ("stock-concurrent", "accel-topology")]
    assert StepLog.from_json(kept["accel-topology @ 2.0/s"]).column("at") == [2.0, 2.01]
    assert not any("llm_step_rows" in s for s in [*headline.values(), *(s for at in at_rates for s in at["systems"].values())])
    assert write(report, tmp_path / "again.json") is None  # nothing left to move


def test_steps_are_asked_of_a_twin_in_a_window_or_refused_with_the_remedy() -> None:
    from accel.benchmarks.harness import BenchConfig
    from accel.engines.errors import InvalidRequest

    BenchConfig("advanced-rag", "langchain", "batch", twin="h100-8b", steps=True).check()
    for config in (BenchConfig("advanced-rag", "langchain", "batch", steps=True),
                   BenchConfig("advanced-rag", "langchain", "single", twin="h100-8b", steps=True)):
        with pytest.raises(InvalidRequest, match="use --twin with --mode batch or --mode poisson for --steps"):
            config.check()
