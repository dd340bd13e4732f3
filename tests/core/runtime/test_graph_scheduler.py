"""The graph scheduler and Runtime on fake engines, timed on a virtual clock (no wall-clock
thresholds): overlap, pipelining, topology-aware batching, failure isolation, cancellation."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from operator import itemgetter

import pytest

from accel.engines.base import GenerationRequest
from accel.engines.errors import EngineUnavailable
from accel.ir.getters import GetItemOp
from accel.ir import CallOp, GatherOp, GraphBuilder, ItemsOp, Kind, MissingInput, Schedule, Streams, Template
from accel.runtime import EngineLimits
from accel.testing.fakes import FakeEngine, FakeLLMEngine
from accel.runtime.runtime import Runtime


@dataclass(frozen=True)
class OneRequest:
    """Engine op sending one request labelled by the node, returning its single result."""

    label: str

    async def requests(self, values):
        return [self.label]

    def output(self, values, results):
        return results[0]


@dataclass(frozen=True)
class PromptDecode:
    async def requests(self, values):
        return [GenerationRequest(prompt=str(values["x"]))]

    def output(self, values, results):
        return results[0].text


@dataclass(frozen=True)
class WordsDecode:
    """A PartialDecode op: streams the reply and yields each complete word as a one-item slice."""

    async def requests(self, values):
        return [GenerationRequest(prompt=str(values["x"]))]

    async def stream(self, values, chunks):
        pending = ""
        async for chunk in chunks:
            pending += chunk.delta
            *words, pending = pending.split(" ")
            for word in words:
                yield [word]
        if pending:
            yield [pending]

    def output(self, values, results):
        return [[w] for w in results[0].text.split()]


def stamped(label):
    """Fake compute: the request plus the virtual time its batch finished."""
    return lambda r: (f"{label}:{r}", asyncio.get_running_loop().time())


def engine_node(b, name, engine, inputs, kind=Kind.SEARCH):
    return b.add(kind, name, engine=engine, inputs=inputs, op=OneRequest(name))


def test_independent_branches_overlap(virtual):
    b = GraphBuilder()
    x = b.input("x")
    left = engine_node(b, "left", "a", {"x": x})
    right = engine_node(b, "right", "b", {"x": x})
    b.output(b.add(Kind.AGGREGATE, "both", inputs={"l": left, "r": right}, op=GatherOp("list")))
    template = Template.from_graph(b.graph)

    async def main():
        engines = {"a": FakeEngine("a", latency=1.0), "b": FakeEngine("b", latency=1.0)}
        async with Runtime(engines) as rt:
            out = await rt.run(template, {"x": 0})
            return out, asyncio.get_running_loop().time()

    out, elapsed = virtual(main())
    assert out == ["left", "right"]
    assert elapsed == pytest.approx(1.0)  # not 2.0: the branches ran at the same time


def test_decode_items_pipeline_through_embed_and_search(virtual):
    b = GraphBuilder()
    x = b.input("x")
    words = b.add(Kind.PARTIAL_DECODE, "expand", engine="llm", inputs={"x": x}, schedule=Schedule(streams=Streams.DECODE), op=WordsDecode())
    vecs = b.add(Kind.EMBED, "embed", engine="embed", inputs={"items": words}, schedule=Schedule(streams=Streams.MAPPED, map_port="items"), op=ItemsOp("items"))
    hits = b.add(Kind.SEARCH, "search", engine="search", inputs={"items": vecs}, schedule=Schedule(map_port="items"), op=ItemsOp("items"))
    b.output(b.add(Kind.AGGREGATE, "flat", inputs={"hits": hits}, op=GatherOp("flatten")))
    template = Template.from_graph(b.graph)

    async def main():
        llm = FakeLLMEngine(token_latency=1.0, reply=lambda r: "alpha beta gamma delta")
        embed = FakeEngine("embed", latency=0.1, compute=lambda r: f"v({r})")
        search = FakeEngine("search", latency=0.1, compute=stamped("hit"))
        async with Runtime({"llm": llm, "embed": embed, "search": search}) as rt:
            return await rt.run(template, {"x": "q"})

    out = virtual(main())
    assert [hit for hit, _ in out] == ["hit:v(alpha)", "hit:v(beta)", "hit:v(gamma)", "hit:v(delta)"]
    # the first word was searched long before the decode finished (4 tokens, 1 s apart)
    assert out[0][1] < 3.0 and out[-1][1] > out[0][1]


def test_a_window_of_the_stream_passes_its_kept_items_on_before_the_decode_ends(virtual):
    """`itemgetter(slice(1, 3))` mapped over a decode's words: the runtime hands it each item's
    offset, so it keeps the second and third words, and the second is searched while the
    decode still writes the rest."""
    b = GraphBuilder()
    x = b.input("x")
    words = b.add(Kind.PARTIAL_DECODE, "expand", engine="llm", inputs={"x": x}, schedule=Schedule(streams=Streams.DECODE), op=WordsDecode())
    kept = b.add(Kind.CALL, "window", inputs={"value": words}, schedule=Schedule(streams=Streams.MAPPED, map_port="value"),
                 op=GetItemOp(itemgetter(slice(1, 3)), (1, 3)))
    hits = b.add(Kind.SEARCH, "search", engine="search", inputs={"items": kept}, schedule=Schedule(map_port="items"), op=ItemsOp("items"))
    whole = b.add(Kind.AGGREGATE, "kept", inputs={"kept": kept}, op=GatherOp("flatten"))
    b.output(b.add(Kind.AGGREGATE, "both", inputs={"kept": whole, "hits": b.add(Kind.AGGREGATE, "flat", inputs={"hits": hits}, op=GatherOp("flatten"))},
                   op=GatherOp("list")))
    template = Template.from_graph(b.graph)

    async def main():
        llm = FakeLLMEngine(token_latency=1.0, reply=lambda r: "alpha beta gamma delta epsilon")
        search = FakeEngine("search", latency=0.1, compute=stamped("hit"))
        async with Runtime({"llm": llm, "search": search}) as rt:
            return await rt.run(template, {"x": "q"})

    kept_words, hits = virtual(main())
    assert kept_words == ["beta", "gamma"]  # the stock getter's value on the whole list
    assert [hit for hit, _ in hits] == ["hit:beta", "hit:gamma"]
    assert hits[0][1] < 4.0  # searched before the decode's fifth token (5 tokens, 1 s apart)


def test_micro_batches_reach_the_consumer_before_the_producer_ends(virtual):
    b = GraphBuilder()
    docs = b.input("docs")
    vecs = b.add(Kind.EMBED, "embed", engine="embed", inputs={"docs": docs},
                 attrs={"batch_port": "docs"}, schedule=Schedule(streams=Streams.SLICES, micro_batch=2), op=ItemsOp("docs"))
    hits = b.add(Kind.SEARCH, "search", engine="search", inputs={"vecs": vecs}, schedule=Schedule(map_port="vecs"), op=ItemsOp("vecs"))
    b.output(b.add(Kind.AGGREGATE, "flat", inputs={"hits": hits}, op=GatherOp("flatten")))
    template = Template.from_graph(b.graph)

    async def main():
        embed = FakeEngine("embed", latency=1.0, compute=stamped("v"))
        search = FakeEngine("search", latency=0.5, compute=lambda r: r)
        limits = {"embed": EngineLimits(max_batch_size=2)}
        async with Runtime({"embed": embed, "search": search}, profiles=limits) as rt:
            out = await rt.run(template, {"docs": list("abcdef")})
            return out, [len(batch) for batch in embed.batches], search.batches

    out, embed_batches, search_batches = virtual(main())
    assert [v for v, _ in out] == [f"v:{c}" for c in "abcdef"]
    assert embed_batches == [2, 2, 2]
    # slice 0 was searched while slices 1 and 2 were still embedding
    assert len(search_batches) == 3 and search_batches[0][0][1] == pytest.approx(1.0)


def figure7_templates():
    """Teola Figure 7: on the shared "llm" engine, query 1's A (deep, critical path) and B
    (its child E also waits for D), query 2's H (deep) and G."""
    def q1():
        b = GraphBuilder()
        x = b.input("x")
        a = engine_node(b, "A", "llm", {"x": x}, Kind.DECODE)
        c = engine_node(b, "C", "other", {"a": a})
        d = engine_node(b, "D", "other", {"c": c})
        bb = engine_node(b, "B", "llm", {"x": x}, Kind.DECODE)
        e = engine_node(b, "E", "llm", {"d": d, "b": bb}, Kind.DECODE)
        b.output(e)
        return Template.from_graph(b.graph)

    def q2():
        b = GraphBuilder()
        x = b.input("x")
        g = engine_node(b, "G", "llm", {"x": x}, Kind.DECODE)
        h = engine_node(b, "H", "llm", {"x": x}, Kind.DECODE)
        i = engine_node(b, "I", "other", {"h": h})
        b.output(engine_node(b, "J", "llm", {"i": i, "g": g}, Kind.DECODE))
        return Template.from_graph(b.graph)

    return q1(), q2()


