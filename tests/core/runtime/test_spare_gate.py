"""The spare-capacity gate of learned prefill's warm-ups (`accel.runtime.programs.SpareGate`):
a group is admitted only while the engine's load plus the groups already admitted stay under
the measured spare figure, and a group that leaves frees its place."""

from __future__ import annotations

from accel.runtime.programs import SpareGate


def test_groups_are_admitted_while_the_engine_has_spare_capacity() -> None:
    load = [0]
    gate = SpareGate(lambda: load[0], lambda: 2)
    assert gate.try_enter() and gate.try_enter()
    assert not gate.try_enter()  # two groups in flight count as load
    gate.leave()
    assert gate.try_enter()
    gate.leave()
    gate.leave()
    load[0] = 2  # the engine's own requests fill it
    assert not gate.try_enter()
    load[0] = 1
    assert gate.try_enter() and not gate.try_enter()
