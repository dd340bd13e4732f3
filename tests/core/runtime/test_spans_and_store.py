"""OpenTelemetry spans per query and primitive (SDK in-memory exporter), and the object store."""

from dataclasses import dataclass

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from accel.engines.base import GenerationRequest
from accel.ir import GraphBuilder, ItemsOp, Kind, Template
from accel.runtime import Runtime
from accel.testing.fakes import FakeEngine, FakeLLMEngine
from accel.runtime.store import ObjectStore


@dataclass(frozen=True)
class AskOp:
    async def requests(self, values):
        return [GenerationRequest(prompt=" ".join(values["ctx"]))]

    def output(self, values, results):
        return results[0].text


async def test_each_primitive_is_a_span_under_its_query_span():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    b = GraphBuilder()
    docs = b.input("docs")
    vecs = b.add(Kind.EMBED, "embed", engine="embed", inputs={"docs": docs}, op=ItemsOp("docs"))
    b.output(b.add(Kind.DECODE, "answer", engine="llm", inputs={"ctx": vecs}, op=AskOp()))
    template = Template.from_graph(b.graph)
    engines = {"embed": FakeEngine("embed"), "llm": FakeLLMEngine(reply=lambda r: "three word answer")}
    async with Runtime(engines, tracer_provider=provider) as rt:
        assert await rt.run(template, {"docs": ["a", "b", "c"]}, query_id="q7") == "three word answer"

    spans = {s.name: s for s in exporter.get_finished_spans()}
    query, embed, decode = spans["accel.query"], spans["accel.Embed"], spans["accel.Decode"]
    assert query.attributes["accel.query_id"] == "q7"
    for span in (embed, decode):
        assert span.parent.span_id == query.context.span_id
        assert span.context.trace_id == query.context.trace_id
        assert span.attributes["accel.query_id"] == "q7"
        assert span.attributes["accel.queue_wait_s"] >= 0
    assert embed.attributes["accel.kind"] == "Embed" and embed.attributes["accel.engine"] == "embed"
    assert embed.attributes["accel.batch_size"] == 3
    assert decode.attributes["accel.batch_size"] == 1
    assert decode.attributes["accel.prompt_tokens"] == 3 and decode.attributes["accel.completion_tokens"] == 3
    assert decode.attributes["accel.tokens"] == 6 and decode.attributes["accel.cached_tokens"] == 0


async def test_a_failing_primitive_span_records_the_error():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def bad(request):
        raise ValueError("no such collection")

    b = GraphBuilder()
    x = b.input("x")
    b.output(b.add(Kind.SEARCH, "s", engine="search", inputs={"x": x}, op=ItemsOp("x")))
    async with Runtime({"search": FakeEngine("search", compute=bad)}, tracer_provider=provider) as rt:
        try:
            await rt.run(Template.from_graph(b.graph), {"x": ["q"]})
        except ValueError:
            pass
    search = next(s for s in exporter.get_finished_spans() if s.name == "accel.Search")
    assert not search.status.is_ok
    assert any(e.name == "exception" for e in search.events)


def test_store_frees_a_value_after_its_last_reader():
    store = ObjectStore(readers=[2, 1, 0], keep=2)
    store.put(0, "a")
    store.put(1, "b")
    store.put(2, "out")
    assert len(store) == 3
    store.release(0)
    assert store.get(0) == "a"
    store.release(0)
    store.release(1)
    assert len(store) == 1 and store.get(2) == "out"


def test_store_drops_values_nobody_reads():
    store = ObjectStore(readers=[0, 1], keep=1)
    store.put(0, "ignored")
    assert len(store) == 0
