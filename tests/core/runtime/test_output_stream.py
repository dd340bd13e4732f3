"""`Runtime.stream` and `Session.stream/astream` on fake engines: the text deltas of the decode
whose text is the output, then the value; an output dict's parts as each is known; the value
alone otherwise; leaving early cancels the query and aborts its LLM request before the
iterator returns."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from dataclasses import dataclass

import pytest

from accel.ir import CallOp, DecodeOp, GatherOp, GraphBuilder, Kind, PromptOp, Slot, Template
from accel.runtime import Delta, Final
from accel.testing.fakes import FakeLLMEngine
from accel.runtime.plan import build_plan
from accel.runtime.runtime import Runtime
from accel.session import Session
from accel.types import EngineSpec, Part, TemplateBuild

WORDS = " ".join(f"w{i}" for i in range(40))


@dataclass(frozen=True)
class Shout:
    """A message-like wrapper of its port's text (what a chat adapter's result op does)."""

    text_port: str = "text"
    blocking: bool = False

    def compute(self, values):
        return {"message": values["text"]}


def decode_template(*, wrap: bool = False, split: str | None = None, item_stream: bool = False) -> Template:
    b = GraphBuilder()
    x = b.input("x")
    prompt = b.add(Kind.PREFILL, "prompt", inputs={"x": x}, op=PromptOp(parts=("Q: ", Slot("x"))))
    text = b.add(Kind.DECODE, "answer", engine="llm", inputs={"prompt": prompt}, op=DecodeOp(split=split, item_stream=item_stream))
    if wrap:
        text = b.add(Kind.CALL, "message", inputs={"text": text}, op=Shout())
    b.output(text)
    return Template.from_graph(b.build())


def decodes(b: GraphBuilder, x, names: tuple[str, ...]) -> dict:
    """A decode per name, each prompted with its name then the input."""
    answers = {}
    for name in names:
        prompt = b.add(Kind.PREFILL, f"{name}.prompt", inputs={"x": x}, op=PromptOp(parts=(name, Slot("x"))))
        answers[name] = b.add(Kind.DECODE, f"{name}.decode", engine="llm", inputs={"prompt": prompt}, op=DecodeOp())
    return answers


def two_decodes_template() -> Template:
    b = GraphBuilder()
    x = b.input("x")
    answers = decodes(b, x, ("a", "b"))
    b.output(b.add(Kind.AGGREGATE, "both", inputs=answers, op=GatherOp("list")))
    return Template.from_graph(b.build())


async def collect(stream):
    async with aclosing(stream) as items:
        return [item async for item in items]


def test_text_source_follows_identity_plumbing_only():
    for template in (decode_template(), decode_template(wrap=True)):
        assert template.nodes[build_plan(template).text_source].name == "answer"
    assert build_plan(decode_template(split="lines")).text_source == -1
    assert build_plan(two_decodes_template()).text_source == -1


def test_deltas_arrive_while_decoding_then_the_value(virtual):
    template = decode_template()

    async def main():
        llm = FakeLLMEngine(token_latency=1.0, reply=lambda r: WORDS)
        async with Runtime({"llm": llm}) as rt:
            loop = asyncio.get_running_loop()
            seen = []
            async with aclosing(rt.stream(template, {"x": "q"})) as items:
                async for item in items:
                    seen.append((item, loop.time()))
            return seen, await rt.run(template, {"x": "q"}), llm

    seen, value, llm = virtual(main())
    items = [item for item, _ in seen]
    deltas = [item.text for item in items if isinstance(item, Delta)]
    assert items[-1] == Final(WORDS) and value == WORDS
    assert "".join(deltas) == WORDS and len(deltas) == 40
    assert seen[0][1] == pytest.approx(1.0)  # the first word, not the whole answer (40 s)
    assert llm.requests[0].prompt == "Q: q" and not llm.aborted


def test_text_through_a_wrapping_op_streams_and_other_outputs_come_once(virtual):
    async def main():
        llm = FakeLLMEngine(token_latency=0.5, reply=lambda r: "one two three")
        async with Runtime({"llm": llm}) as rt:
            wrapped = await collect(rt.stream(decode_template(wrap=True), {"x": "q"}))
            both = await collect(rt.stream(two_decodes_template(), {"x": "q"}))
            items = await collect(rt.stream(decode_template(split="comma"), {"x": "q"}))
            return wrapped, both, items

    wrapped, both, items = virtual(main())
    assert wrapped == [Delta("one"), Delta(" two"), Delta(" three"), Final({"message": "one two three"})]
    assert both == [Final(["one two three", "one two three"])]
    assert items == [Final(["one two three"])]


def test_a_list_whose_framework_streams_items_streams_its_text(virtual):
    """A split decode marked `item_stream` (LangChain's list parsers) streams the text its
    items are parsed from, for the adapter's parser; the value is the parsed list."""
    template = decode_template(split="comma", item_stream=True)
    assert template.nodes[build_plan(template).item_source].name == "answer"

    async def main():
        llm = FakeLLMEngine(token_latency=0.5, reply=lambda r: "one, two, three")
        async with Runtime({"llm": llm}) as rt:
            return await collect(rt.stream(template, {"x": "q"}))

    items = virtual(main())
    assert items[-1] == Final(["one", "two", "three"])
    assert "".join(item.text for item in items[:-1]) == "one, two, three" and len(items) > 2


def test_breaking_out_cancels_the_query_and_aborts_the_request(virtual):
    template = decode_template()

    async def main():
        llm = FakeLLMEngine(token_latency=1.0, reply=lambda r: WORDS)
        async with Runtime({"llm": llm}) as rt:
            loop = asyncio.get_running_loop()
            async with aclosing(rt.stream(template, {"x": "q"})) as items:
                async for item in items:
                    if item == Delta(" w2"):
                        break
            assert not llm.active  # aborted before the iterator returned
            return llm, loop.time()

    llm, now = virtual(main())
    assert len(llm.aborted) == 1 and llm.stopped == llm.aborted
    assert now < 5.0


def test_cancelling_the_consumer_cancels_the_query(virtual):
    template = decode_template()

    async def main():
        llm = FakeLLMEngine(token_latency=1.0, reply=lambda r: WORDS)
        async with Runtime({"llm": llm}) as rt:
            consumer = asyncio.create_task(collect(rt.stream(template, {"x": "q"})))
            await asyncio.sleep(3.5)
            consumer.cancel()
            with pytest.raises(asyncio.CancelledError):
                await consumer
            return llm

    llm = virtual(main())
    assert len(llm.aborted) == 1 and not llm.active


def test_a_failing_node_raises_its_own_error_from_the_stream(virtual):
    boom = ZeroDivisionError("boom")

    def explode(x):
        raise boom

    b = GraphBuilder()
    x = b.input("x")
    bad = b.add(Kind.CALL, "bad", inputs={"x": x}, op=CallOp(explode, blocking=False))
    prompt = b.add(Kind.PREFILL, "prompt", inputs={"x": bad}, op=PromptOp(parts=(Slot("x"),)))
    b.output(b.add(Kind.DECODE, "answer", engine="llm", inputs={"prompt": prompt}, op=DecodeOp()))
    template = Template.from_graph(b.build())

    async def main():
        async with Runtime({"llm": FakeLLMEngine()}) as rt:
            with pytest.raises(ZeroDivisionError) as caught:
                await collect(rt.stream(template, {"x": "q"}))
            return caught.value

    assert virtual(main()) is boom


# ---- the session: from threads and from other event loops ------------------------------------


@pytest.fixture
def session():
    s = Session()
    yield s
    s.shutdown()


def session_template(session: Session, llm: FakeLLMEngine):
    name = session.engine(EngineSpec("llm", id(llm), lambda: llm))

    def build():
        b = GraphBuilder()
        x = b.input("x")
        prompt = b.add(Kind.PREFILL, "prompt", inputs={"x": x}, op=PromptOp(parts=(Slot("x"),)))
        b.output(b.add(Kind.DECODE, "answer", engine=name, inputs={"prompt": prompt}, op=DecodeOp()))
        return b.build()

    return session.template(TemplateBuild(("stream-test", name), build, passes=False))


def test_session_stream_from_a_thread_and_early_close(session):
    llm = FakeLLMEngine(token_latency=0.01, reply=lambda r: WORDS)
    template = session_template(session, llm)
    items = list(session.stream(template, {"x": "q"}))
    assert items[-1] == Final(WORDS) and "".join(i.text for i in items[:-1]) == WORDS
    stream = session.stream(template, {"x": "q"})
    assert next(stream) == Delta("w0")
    stream.close()
    assert len(llm.aborted) == 1 and not llm.active  # aborted by the time close() returned


def test_session_astream_from_another_loop_and_on_its_own_loop(session):
    llm = FakeLLMEngine(token_latency=0.01, reply=lambda r: WORDS)
    template = session_template(session, llm)

    async def consume():
        async with aclosing(session.astream(template, {"x": "q"})) as items:
            out = [item async for item in items]
        aborted = len(llm.aborted)
        async with aclosing(session.astream(template, {"x": "q"})) as items:
            async for _ in items:
                break
        assert len(llm.aborted) == aborted + 1 and not llm.active
        return out

    assert asyncio.run(consume())[-1] == Final(WORDS)
    on_loop = asyncio.run_coroutine_threadsafe(consume(), session.loop).result()
    assert "".join(i.text for i in on_loop[:-1]) == WORDS
    with pytest.raises(RuntimeError, match="session loop"):
        asyncio.run_coroutine_threadsafe(_sync_stream_on_loop(session, template), session.loop).result()


async def _sync_stream_on_loop(session, template):
    session.stream(template, {"x": "q"})


def test_session_stream_cancelled_consumer_task(session):
    llm = FakeLLMEngine(token_latency=0.05, reply=lambda r: WORDS)
    template = session_template(session, llm)

    async def main():
        first = asyncio.Event()

        async def consume():
            async for _ in session.astream(template, {"x": "q"}):
                first.set()

        task = asyncio.create_task(consume())
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert len(llm.aborted) == 1 and not llm.active


def test_session_streams_raise_the_failing_node_error(session):
    def explode(x):
        raise ZeroDivisionError("boom")

    def build():
        b = GraphBuilder()
        x = b.input("x")
        b.output(b.add(Kind.CALL, "bad", inputs={"x": x}, op=CallOp(explode, blocking=False)))
        return b.build()

    template = session.template(TemplateBuild(("stream-failing",), build, passes=False))

    async def from_another_loop():
        async with aclosing(session.astream(template, {"x": "q"})) as items:
            return [item async for item in items]

    with pytest.raises(ZeroDivisionError, match="boom"):
        list(session.stream(template, {"x": "q"}))
    with pytest.raises(ZeroDivisionError, match="boom"):
        asyncio.run(from_another_loop())


@dataclass(frozen=True)
class Merge:
    """An assign-like op: the "value" dict updated with the "mapped" dict."""

    blocking: bool = False

    def compute(self, values):
        return {**values["value"], **values["mapped"]}

    def dict_parts(self, ports):
        return (("value", None), ("mapped", None))


def dict_template(*, assign: bool = False, nested: bool = False) -> Template:
    """{"q": the input, "fast": a decode's text, "slow": another's} (the decodes' prompts differ);
    `nested`: the decodes under "answers"; `assign`: the input dict {"q", "fast"} updated with it."""
    b = GraphBuilder()
    x = b.input("x")
    answers = decodes(b, x, ("fast", "slow"))
    if nested:
        answers = {"answers": b.add(Kind.AGGREGATE, "answers", inputs=answers, op=GatherOp("dict"))}
    if assign:
        mapped = b.add(Kind.AGGREGATE, "mapped", inputs=answers, op=GatherOp("dict"))
        b.output(b.add(Kind.CALL, "assign", inputs={"value": x, "mapped": mapped}, op=Merge()))
    else:
        b.output(b.add(Kind.AGGREGATE, "parts", inputs={"q": x, **answers}, op=GatherOp("dict")))
    return Template.from_graph(b.build())


def test_a_dict_output_streams_each_part_as_it_is_known(virtual):
    """The input's part at once, each decode's text under its key from its first token, each
    part's value when its node ends (the short answer's long before the long one's); nested
    dicts by key paths; an assign's input keys less the ones it overrides."""
    async def main():
        llm = FakeLLMEngine(token_latency=1.0, reply=lambda r: "one two three" if r.prompt.startswith("fast") else WORDS)
        async with Runtime({"llm": llm}) as rt:
            loop, runs = asyncio.get_running_loop(), {}
            for name, template, x in (("flat", dict_template(), "q"), ("nested", dict_template(nested=True), "q"),
                                      ("assign", dict_template(assign=True), {"q": "q", "fast": "old"})):
                seen = []
                async with aclosing(rt.stream(template, {"x": x})) as items:
                    async for item in items:
                        seen.append((item, loop.time()))
                runs[name] = seen
            return runs

    runs = virtual(main())
    flat = [item for item, _ in runs["flat"]]
    assert flat[0] == Part(("q",), "q") and runs["flat"][0][1] == 0.0
    assert flat[-1] == Final({"q": "q", "fast": "one two three", "slow": WORDS})
    for key, text in (("fast", "one two three"), ("slow", WORDS)):
        assert "".join(i.text for i in flat if isinstance(i, Delta) and i.path == (key,)) == text
        assert Part((key,), text) in flat
    first = {key: next(t for i, t in runs["flat"] if isinstance(i, Delta) and i.path == (key,)) for key in ("fast", "slow")}
    assert first == {"fast": pytest.approx(1.0), "slow": pytest.approx(1.0)}  # both stream from their first token
    assert flat.index(Part(("fast",), "one two three")) < flat.index(Part(("slow",), WORDS))
    nested = [item for item, _ in runs["nested"]]
    assert {i.path for i in nested if isinstance(i, Delta)} == {("answers", "fast"), ("answers", "slow")}
    assert nested[-1] == Final({"q": "q", "answers": {"fast": "one two three", "slow": WORDS}})
    assign = [item for item, _ in runs["assign"]]
    assert assign[0] == Part((), {"q": "q"}, merge=True)  # "fast" comes from the mapper, not the input
    assert assign[-1] == Final({"q": "q", "fast": "one two three", "slow": WORDS})


def test_a_dict_is_streamed_by_parts_only_when_every_key_is_known():
    from accel.ir.output_parts import dict_layout

    b = GraphBuilder()
    x = b.input("x")
    b.output(b.add(Kind.CALL, "assign", inputs={"value": x, "mapped": x}, op=Merge()))  # a later dict of unknown keys
    assert dict_layout(Template.from_graph(b.build())) == ()
    assert dict_layout(two_decodes_template()) == ()  # a list
    paths = [(part.path, part.merge) for part in dict_layout(dict_template(assign=True, nested=True))]
    assert paths == [((), True), (("answers", "fast"), False), (("answers", "slow"), False)]
