"""Engine schedulers holding a call for the items of open streams (`EngineScheduler.feeding`,
`EngineLimits.call_overhead_s`), on fake batch engines: what is held, for how long at most,
and what goes at once."""

import asyncio

from accel.runtime.engine_scheduler import EngineScheduler
from accel.runtime.limits import EngineLimits
from accel.runtime.task import EngineTask
from accel.testing.fakes import FakeEngine

OVERHEAD = 0.05


def node(query: str, requests: list) -> EngineTask:
    return EngineTask(query, "embed", 0, list(requests))


async def test_items_of_open_streams_go_in_one_call_when_the_last_stream_ends():
    engine = FakeEngine(compute=lambda r: r)
    limits = EngineLimits(max_batch_size=64, call_overhead_s=10.0)  # the bound never ends the hold here
    async with EngineScheduler("e", engine, limits=limits) as sched:
        streams = [sched.feeding() for _ in range(3)]
        for stream in streams:
            stream.__enter__()
        callers = []
        for i, stream in enumerate(streams):
            callers.append(asyncio.create_task(sched.submit(node(f"q{i}", [i]))))
            await asyncio.sleep(0)  # each item arrives on its own, as decoded lines do
            await asyncio.sleep(0)
            assert engine.batches == []  # held: other streams are open
            stream.__exit__(None, None, None)
        assert await asyncio.gather(*callers) == [[0], [1], [2]]
    assert engine.batches == [[0, 1, 2]]


async def test_a_held_call_waits_at_most_the_overhead_per_call_it_can_spare():
    engine = FakeEngine(compute=lambda r: r)
    loop = asyncio.get_running_loop()
    async with EngineScheduler("e", engine, limits=EngineLimits(call_overhead_s=OVERHEAD)) as sched:
        with sched.feeding(), sched.feeding():  # two streams that bring nothing more: two calls spared at most
            began = loop.time()
            assert await sched.submit(node("q0", ["a"])) == ["a"]
            waited = loop.time() - began
    assert 2 * OVERHEAD * 0.9 <= waited < 2 * OVERHEAD + 1.0, waited
    assert engine.batches == [["a"]]


async def test_without_open_streams_or_measured_overhead_a_call_goes_at_once():
    for limits, streams in ((EngineLimits(call_overhead_s=10.0), 0), (EngineLimits(), 2)):
        engine = FakeEngine(compute=lambda r: r)
        async with EngineScheduler("e", engine, limits=limits) as sched:
            for _ in range(streams):
                sched.feeding().__enter__()
            first = asyncio.create_task(sched.submit(node("q0", ["a"])))
            await asyncio.wait_for(first, timeout=5.0)  # a 10 s hold would time this out
        assert engine.batches == [["a"]]


async def test_a_full_batch_is_not_held():
    engine = FakeEngine(compute=lambda r: r)
    async with EngineScheduler("e", engine, limits=EngineLimits(max_batch_size=2, call_overhead_s=10.0)) as sched:
        with sched.feeding():
            results = await asyncio.wait_for(sched.submit(node("q0", ["a", "b"])), timeout=5.0)
    assert results == ["a", "b"] and engine.batches == [["a", "b"]]


class SlowFakeEngine(FakeEngine):
    """Fake batch engine whose calls take `seconds` (a loaded server's per-call cost)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(compute=lambda r: r)
        self.seconds = seconds

    async def run(self, batch):
        await asyncio.sleep(self.seconds)  # the engine's own work, not coordination
        return await super().run(batch)


async def test_the_hold_follows_what_calls_cost_now():
    """A server slower than its profile (loaded): the observed per-call cost bounds the hold."""
    engine = SlowFakeEngine(0.2)
    loop = asyncio.get_running_loop()
    async with EngineScheduler("e", engine, limits=EngineLimits(call_overhead_s=0.001)) as sched:
        for i in range(4):  # calls of one request each: each counts whole
            await sched.submit(node(f"w{i}", [i]))
        with sched.feeding():
            began = loop.time()
            await sched.submit(node("q", ["a"]))
            waited = loop.time() - began - engine.seconds
    assert waited >= 0.1, waited  # held about 0.2 * (1 - 0.75**4) = 0.14 s, not the profile's 1 ms
