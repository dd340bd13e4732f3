"""Request sharing inside a batch call's scope, on fake engines (scheduler unit tests): identical
deterministic requests run once, each query gets its own copy, a failing shared request fails
exactly the queries that wait on it, a query leaving early does not stop the others' work."""

from __future__ import annotations

import asyncio

import pytest

from accel.engines.base import GenerationRequest, SamplingParams, VectorQuery
from accel.engines.errors import EngineDied, InvalidRequest
from accel.engines.llm.api_call import APICall
from accel.runtime.engine_scheduler import EngineScheduler
from accel.testing.fakes import FakeEngine, FakeLLMEngine
from accel.runtime.sharing import ShareScope, batch_scope, current_scope, request_key
from accel.runtime.task import EngineTask


def task(query: str, requests: list, node: str = "n") -> EngineTask:
    return EngineTask(query, node, 0, list(requests))


def test_keys_only_for_deterministic_requests() -> None:
    greedy = GenerationRequest(prompt="p", params=SamplingParams(temperature=0.0))
    assert request_key(greedy) == request_key(GenerationRequest(prompt="p", priority=3, request_id="x"))
    assert request_key(GenerationRequest(prompt="p", params=SamplingParams(temperature=0.7))) is None
    assert request_key(GenerationRequest(prompt="p", params=SamplingParams(temperature=0.7, seed=1))) is not None
    assert request_key(GenerationRequest(prompt="p", params=SamplingParams(max_tokens=3))) != request_key(greedy)

    def call(body: bytes, url: str = "http://h/v1/chat/completions") -> APICall:
        return APICall("POST", url, (("x-stainless-retry-count", "0"),), body)

    assert request_key(call(b'{"model":"m","temperature":0,"messages":[]}')) == request_key(
        APICall("POST", "http://h/v1/chat/completions", (("x-stainless-retry-count", "1"),), b'{"messages": [], "temperature": 0, "model": "m"}'))
    assert request_key(call(b'{"model":"m","messages":[]}')) is None  # the server's default temperature samples
    assert request_key(call(b'{"model":"m","temperature":0,"stream":true}')) is None
    assert request_key(call(b"not json")) is None
    assert request_key("text") == ("text", "text")
    assert request_key(("q", "passage")) is not None
    assert request_key(VectorQuery([0.1, 0.2], 3, "c")) == request_key(VectorQuery((0.1, 0.2), 3, "c"))
    assert request_key(object()) is None


def test_scope_is_entered_once_and_counts_into_the_callers_counters() -> None:
    counters: dict[str, int] = {}
    with batch_scope(None, counters) as outer:
        assert current_scope() is outer
        with batch_scope(None) as inner:
            assert inner is outer
        outer.shared["embed"] += 2
    assert current_scope() is None
    assert counters == {"shared embed requests": 2}


async def test_identical_requests_of_a_batch_run_once_and_each_query_gets_a_copy() -> None:
    engine = FakeEngine(latency=0.01, compute=lambda text: {"vector": [len(text)]})
    scope = ShareScope()
    async with EngineScheduler("embed", engine) as sched:
        async def query(q: str, texts: list[str]) -> list:
            return await scope.submit(sched, task(q, texts))

        a, b, c = await asyncio.gather(query("q0", ["x", "yy"]), query("q1", ["yy", "zzz"]), query("q2", ["x"]))
        later = await query("q3", ["zzz"])  # after the others finished: served from the scope
    assert a == [{"vector": [1]}, {"vector": [2]}] and b == [{"vector": [2]}, {"vector": [3]}] and c == [{"vector": [1]}]
    assert later == [{"vector": [3]}]
    assert sorted(r for batch in engine.batches for r in batch) == ["x", "yy", "zzz"]
    assert scope.shared["embed"] == 3 and scope.computed["embed"] == 3
    a[1]["vector"].append(99)
    assert b[0] == {"vector": [2]}  # queries never see each other's mutations


async def test_unkeyed_requests_are_never_shared() -> None:
    llm = FakeLLMEngine()
    sampled = GenerationRequest(prompt="p", params=SamplingParams(temperature=1.0))
    scope = ShareScope()
    async with EngineScheduler("llm", llm) as sched:
        await asyncio.gather(scope.submit(sched, task("q0", [sampled])), scope.submit(sched, task("q1", [sampled])))
    assert len(llm.requests) == 2 and not scope.shared