def run_figure7(virtual, policy):
    t1, t2 = figure7_templates()

    async def main():
        llm = FakeEngine("llm", latency=lambda n: 0.5 if n == 1 else 0.8)  # 512 tokens each, 1024 max
        other = FakeEngine("other", latency=0.6)
        limits = {"llm": EngineLimits(max_batch_size=2)}
        async with Runtime({"llm": llm, "other": other}, policy=policy, profiles=limits) as rt:
            loop = asyncio.get_running_loop()

            async def timed(template, qid):
                await rt.run(template, {"x": 0}, query_id=qid)
                return loop.time()

            done = await asyncio.gather(timed(t1, "q1"), timed(t2, "q2"))
            return done, [sorted(batch) for batch in llm.batches]

    return virtual(main())


def test_topology_aware_batching_beats_fifo_on_teola_figure_7(virtual):
    (t_q1, t_q2), topo_batches = run_figure7(virtual, "topology")
    (f_q1, f_q2), fifo_batches = run_figure7(virtual, "to")
    assert topo_batches[0] == ["A", "H"]  # both queries' critical-path nodes first
    assert fifo_batches[0] == ["A", "B"]  # blind batching by arrival
    assert (t_q1 + t_q2) < (f_q1 + f_q2)
    assert max(t_q1, t_q2) <= max(f_q1, f_q2)


