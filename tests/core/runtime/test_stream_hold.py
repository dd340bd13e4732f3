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


class FakeClock:
    """The scheduler's clock, moved by hand: holds are decided on it, so what a hold does at a
    given moment is asserted without timing anything (its real waits are 10 s, never reached)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def settle() -> None:
    """Yield to the loop until the dispatcher has acted on what just changed: a fixed number of
    turns (two suffice today), no timing, so a busy machine cannot change the outcome."""
    for _ in range(10):
        await asyncio.sleep(0)


async def arrive(sched: EngineScheduler, clock: FakeClock, at: float, item: object) -> asyncio.Task:
    """Submit one item (its own query's) at fake time `at` and let the dispatcher decide on it."""
    clock.now = at
    caller = asyncio.create_task(sched.submit(node(f"q{item}", [item])))
    await settle()
    return caller


async def poke(sched: EngineScheduler, clock: FakeClock, at: float) -> None:
    """Wake the dispatcher at fake time `at` (a stream opens and ends: nothing else changes)."""
    clock.now = at
    with sched.feeding():
        pass
    await settle()


async def test_items_of_open_streams_go_in_one_call_when_the_last_stream_ends():
    engine, clock = FakeEngine(compute=lambda r: r), FakeClock()
    limits = EngineLimits(max_batch_size=64, call_overhead_s=10.0)  # the clock never passes a hold's end here
    async with EngineScheduler("e", engine, limits=limits, clock=clock) as sched:
        streams = [sched.feeding() for _ in range(3)]
        for stream in streams:
            stream.__enter__()
        callers = []
        for i, stream in enumerate(streams):
            callers.append(await arrive(sched, clock, float(i), i))  # each item on its own, as decoded lines come
            assert engine.batches == []  # held: other streams are open
            stream.__exit__(None, None, None)
        assert await asyncio.gather(*callers) == [[0], [1], [2]]
    assert engine.batches == [[0, 1, 2]]


async def test_a_held_call_slides_with_items_that_keep_coming_and_goes_one_overhead_after_the_newest():
    engine, clock = FakeEngine(compute=lambda r: r), FakeClock()
    async with EngineScheduler("e", engine, limits=EngineLimits(call_overhead_s=10.0), clock=clock) as sched:
        with sched.feeding(), sched.feeding():
            callers = [await arrive(sched, clock, 0.0, "a"), await arrive(sched, clock, 5.0, "b"),
                       await arrive(sched, clock, 12.0, "c")]  # past a's own window: the newest counts
            await poke(sched, clock, 21.0)
            assert engine.batches == []  # c arrived under one overhead ago
            await poke(sched, clock, 22.5)  # one overhead after c: it goes now
            assert engine.batches == [["a", "b", "c"]]
            assert await asyncio.gather(*callers) == [["a"], ["b"], ["c"]]
    assert engine.batches == [["a", "b", "c"]]


async def test_an_item_later_than_one_call_after_the_newest_goes_in_a_call_of_its_own():
    engine, clock = FakeEngine(compute=lambda r: r), FakeClock()
    async with EngineScheduler("e", engine, limits=EngineLimits(call_overhead_s=10.0), clock=clock) as sched:
        with sched.feeding(), sched.feeding():  # streams stay open, bringing nothing in time
            first = await arrive(sched, clock, 0.0, "a")
            await poke(sched, clock, 9.0)
            assert engine.batches == []
            await poke(sched, clock, 10.0)  # a later item would have found the engine free again
            assert engine.batches == [["a"]]
            assert await first == ["a"]
            second = await arrive(sched, clock, 15.0, "b")
            await poke(sched, clock, 25.0)
            assert engine.batches == [["a"], ["b"]]
            assert await second == ["b"]
    assert engine.batches == [["a"], ["b"]]


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
