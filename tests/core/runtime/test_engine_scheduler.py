"""Engine schedulers on fake engines: batching, backpressure, LLM admission, cancellation."""

import asyncio

import pytest

from accel.engines.base import Engine, GenerationRequest, Health
from accel.engines.errors import EngineDied, InvalidRequest
from accel.runtime.engine_scheduler import EngineScheduler
from accel.testing.fakes import FakeEngine, FakeLLMEngine
from accel.runtime.limits import EngineLimits
from accel.runtime.task import EngineTask


class GatedFakeEngine(Engine):
    """Fake batch engine whose calls finish only when the test opens the gate."""

    kind = "embed"

    def __init__(self) -> None:
        self.name = "gated"
        self.gate = asyncio.Event()
        self.batches: list[list] = []
        self.cancelled = 0
        self.entered = asyncio.Event()

    async def run(self, batch):
        self.batches.append(list(batch))
        self.entered.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        for r in batch:
            if r == "bad":
                raise InvalidRequest(self.name, "bad request", "send a good one")
        return [f"done:{r}" for r in batch]

    async def health(self):
        return Health(self.name, True, "")


def node(query, name, depth, requests):
    return EngineTask(query, name, depth, list(requests))


async def test_results_come_back_in_request_order_across_split_batches():
    engine = FakeEngine(compute=lambda r: r * 10)
    async with EngineScheduler("e", engine, limits=EngineLimits(max_batch_size=2)) as sched:
        assert await sched.submit(node("q", "n", 0, [1, 2, 3, 4, 5])) == [10, 20, 30, 40, 50]
    assert [len(b) for b in engine.batches] == [2, 2, 1]


async def test_concurrent_nodes_of_many_queries_share_batches():
    engine = GatedFakeEngine()
    async with EngineScheduler("e", engine, limits=EngineLimits(max_batch_size=4)) as sched:
        first = asyncio.create_task(sched.submit(node("q0", "n", 0, ["a"])))
        await engine.entered.wait()  # the first batch went alone: the engine was idle
        rest = [asyncio.create_task(sched.submit(node(f"q{i}", "n", 0, [i]))) for i in range(1, 7)]
        await asyncio.sleep(0)
        engine.gate.set()
        await asyncio.gather(first, *rest)
    assert [len(b) for b in engine.batches] == [1, 4, 2]


async def test_backpressure_bounds_the_queue():
    engine = GatedFakeEngine()
    limits = EngineLimits(max_batch_size=1, queue_limit=3)
    async with EngineScheduler("e", engine, limits=limits) as sched:
        callers = [asyncio.create_task(sched.submit(node(f"q{i}", "n", 0, [i]))) for i in range(10)]
        await engine.entered.wait()
        await asyncio.sleep(0)  # let the remaining callers reach submit
        assert sched.queued == 3  # one running, three queued, six callers waiting in submit
        assert len(engine.batches) == 1
        engine.gate.set()
        results = await asyncio.gather(*callers)
    assert results == [[f"done:{i}"] for i in range(10)]


async def test_one_bad_request_fails_only_its_own_node():
    engine = GatedFakeEngine()
    engine.gate.set()
    async with EngineScheduler("e", engine, limits=EngineLimits(max_batch_size=8)) as sched:
        good, bad = node("q1", "n", 0, ["x", "y"]), node("q2", "n", 0, ["bad"])
        outcomes = await asyncio.gather(sched.submit(good), sched.submit(bad), return_exceptions=True)
    assert outcomes[0] == ["done:x", "done:y"]
    assert isinstance(outcomes[1], InvalidRequest)
    assert engine.batches == [["x", "y", "bad"], ["x", "y"], ["bad"]]  # mixed batch, then isolated


async def test_cancelling_the_only_owner_cancels_the_engine_call():
    engine = GatedFakeEngine()
    async with EngineScheduler("e", engine) as sched:
        caller = asyncio.create_task(sched.submit(node("q", "n", 0, ["a"])))
        await engine.entered.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert engine.cancelled == 1


async def test_a_shared_batch_survives_one_owner_cancelling():
    engine = GatedFakeEngine()
    async with EngineScheduler("e", engine) as sched:
        a = asyncio.create_task(sched.submit(node("q1", "n", 0, ["a"])))
        b = asyncio.create_task(sched.submit(node("q2", "n", 0, ["b"])))
        await engine.entered.wait()
        assert engine.batches == [["a", "b"]]
        a.cancel()
        with pytest.raises(asyncio.CancelledError):
            await a
        engine.gate.set()
        assert await b == ["done:b"]
    assert engine.cancelled == 0


async def test_llm_requests_get_ids_and_priority_from_depth():
    llm = FakeLLMEngine()
    async with EngineScheduler("llm", llm) as sched:
        deep = node("q", "deep", 5, [GenerationRequest(prompt="a")])
        shallow = node("q", "shallow", 1, [GenerationRequest(prompt="b")])
        await asyncio.gather(sched.submit(shallow), sched.submit(deep))
    by_prompt = {r.prompt: r for r in llm.requests}
    assert by_prompt["a"].priority < by_prompt["b"].priority  # vLLM: lower value runs first
    assert by_prompt["a"].request_id and by_prompt["a"].request_id != by_prompt["b"].request_id


