"""Validation check 1's verdict (benchmarks/twin_validation.py): each system's time within 15%
of the real run's, accel's speed-ups within ±0.1; and the real stack frozen while twins run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from accel.benchmarks.twin_validation import (CannotReset, check_reset, compare, drift, frozen, markdown,
                                              profile_decode_step_ms)
from accel.engines.stack_home import home_tag
from tests.stand_in_server import started_stand_in


def report(stock: float, concurrent: float, accel: float, equal: float = 1.0) -> dict:
    times = {"stock-sequential": stock, "stock-concurrent": concurrent, "accel-topology": accel}
    return {"systems": {n: {"latency": {"mean": t}, "equal_rate": equal} for n, t in times.items()},
            "speedup_vs_stock": {"accel-topology": stock / accel},
            "speedup_vs_stock_concurrent": {"accel-topology": concurrent / accel}}


def test_a_twin_within_the_tolerances_passes() -> None:
    verdict = compare([report(10.0, 8.0, 6.0)], [report(11.0, 8.6, 6.4)])
    assert verdict["passed"] and verdict["answers_equal_to_stock"]
    assert [round(r["error"], 3) for r in verdict["systems"]] == [0.1, 0.075, 0.067]


def test_a_system_16_percent_off_fails() -> None:
    verdict = compare([report(10.0, 8.0, 6.0)], [report(11.6, 8.0, 6.0)])
    assert not verdict["passed"]
    assert [r["ok"] for r in verdict["systems"]] == [False, True, True]


def test_a_speedup_off_by_more_than_a_tenth_fails_though_every_time_is_close() -> None:
    verdict = compare([report(10.0, 8.0, 5.0)], [report(10.7, 8.0, 4.6)])  # 2.00x real, 2.33x twin
    assert all(r["ok"] for r in verdict["systems"]) and not verdict["passed"]
    assert [s["ok"] for s in verdict["speedups"]] == [False, False]


def test_single_mode_has_no_stock_concurrent_to_compare() -> None:
    real, twin = report(10.0, 8.0, 6.0), report(10.5, 8.0, 6.2)
    for r in (real, twin):
        del r["systems"]["stock-concurrent"]
    verdict = compare([real], [twin])
    assert verdict["passed"] and [r["system"] for r in verdict["systems"]] == ["stock-sequential", "accel-topology"]
    assert [s["over"] for s in verdict["speedups"]] == ["stock-sequential"]


def test_unequal_answers_are_reported() -> None:
    assert not compare([report(10.0, 8.0, 6.0)], [report(10.0, 8.0, 6.0, equal=0.9)])["answers_equal_to_stock"]


def test_interleaved_repeats_compare_medians_so_one_outlying_real_run_does_not_decide() -> None:
    reals = [report(10.0, 64.0, 45.0), report(10.2, 95.0, 50.0), report(9.8, 66.0, 46.0)]  # one real run swung 48%
    twins = [report(10.5, 70.0, 48.0), report(10.6, 69.0, 47.5), report(10.4, 71.0, 48.5)]
    assert not compare(reals[1:2], twins[1:2])["passed"]
    verdict = compare(reals, twins)
    assert verdict["passed"] and verdict["runs"] == 3
    concurrent = verdict["systems"][1]
    assert (concurrent["real_s"], concurrent["twin_s"]) == (66.0, 70.0)
    assert concurrent["real_runs_s"] == [64.0, 95.0, 66.0]


def test_the_real_decode_step_is_set_beside_the_profiles_so_a_stale_profile_shows() -> None:
    step = profile_decode_step_ms("cpu-reference")
    assert step is not None and 5.0 < step < 100.0  # the measured batch-1 row, in ms
    assert profile_decode_step_ms("h100-8b") is None  # a GPU profile has no such row
    moved = drift(16.0, [18.0, 19.0, 18.4])
    assert moved["real_ms"] == [18.0, 19.0, 18.4] and round(moved["change"], 3) == 0.15
    table = markdown([{"case": "langchain single 8", "machine_drift": moved,
                       "comparison": compare([report(10.0, 8.0, 6.0)], [report(10.0, 8.0, 6.0)])}])
    assert "| langchain single 8 | real batch-1 decode step, ms (profile 16.0) | 18.0 / 19.0 / 18.4 | | +15.0% | drift |" in table
    assert drift(None, [18.0])["change"] is None


def test_a_real_stack_that_kept_its_prefix_cache_between_systems_stops_the_check_with_the_remedy(tmp_path: Path) -> None:
    check_reset({"prefix_cache_reset_between_systems": True}, tmp_path)
    with pytest.raises(CannotReset) as stop:
        check_reset({"prefix_cache_reset_between_systems": False}, tmp_path)
    assert "VLLM_SERVER_DEV_MODE=1" in str(stop.value) and f"ACCEL_HOME={tmp_path} accel down" in str(stop.value)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_the_real_stack_is_stopped_while_the_twins_run_and_continued_after(tmp_path: Path) -> None:
    server = started_stand_in(home_tag(tmp_path))
    try:
        with frozen(tmp_path) as stopped:
            assert stopped == [server.pid]
            _, status = os.waitpid(server.pid, os.WUNTRACED)  # until the kernel has stopped it
            assert os.WIFSTOPPED(status) and _state(server.pid) == "T"
        _, status = os.waitpid(server.pid, os.WCONTINUED)
        assert os.WIFCONTINUED(status) and server.poll() is None
    finally:
        server.kill()
        server.wait()


async def test_the_twins_of_a_home_replay_a_recording_inside_and_their_own_content_after(tmp_path: Path) -> None:
    import asyncio
    import json

    from accel.benchmarks.twin_validation import replaying
    from accel.engines.twin.encoder_server import TwinEncoderServer
    from accel.engines.twin.profile import load_profile

    server = TwinEncoderServer(load_profile("h100-8b"), "embed")
    await server.start()
    try:
        (tmp_path / "stack.json").write_text(json.dumps({"embed_base_url": server.listener.base_url + "/v1"}))
        recording = tmp_path / "content.jsonl"
        recording.write_text(json.dumps({"path": "/v1/embeddings", "request": {"input": "x"},
                                         "response": json.dumps({"data": [{"index": 0, "embedding": [1.0] * 384}]})}) + "\n")

        def inside() -> int:
            with replaying(tmp_path, recording):
                return len(server.replay.vectors)

        assert await asyncio.to_thread(inside) == 1
        assert server.replay.vectors == {}
    finally:
        await server.close()
