"""How far the capacity probe's batch sizes go (benchmarks/capacity_profile.py): on past the
default ladder while one of the last two doublings still gains, as a GPU's engines do, and no
further; and which device it puts each engine on (one for engines on this machine's cores, one
each for GPU twins). On fake costs, no engines and no clocks."""

from __future__ import annotations

from typing import Any

import pytest

from accel.benchmarks import capacity_profile
from accel.benchmarks.capacity_profile import STILL_GAINING, TEXT_SIZES, ladder_top, still_gaining, text_throughputs


def test_a_ladder_doubles_while_one_of_its_last_two_doublings_gained() -> None:
    assert still_gaining({16: 100.0, 32: 100.0 * STILL_GAINING}, most=1024) == 64
    assert still_gaining({16: 100.0, 32: 100.0 * STILL_GAINING * 0.99}, most=1024) is None  # saturated
    flat = 100.0 * STILL_GAINING * 0.99
    assert still_gaining({8: 50.0, 16: 100.0, 32: flat}, most=1024) == 64  # one flat doubling after a gain
    assert still_gaining({8: 50.0, 16: 100.0, 32: flat, 64: flat * STILL_GAINING}, most=1024) == 128  # it gains again
    assert still_gaining({16: 100.0, 32: flat, 64: flat * 1.01}, most=1024) is None  # two flat doublings
    assert still_gaining({16: 100.0, 32: 300.0}, most=32) is None  # at the cap
    assert still_gaining({1: 10.0, 32: 300.0}, most=1024) is None  # a later round's (first, best) sizes


@pytest.mark.parametrize(("saturates_at", "largest"), [(8, 32), (256, 1024), (4096, 1024)])
def test_text_throughputs_follow_the_gain_to_its_end_or_the_cap(saturates_at: int, largest: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # a call costs 1 s up to `saturates_at` items (perfect batching), then grows with the items
    seconds = {"last": 0.0}

    def run(batch: int) -> None:
        seconds["last"] = max(1.0, batch / saturates_at)

    def fastest(fn: Any, repeats: int) -> float:
        fn()
        return seconds["last"]

    monkeypatch.setattr(capacity_profile, "fastest", fastest)
    rates = text_throughputs(run)
    assert max(rates) == largest and set(TEXT_SIZES) <= set(rates)
    assert max(rates.values()) == min(saturates_at, largest)  # the best throughput found, items/s


def test_ladder_top_is_the_first_power_of_two_covering_what_is_in_flight() -> None:
    assert [ladder_top(n, 1024) for n in (1, 3, 4, 12, 32, 96, 5000)] == [1, 4, 4, 16, 32, 128, 1024]


def _fake_engines(monkeypatch: pytest.MonkeyPatch, measured: dict[str, list[int]]) -> None:
    """Engines that gain without end (1 s a call, whatever its size), recording each batch size."""
    from accel.benchmarks import encoders

    class Endless:
        def embed(self, texts: list[str]) -> None:
            measured["embed"].append(len(texts))

        def rerank(self, pairs: list[Any]) -> None:
            measured["rerank"].append(len(pairs))

    async def speedups(*args: Any, most: int, **kwargs: Any) -> dict[int, float]:
        rates = {b: float(b) for b in args[4]}
        while (size := still_gaining(rates, most)) is not None:
            rates[size] = float(size)
        measured["llm"].extend(rates)
        return rates

    monkeypatch.setattr(encoders, "encoders_for", lambda *a, **k: Endless())
    monkeypatch.setattr(capacity_profile, "llm_speedups", speedups)
    monkeypatch.setattr(capacity_profile, "fastest", lambda fn, repeats: (fn(), 1.0)[1])  # 1 s a call: items/s = batch


SPEC_KW = {"embed_batch": 3, "rerank_pairs": 16}
STACK = type("Stack", (), {"openai_base_url": "http://fake/v1", "model": "tiny", "max_tokens": 8})()


@pytest.mark.parametrize(("queries", "llm_width", "tops"), [(4, 1, (16, 64, 4)), (4, 3, (16, 64, 16)), (32, 1, (128, 512, 32))])
def test_no_engine_is_credited_a_batch_the_workload_cannot_form(queries: int, llm_width: int, tops: tuple[int, int, int],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # every engine gains without end, so each ladder's best is where the workload's in-flight cap stops it
    from accel.benchmarks.apps import ExampleSpec

    measured: dict[str, list[int]] = {"embed": [], "rerank": [], "llm": []}
    _fake_engines(monkeypatch, measured)
    spec = ExampleSpec("fake", {}, "expansion, 3 texts embedded, 16 pairs reranked", **SPEC_KW)
    probe = capacity_profile.CapacityProbe(spec, STACK, ["q"] * 4, ["chunk"] * 4, queries)
    work = {w.engine: w.best_batch for w in probe.work(2.0, llm_width)}
    assert (work["embed"], work["rerank"], work["llm"]) == tops
    assert max(measured["embed"]) == tops[0] and max(measured["rerank"]) == tops[1] and max(measured["llm"]) == tops[2]
    again = {w.engine: w.best_batch for w in probe.work(2.0, llm_width)}  # a later round: the reference and the best
    assert again == work


def test_the_probe_puts_each_engine_on_the_device_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    # GPU twins: each server its own device, so the bound takes the busiest, not the sum
    from accel.benchmarks.apps import ExampleSpec
    from accel.benchmarks.capacity_bound import ONE_DEVICE, capacity_bound
    from accel.benchmarks.twin_run import devices

    _fake_engines(monkeypatch, {"embed": [], "rerank": [], "llm": []})
    spec = ExampleSpec("fake", {}, "expansion, 3 texts embedded, 16 pairs reranked", **SPEC_KW)
    shared = capacity_profile.CapacityProbe(spec, STACK, ["q"] * 4, ["chunk"] * 4, 32).work(2.0)
    split = capacity_profile.CapacityProbe(spec, STACK, ["q"] * 4, ["chunk"] * 4, 32, devices("h100-8b")).work(2.0)
    assert {w.device for w in shared} == {ONE_DEVICE}
    assert {w.engine: w.device for w in split} == {"embed": "embed twin", "rerank": "rerank twin", "llm": "llm twin"}
    seconds = {w.engine: w.seconds(32) for w in split}
    assert capacity_bound(split, 32)["makespan_s"] == pytest.approx(max(seconds.values()))
    assert capacity_bound(shared, 32)["makespan_s"] == pytest.approx(sum(seconds.values()))


def test_twins_of_engines_on_this_machine_s_cores_share_one_device() -> None:
    from accel.benchmarks.twin_run import devices

    assert devices("cpu-reference") == {}  # its twins burn the host's cores, as the real stack does
    assert set(devices("h100-8b")) == {"llm", "embed", "rerank"} and len(set(devices("h100-8b").values())) == 3