async def test_llm_admission_is_in_policy_order_and_capped():
    llm = FakeLLMEngine(latency=0.01)
    limits = EngineLimits(max_inflight=2)
    async with EngineScheduler("llm", llm, limits=limits) as sched:
        tasks = [node("q1", "B", 1, [GenerationRequest(prompt="B")]), node("q1", "A", 3, [GenerationRequest(prompt="A")]),
                 node("q2", "G", 1, [GenerationRequest(prompt="G")]), node("q2", "H", 2, [GenerationRequest(prompt="H")])]
        for i, t in enumerate(tasks):
            t.arrival = float(i)
        await asyncio.gather(*(sched.submit(t) for t in tasks))
    assert [r.prompt for r in llm.requests] == ["A", "H", "B", "G"]


async def test_cancelling_an_llm_node_aborts_its_request():
    llm = FakeLLMEngine(latency=30.0)
    async with EngineScheduler("llm", llm) as sched:
        caller = asyncio.create_task(sched.submit(node("q", "n", 0, [GenerationRequest(prompt="p")])))
        while not llm.active:
            await asyncio.sleep(0)
        [request_id] = llm.active
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
    assert llm.aborted == [request_id]
    assert llm.stopped == [request_id] and not llm.active


async def test_streaming_is_admitted_and_aborted_when_left_early():
    llm = FakeLLMEngine(reply=lambda r: "one two three four")
    async with EngineScheduler("llm", llm, limits=EngineLimits(max_inflight=1)) as sched:
        chunks = [c.delta async for c in sched.stream(node("q", "s", 0, [GenerationRequest(prompt="p")]))]
        assert "".join(chunks) == "one two three four"
        stream = sched.stream(node("q", "s2", 0, [GenerationRequest(prompt="p")]))
        async for chunk in stream:
            break
        await stream.aclose()
        assert len(llm.aborted) == 1 and not llm.active
        # the slot was released: another request is admitted
        assert await sched.submit(node("q", "n", 0, [GenerationRequest(prompt="x")]))


async def test_submit_before_start_is_a_typed_error():
    from accel.engines.errors import EngineUnavailable

    sched = EngineScheduler("e", FakeEngine())
    with pytest.raises(EngineUnavailable, match="not started"):
        await sched.submit(node("q", "n", 0, [1]))


class FakeTypedFailureEngine(FakeEngine):
    """A fake batch engine raising `error` for the request "bad" (a backend's own exception type)."""

    def __init__(self, error: Exception) -> None:
        super().__init__("typed-failure")
        self.error = error

    async def run(self, batch):
        self.batches.append(list(batch))
        if "bad" in batch:
            raise self.error
        return [f"done:{r}" for r in batch]


async def test_a_backend_error_of_any_type_fails_only_the_bad_query():
    """Regression (issue 14 bad inputs): a lone surrogate made the tokenizer raise TypeError for
    the whole embed batch, failing the good query batched with it."""
    engine = FakeTypedFailureEngine(TypeError("TextEncodeInput must be Union[...]"))
    async with EngineScheduler("e", engine, limits=EngineLimits(max_batch_size=8)) as sched:
        good, bad = node("q1", "n", 0, ["x"]), node("q2", "n", 0, ["bad"])
        outcomes = await asyncio.gather(sched.submit(good), sched.submit(bad), return_exceptions=True)
    assert outcomes[0] == ["done:x"] and type(outcomes[1]) is TypeError  # the backend's own type, as stock
    assert engine.batches == [["x", "bad"], ["x"], ["bad"]]


async def test_engine_death_fails_the_batch_without_re_running_it():
    engine = FakeTypedFailureEngine(EngineDied("e", "killed", "restart it"))
    async with EngineScheduler("e", engine, limits=EngineLimits(max_batch_size=8)) as sched:
        outcomes = await asyncio.gather(sched.submit(node("q1", "n", 0, ["x"])), sched.submit(node("q2", "n", 0, ["bad"])),
                                        return_exceptions=True)
    assert all(isinstance(o, EngineDied) for o in outcomes)
    assert engine.batches == [["x", "bad"]]  # a dead engine is not hammered with per-query re-runs


async def test_calls_are_sized_by_expected_duration_not_count():
    """With a measured cost per request, a call holds what fits its time budget: many cheap
    texts, few expensive ones, and an oversized request alone (never dropped)."""
    engine = GatedFakeEngine()
    seconds = lambda text: 0.1 * len(text)  # noqa: E731 - a cost model by length
    limits = EngineLimits(max_batch_size=100, max_call_s=1.0, item_seconds=seconds)
    async with EngineScheduler("e", engine, limits=limits) as sched:
        first = asyncio.create_task(sched.submit(node("q0", "n", 0, ["a"])))
        await engine.entered.wait()
        cheap = asyncio.create_task(sched.submit(node("q1", "n", 0, ["a"] * 12)))
        dear = asyncio.create_task(sched.submit(node("q2", "n", 0, ["aaaa", "aaaaaaaaaaaaaaa", "aaa"])))
        await asyncio.sleep(0)
        engine.gate.set()
        await asyncio.gather(first, cheap, dear)
    assert engine.batches[1:] == [["a"] * 10, ["a", "a", "aaaa"], ["a" * 15], ["aaa"]]  # 1.5 s: alone


def test_duration_limits_are_checked():
    with pytest.raises(ValueError, match="max_call_s"):
        EngineLimits(max_call_s=0)
    assert not EngineLimits(max_call_s=1.0).sized_by_duration  # no cost model: sized by count