def test_a_failing_query_fails_alone_with_its_own_exception(virtual):
    boom = KeyError("boom")

    def explode(hit):
        raise boom

    b = GraphBuilder()
    x = b.input("x")
    answer = b.add(Kind.DECODE, "answer", engine="llm", inputs={"x": x}, op=PromptDecode())
    hit = engine_node(b, "lookup", "search", {"x": x})
    bad = b.add(Kind.CALL, "parse", inputs={"hit": hit}, op=CallOp(explode, blocking=False))
    b.output(b.add(Kind.AGGREGATE, "both", inputs={"a": answer, "b": bad}, op=GatherOp("list")))
    failing = Template.from_graph(b.graph)

    b = GraphBuilder()
    x = b.input("x")
    b.output(b.add(Kind.DECODE, "answer", engine="llm", inputs={"x": x}, op=PromptDecode()))
    healthy = Template.from_graph(b.graph)

    async def main():
        llm = FakeLLMEngine(latency=10.0)
        engines = {"llm": llm, "search": FakeEngine("search", latency=1.0)}
        async with Runtime(engines) as rt:
            outcomes = await asyncio.gather(
                rt.run(failing, {"x": "bad"}, query_id="bad"),
                rt.run(healthy, {"x": "good"}, query_id="good"),
                return_exceptions=True,
            )
            return outcomes, llm

    (bad_outcome, good_outcome), llm = virtual(main())
    assert bad_outcome is boom
    assert good_outcome == "reply to good"
    assert [rid.split("/")[0] for rid in llm.aborted] == ["bad"]
    assert [rid.split("/")[0] for rid in llm.stopped] == ["bad"]


def test_cancelling_the_caller_aborts_the_llm_request(virtual):
    b = GraphBuilder()
    x = b.input("x")
    b.output(b.add(Kind.DECODE, "answer", engine="llm", inputs={"x": x}, op=PromptDecode()))
    template = Template.from_graph(b.graph)

    async def main():
        llm = FakeLLMEngine(latency=100.0)
        async with Runtime({"llm": llm}) as rt:
            caller = asyncio.create_task(rt.run(template, {"x": "q"}))
            await asyncio.sleep(1.0)
            assert len(llm.active) == 1
            caller.cancel()
            with pytest.raises(asyncio.CancelledError):
                await caller
            return llm, asyncio.get_running_loop().time()

    llm, now = virtual(main())
    assert len(llm.aborted) == 1 and not llm.active and llm.stopped == llm.aborted
    assert now < 100.0


def test_cancelling_a_streaming_query_aborts_the_stream(virtual):
    b = GraphBuilder()
    x = b.input("x")
    words = b.add(Kind.PARTIAL_DECODE, "expand", engine="llm", inputs={"x": x}, schedule=Schedule(streams=Streams.DECODE), op=WordsDecode())
    b.output(b.add(Kind.AGGREGATE, "flat", inputs={"w": words}, op=GatherOp("flatten")))
    template = Template.from_graph(b.graph)

    async def main():
        llm = FakeLLMEngine(token_latency=1.0, reply=lambda r: " ".join(["w"] * 50))
        async with Runtime({"llm": llm}) as rt:
            assert await rt.run(Template.from_graph(b.graph), {"x": "q"}) == ["w"] * 50
            caller = asyncio.create_task(rt.run(template, {"x": "q"}))
            await asyncio.sleep(3.5)
            caller.cancel()
            with pytest.raises(asyncio.CancelledError):
                await caller
            return llm

    llm = virtual(main())
    assert len(llm.aborted) == 1 and not llm.active


async def test_blocking_local_code_runs_in_a_worker_thread():
    b = GraphBuilder()
    x = b.input("x")
    b.output(b.add(Kind.CALL, "where", inputs={"x": x}, op=CallOp(lambda x: threading.current_thread().name, blocking=True)))
    async with Runtime({}) as rt:
        assert (await rt.run(Template.from_graph(b.graph), {"x": 1})).startswith("accel-local")


