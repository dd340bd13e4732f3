"""A window's LLM steps in a few numbers: what steps paid for the weights' read beyond their own
work, what prefill added to decoders' waits, how full decoding steps were."""

from __future__ import annotations

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