async def test_a_failing_shared_request_fails_exactly_the_queries_that_share_it() -> None:
    def compute(text: str) -> str:
        if text == "bad":
            raise InvalidRequest("embed", "cannot embed 'bad'", "send another text")
        return text.upper()

    class Failing(FakeEngine):
        async def run(self, batch):
            self.batches.append(list(batch))
            return [compute(r) for r in batch]

    engine = Failing()
    scope = ShareScope()
    async with EngineScheduler("embed", engine) as sched:
        outcomes = await asyncio.gather(
            scope.submit(sched, task("q0", ["ok", "bad"])),
            scope.submit(sched, task("q1", ["bad"])),
            scope.submit(sched, task("q2", ["ok", "fine"])),
            return_exceptions=True,
        )
    assert isinstance(outcomes[0], InvalidRequest)
    # q1 waited for 'bad' in q0's task, which failed as a whole: 'bad' ran alone, and failed alike
    assert isinstance(outcomes[1], InvalidRequest) and str(outcomes[1]) == str(outcomes[0])
    assert outcomes[2] == ["OK", "FINE"]  # 'ok' was in q0's failed task too: run alone, it answers
    assert scope.computed["embed"] == 3 and scope.shared["embed"] == 2  # 'bad' and 'ok' were asked for twice
    assert ["bad"] in engine.batches and ["ok"] in engine.batches


async def test_a_task_failing_on_its_unkeyed_request_fails_no_query_sharing_its_keyed_one() -> None:
    bad = object()  # no key: never shared, but sent in the same engine task as 'ok'

    def compute(request: object) -> str:
        if request is bad:
            raise InvalidRequest("embed", "cannot embed this object", "send text")
        return str(request).upper()

    engine = FakeEngine(compute=compute)
    scope = ShareScope()
    async with EngineScheduler("embed", engine) as sched:
        owner, sharer = await asyncio.gather(scope.submit(sched, task("q0", ["ok", bad])),
                                             scope.submit(sched, task("q1", ["ok"])), return_exceptions=True)
    assert isinstance(owner, InvalidRequest) and sharer == ["OK"]
    assert ["ok"] in engine.batches  # run alone for q1


async def test_a_query_sends_its_unknown_requests_as_one_task() -> None:
    """A batch with nothing to share reaches the engine scheduler as it would without the scope:
    one task per query node, never one per request."""
    engine = FakeEngine(compute=str.upper)
    scope = ShareScope()
    async with EngineScheduler("embed", engine) as sched:
        enqueued: list[int] = []
        enqueue = sched._enqueue

        async def counting(t: EngineTask) -> None:
            enqueued.append(len(t.requests))
            await enqueue(t)

        sched._enqueue = counting  # type: ignore[method-assign]
        a, b = await asyncio.gather(scope.submit(sched, task("q0", ["a", "b", "a", "c"])),
                                    scope.submit(sched, task("q1", ["d", "e"])))
        c = await scope.submit(sched, task("q2", ["b", "f"]))
    assert (a, b, c) == (["A", "B", "A", "C"], ["D", "E"], ["B", "F"])
    assert enqueued == [3, 2, 1]  # q0's repeat of 'a' and q2's 'b' were shared, not sent
    assert scope.shared["embed"] == 2 and scope.computed["embed"] == 6


class Held(FakeEngine):
    """Each call runs until `release` is set; `started` gets each call's batch as it begins,
    `stopped` each batch whose call was cancelled: no test here waits on a clock."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.release = asyncio.Event()
        self.started: asyncio.Queue[list] = asyncio.Queue()
        self.stopped: asyncio.Queue[list] = asyncio.Queue()

    async def run(self, batch):
        await self.started.put(list(batch))
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            await self.stopped.put(list(batch))
            raise
        return [self.compute(r) for r in batch]


async def test_a_query_leaving_early_does_not_stop_work_others_wait_for() -> None:
    engine = Held(compute=str.upper)
    scope = ShareScope()
    async with EngineScheduler("embed", engine) as sched:
        first = asyncio.create_task(scope.submit(sched, task("q0", ["x"])))
        second = asyncio.create_task(scope.submit(sched, task("q1", ["x"])))
        assert await engine.started.get() == ["x"]
        assert scope.entries[("embed", ("text", "x"))][0].waiters == 2
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        engine.release.set()
        assert await second == ["X"]
        engine.release.clear()
        lonely = asyncio.create_task(scope.submit(sched, task("q2", ["y"])))
        assert await engine.started.get() == ["y"]
        lonely.cancel()
        await asyncio.gather(lonely, return_exceptions=True)
        assert await engine.stopped.get() == ["y"]
    assert engine.cancelled == 1  # 'y' had no other waiter: its engine call was stopped
    assert ("embed", ("text", "y")) not in scope.entries  # and a later query recomputes it


async def test_submit_uses_the_scope_of_the_calling_context() -> None:
    engine = FakeEngine(compute=str.upper)
    async with EngineScheduler("embed", engine) as sched:
        with batch_scope() as scope:
            results = await asyncio.gather(sched.submit(task("q0", ["a"])), sched.submit(task("q1", ["a"])))
        await sched.submit(task("q2", ["a"]))  # outside the scope: sent again
    assert results == [["A"], ["A"]] and scope.shared["embed"] == 1
    assert sum(len(b) for b in engine.batches) == 2


async def collect(stream) -> list:
    return [chunk async for chunk in stream]


def text_of(chunks: list) -> str:
    return "".join(chunk.delta for chunk in chunks)


async def test_identical_streamed_requests_of_a_batch_stream_once_and_each_query_gets_every_chunk() -> None:
    """Decode pipelining streams a query expansion; a batch repeating the question streams it
    from the engine once, and every query (while it streams, or after it ended) gets it whole."""
    llm = FakeLLMEngine(token_latency=0.001, reply=lambda r: "alpha beta gamma")
    greedy = SamplingParams(temperature=0.0)
    scope = ShareScope()
    async with EngineScheduler("llm", llm) as sched:
        def streamed(q: str, prompt: str):
            return scope.stream(sched, task(q, [GenerationRequest(prompt=prompt, params=greedy)]))

        a, b, other = await asyncio.gather(collect(streamed("q0", "p")), collect(streamed("q1", "p")), collect(streamed("q2", "o")))
        later = await collect(streamed("q3", "p"))  # after it ended: replayed from the scope
        sampled = await collect(scope.stream(sched, task("q4", [GenerationRequest(prompt="p", params=SamplingParams(temperature=0.7))])))
    assert [text_of(c) for c in (a, b, other, later, sampled)] == ["alpha beta gamma"] * 5
    assert len(a) == len(b) == len(later) > 2  # chunk by chunk, as the engine streamed them
    assert [r.prompt for r in llm.requests] == ["p", "o", "p"]  # the sampled one is never shared
    assert scope.shared["llm"] == 2 and scope.computed["llm"] == 2
    assert a[-1].generation is not b[-1].generation and a[-1].generation == b[-1].generation  # each its own copy


class Announcing(FakeLLMEngine):
    """A fake LLM that puts each request's prompt on `entered` as it starts: the tests wait on
    that, not on a clock or a spin."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.entered: asyncio.Queue[str] = asyncio.Queue()

    def _enter(self, request: GenerationRequest) -> str:
        request_id = super()._enter(request)
        self.entered.put_nowait(request.prompt)
        return request_id