async def test_compute_only_local_code_runs_at_most_cores_at_once_beside_waiting_code(monkeypatch):
    """`CallOp(cpu_bound=True)` runs in the runtime's compute threads, as many as cores (two
    here), however many queries reach it; blocking code that waits still runs in the large
    pool, so a query waiting there never holds a compute thread."""
    import accel.runtime.runtime as runtime_module

    monkeypatch.setattr(runtime_module, "COMPUTE_WORKERS", 2)
    lock = threading.Lock()
    running, most, names = [0], [0], set()
    both_running = threading.Barrier(2, timeout=30)  # fails unless two computes overlap

    def compute(x):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            names.add(threading.current_thread().name)
        try:
            if x < 2:
                both_running.wait()
            return x
        finally:
            with lock:
                running[0] -= 1

    waiting = threading.Event()

    def wait(x):
        waiting.wait(30)
        return threading.current_thread().name

    b = GraphBuilder()
    x = b.input("x")
    b.output(b.add(Kind.CALL, "compute", inputs={"x": x}, op=CallOp(compute, cpu_bound=True)))
    computes = Template.from_graph(b.graph)
    w = GraphBuilder()
    w.output(w.add(Kind.CALL, "wait", inputs={"x": w.input("x")}, op=CallOp(wait)))
    async with Runtime({}) as rt:
        waiter = asyncio.create_task(rt.run(Template.from_graph(w.graph), {"x": 0}))
        assert await asyncio.gather(*(rt.run(computes, {"x": i}) for i in range(12))) == list(range(12))
        waiting.set()
        assert (await waiter).startswith("accel-local")
    assert most[0] == 2 and len(names) == 2 and all(n.startswith("accel-compute") for n in names), (most, names)


async def test_blocking_local_code_sees_the_callers_context():
    """Opaque framework code reads contextvars (LlamaIndex's active span, OpenTelemetry's
    context): in the worker thread it sees those of the query's caller, as stock would."""
    import contextvars

    var = contextvars.ContextVar("caller", default="unset")
    b = GraphBuilder()
    x = b.input("x")
    b.output(b.add(Kind.CALL, "read", inputs={"x": x}, op=CallOp(lambda x: var.get(), blocking=True)))
    template = Template.from_graph(b.graph)
    async with Runtime({}) as rt:

        async def query(value: str) -> str:
            var.set(value)
            return await rt.run(template, {"x": 1})

        assert await asyncio.gather(query("a"), query("b")) == ["a", "b"]


async def test_blocking_local_code_of_many_queries_runs_side_by_side():
    """Opaque user code mostly waits on engines (a refine loop's LLM calls): 16 queries'
    blocking calls must all be in flight at once, as in stock `batch` with 16 threads. Each
    call waits at a 16-party barrier, which breaks (fails the query) if fewer run together."""
    queries = 16
    barrier = threading.Barrier(queries, timeout=10)
    b = GraphBuilder()
    x = b.input("x")
    b.output(b.add(Kind.CALL, "wait", inputs={"x": x}, op=CallOp(lambda x: (barrier.wait(), x)[1], blocking=True)))
    template = Template.from_graph(b.graph)
    async with Runtime({}) as rt:
        assert await asyncio.gather(*(rt.run(template, {"x": i}) for i in range(queries))) == list(range(queries))


async def test_missing_engine_and_missing_input_are_typed_errors():
    b = GraphBuilder()
    x = b.input("x")
    b.output(engine_node(b, "s", "search", {"x": x}))
    template = Template.from_graph(b.graph)
    async with Runtime({}) as rt:
        with pytest.raises(EngineUnavailable, match="search"):
            await rt.run(template, {"x": 1})
    async with Runtime({"search": FakeEngine("search")}) as rt:
        with pytest.raises(MissingInput):
            await rt.run(template, {})
        assert await rt.run(template, {"x": 1}) == "s"


async def test_policies_all_compute_the_same_answer():
    b = GraphBuilder()
    x = b.input("x")
    vecs = b.add(Kind.EMBED, "embed", engine="embed", inputs={"docs": x}, op=ItemsOp("docs"))
    b.output(b.add(Kind.SEARCH, "search", engine="search", inputs={"v": vecs}, op=ItemsOp("v")))
    template = Template.from_graph(b.graph)
    answers = []
    for policy in ("topology", "po", "to"):
        engines = {"embed": FakeEngine("embed", compute=lambda r: r.upper()), "search": FakeEngine("search", compute=lambda r: r + "!")}
        async with Runtime(engines, policy=policy, profiles={"embed": EngineLimits(max_batch_size=3)}) as rt:
            answers.append(await asyncio.gather(*(rt.run(template, {"x": [f"d{q}{i}" for i in range(5)]}) for q in range(4))))
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][1] == [f"D1{i}!" for i in range(5)]
