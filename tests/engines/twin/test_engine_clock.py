"""The twin's steps keep to the model's time when the twin's own work takes time: back-to-back
steps are timed from the previous step's end, and lag beyond a step is counted, not hidden."""

from __future__ import annotations

import pytest

from accel.engines.twin.content import OutputPlan
from accel.engines.twin.engine import Token, TwinEngine
from accel.engines.twin.profile import load_profile
from accel.engines.twin.scheduler import Seq

PROFILE = load_profile("h100-8b")


class WorkingClock:
    """A virtual clock on which the twin's own work between two steps takes `work_s`."""

    def __init__(self, work_s: float) -> None:
        self.time = 0.0
        self.work_s = work_s
        self.waits: list[float] = []

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.time += seconds + self.work_s


async def _generate(clock: WorkingClock, tokens: int) -> TwinEngine:
    engine = TwinEngine(PROFILE.llm, PROFILE.llm_config, sleep=clock.sleep, clock=clock.now)
    queue = engine.submit(Seq("r", list(range(1, 40)), tokens, OutputPlan([1], {"ignore_eos": True}, [5], None)))
    received = [await queue.get() for _ in range(tokens)]
    assert all(isinstance(item, Token) for item in received)
    await engine.close()
    return engine


async def test_work_shorter_than_a_step_is_absorbed() -> None:
    clock = WorkingClock(work_s=0.002)
    engine = await _generate(clock, 20)
    assert clock.waits[1] == pytest.approx(clock.waits[0] - 0.002, abs=1e-4)  # decode steps: ~9.6 ms each
    assert clock.time == pytest.approx(engine.simulated_s + 0.002, abs=1e-9)  # only the last step's work shows
    assert engine.lag_s == 0.0


async def test_work_longer_than_a_step_is_counted_as_lag() -> None:
    clock = WorkingClock(work_s=0.05)
    engine = await _generate(clock, 20)
    assert engine.lag_s > 0.5  # ~40 ms behind per step
    assert clock.time > engine.simulated_s + 0.5



async def test_busy_time_and_steps_count_the_steps_run_never_the_idle_time() -> None:
    # what a run's `twin:simulated_seconds_total` and `twin:steps_total` deltas say: how long the
    # modelled engine ran steps (a prompt's prefill and first token in one, then one per token)
    clock = WorkingClock(work_s=0.0)
    engine = TwinEngine(PROFILE.llm, PROFILE.llm_config, sleep=clock.sleep, clock=clock.now)
    for rid, tokens in (("a", 20), ("b", 5)):
        queue = engine.submit(Seq(rid, list(range(1, 40)), tokens, OutputPlan([1], {"ignore_eos": True}, [5], None)))
        received = [await queue.get() for _ in range(tokens)]
        assert all(isinstance(item, Token) for item in received)
        clock.time += 5.0  # then the engine idles: it waits for a request, no step runs
    await engine.close()
    assert engine.steps == 25
    assert engine.simulated_s == pytest.approx(sum(clock.waits), abs=1e-9)
    assert clock.time == pytest.approx(engine.simulated_s + 10.0)  # the idle 10 s not counted
    assert 25 * PROFILE.llm.floor_s <= engine.simulated_s < 0.5  # ~10 ms a step