async def test_a_shared_stream_stops_only_when_nobody_listens() -> None:
    llm = Announcing(token_latency=0.05, reply=lambda r: "one two three four five six")
    scope = ShareScope()
    request = GenerationRequest(prompt="p", params=SamplingParams(temperature=0.0))
    lone = GenerationRequest(prompt="y", params=request.params)
    async with EngineScheduler("llm", llm) as sched:
        first = asyncio.create_task(collect(scope.stream(sched, task("q0", [request]))))
        second = asyncio.create_task(collect(scope.stream(sched, task("q1", [request]))))
        assert await llm.entered.get() == "p"
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        assert text_of(await second) == "one two three four five six" and not llm.stopped
        lonely = asyncio.create_task(collect(scope.stream(sched, task("q2", [lone]))))
        assert await llm.entered.get() == "y"
        job = next(shared.job for shared in scope.streams.values() if not shared.chunks.closed)
        lonely.cancel()
        await asyncio.gather(lonely, job, return_exceptions=True)
        again = await collect(scope.stream(sched, task("q3", [lone])))
    assert len(llm.stopped) == 1 and llm.aborted  # 'y' had no other listener: its request was aborted
    assert text_of(again) == "one two three four five six"  # and a later query streamed it anew
    assert [r.prompt for r in llm.requests] == ["p", "y", "y"]


async def test_a_failing_shared_stream_fails_every_query_listening() -> None:
    def dies(request: GenerationRequest) -> str:
        raise EngineDied("llm", "the server went away", "restart it")

    llm = FakeLLMEngine(reply=dies)
    request = GenerationRequest(prompt="p", params=SamplingParams(temperature=0.0))
    scope = ShareScope()
    async with EngineScheduler("llm", llm) as sched:
        outcomes = await asyncio.gather(collect(scope.stream(sched, task("q0", [request]))),
                                        collect(scope.stream(sched, task("q1", [request]))), return_exceptions=True)
        with pytest.raises(InvalidRequest):  # a streamed node sends exactly one request
            await collect(scope.stream(sched, task("q2", [request, request])))
    assert [type(o) for o in outcomes] == [EngineDied, EngineDied]
    assert len(llm.requests) == 1


async def test_stream_uses_the_scope_of_the_calling_context() -> None:
    llm = FakeLLMEngine(reply=lambda r: "a b")
    request = GenerationRequest(prompt="p", params=SamplingParams(temperature=0.0))
    async with EngineScheduler("llm", llm) as sched:
        with batch_scope() as scope:
            inside = await asyncio.gather(collect(sched.stream(task("q0", [request]))), collect(sched.stream(task("q1", [request]))))
        outside = await collect(sched.stream(task("q2", [request])))
    assert [text_of(c) for c in (*inside, outside)] == ["a b"] * 3
    assert scope.shared["llm"] == 1 and len(llm.requests) == 2
