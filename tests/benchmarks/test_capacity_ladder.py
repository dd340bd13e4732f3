"""How far the capacity probe's batch sizes go (benchmarks/capacity_profile.py): on past the
default ladder while each doubling still gains, as a GPU's engines do, and no further; on fake
costs, no engines and no clocks."""

from __future__ import annotations

from typing import Any

import pytest

from accel.benchmarks import capacity_profile
from accel.benchmarks.capacity_profile import STILL_GAINING, TEXT_SIZES, still_gaining, text_throughputs


def test_a_ladder_doubles_only_while_the_last_doubling_gained() -> None:
    assert still_gaining({16: 100.0, 32: 100.0 * STILL_GAINING}, most=1024) == 64
    assert still_gaining({16: 100.0, 32: 100.0 * STILL_GAINING * 0.99}, most=1024) is None  # saturated
    assert still_gaining({16: 100.0, 32: 300.0}, most=32) is None  # at the cap
    assert still_gaining({1: 10.0, 32: 300.0}, most=1024) is None  # a later round's (first, best) sizes


@pytest.mark.parametrize(("saturates_at", "largest"), [(8, 32), (256, 512), (4096, 1024)])
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
