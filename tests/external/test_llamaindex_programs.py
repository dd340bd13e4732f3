"""LlamaIndex apps beyond query engines, transcribed from LlamaIndex's own guides
(tests/external/apps/li_chat_engines.py, li_router.py, li_sub_question.py, li_workflows.py),
stock vs `accel.wrap` on the real engines: the same answers, source nodes, chat history and
engine requests (LLM bodies through the recording proxy, texts embedded), with `chat`, `achat`,
`stream_chat` and `astream_chat`, several turns and `reset`; concurrent conversations; the
wrapped object is an instance of the original's class; bad input raises stock's exception."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import accel

from .apps import li_chat_engines, li_router, li_starter, li_sub_question, li_workflows
from .fidelity import assert_same_requests, assert_same_response, record

pytestmark = [pytest.mark.engines, pytest.mark.slow]


@pytest.fixture
def starter_index(llama_settings, base_url, model_name, minilm_path, pydoc_dir):
    li_starter.configure(base_url, model_name, minilm_path)
    index, _, _ = li_starter.build(str(pydoc_dir))
    return index


@pytest.fixture
def chat_llm(base_url, model_name):
    return li_starter.local_llm(base_url, model_name)


# ---- driving a conversation ----------------------------------------------------------------------


def history(engine: Any) -> list[tuple[str, str]]:
    return [(m.role.value, m.content) for m in engine.chat_history]


class Score(float):
    """A similarity score equal to another within 1e-5: batched embedding (concurrent
    conversations) moves scores by float noise, which rounding to 4 digits turned into a
    difference when a score sat on a rounding boundary (0.4285 against 0.4284)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and abs(self - other) <= 1e-5

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = float.__hash__


def view(response: Any) -> tuple[Any, ...]:
    """What a chat response tells the app: text, source node ids and scores, tool outputs."""
    def nodes(found: list[Any]) -> list[tuple[str, float]]:
        return [(n.node.node_id, Score(n.score or 0.0)) for n in found]

    # a retriever's tool output holds str(nodes), scores in full: batched embedding (concurrent
    # conversations) moves them by float noise, so its nodes are compared as ids and scores to 1e-5
    sources = [(s.tool_name, nodes(s.raw_output) if isinstance(s.raw_output, list) else s.content, str(s.raw_input))
               for s in response.sources]
    return response.response, nodes(response.source_nodes), sources


def converse_sync(engine: Any, turns: list[str | None], stream: bool) -> list[Any]:
    seen = []
    for message in turns:
        if message is None:
            engine.reset()
            seen.append(("reset", history(engine)))
            continue
        if stream:
            response = engine.stream_chat(message)
            tokens = list(response.response_gen)
            if response.write_response_to_history_thread is not None:
                response.write_response_to_history_thread.join()
            seen.append(("".join(tokens), view(response)[1:], history(engine)))
        else:
            seen.append((view(engine.chat(message)), history(engine)))
    return seen


async def converse_async(engine: Any, turns: list[str | None], stream: bool) -> list[Any]:
    seen = []
    for message in turns:
        if message is None:
            engine.reset()
            seen.append(("reset", history(engine)))
            continue
        if stream:
            response = await engine.astream_chat(message)
            tokens = [token async for token in response.async_response_gen()]
            if response.awrite_response_to_history_task is not None:
                await response.awrite_response_to_history_task
            seen.append(("".join(tokens), view(response)[1:], history(engine)))
        else:
            seen.append((view(await engine.achat(message)), history(engine)))
    return seen


async def run_mode(make: Callable[[], Any], turns: list[str | None], mode: str, proxy: Any) -> Any:
    engine = make()
    if mode in ("chat", "stream_chat"):
        return await asyncio.to_thread(record, lambda: converse_sync(engine, turns, mode == "stream_chat"), proxy)
    return await _record_async(lambda: converse_async(engine, turns, mode == "astream_chat"), proxy)


async def _record_async(make_coro: Callable[[], Any], proxy: Any) -> Any:
    from accel.testing.recording import record_requests

    from .fidelity import Run, llm_bodies

    proxy.recorder.take()
    with record_requests() as log:
        outputs = await make_coro()
    llm, warmups = llm_bodies(proxy)
    return Run(outputs, llm, warmups, sorted(log.embedded), [], sorted(log.scored))


# ---- chat engines ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", li_chat_engines.MODES)
@pytest.mark.parametrize("entry", ["chat", "stream_chat", "achat", "astream_chat"])
async def test_chat_engine_guide(starter_index, chat_llm, llm_proxy, mode, entry) -> None:
    turns = li_chat_engines.CONVERSATIONS[mode]

    def stock() -> Any:
        return li_chat_engines.chat_engine(mode, starter_index, chat_llm)

    def fast() -> Any:
        wrapped = accel.wrap(stock())
        assert isinstance(wrapped, type(stock()))
        return wrapped

    theirs = await run_mode(stock, turns, entry, llm_proxy)
    ours = await run_mode(fast, turns, entry, llm_proxy)
    assert ours.outputs == theirs.outputs
    assert theirs.llm, "the stock app sent no generation request"
    assert_same_requests(theirs, ours)


@pytest.mark.parametrize("mode", li_chat_engines.MODES)
def test_chat_engine_explain(starter_index, chat_llm, mode) -> None:
    explained = accel.wrap(li_chat_engines.chat_engine(mode, starter_index, chat_llm)).explain()
    lowered = explained.split("lowered:", 1)[1].split("captured", 1)[0]
    if mode == "simple":
        assert "opaque, run as-is" in explained, explained
    elif mode == "condense_question":
        assert "RetrieverQueryEngine -> retrieval and synthesis as primitives" in lowered, explained
    else:
        assert "retriever: VectorIndexRetriever -> HuggingFaceEmbedding -> Embed" in lowered, explained
    assert "OpenAILike (LLM)" in explained, explained


def test_chat_engine_calls_are_learned_and_a_pattern_that_does_not_repeat_is_not_warmed(
        starter_index, chat_llm, llm_proxy) -> None:
    """Learned prefill on a condense-plus-context engine: each turn is a run, and turns differ
    (the first has no condense call, later ones do; the context, retrieved by the lowered
    retriever, looks like static text that changes every turn). Every site's pattern is learned
    again until nothing of it is warmed: at most one wrong guess per site, answers and requests
    untouched."""
    engine = accel.wrap(li_chat_engines.chat_engine("condense_plus_context", starter_index, chat_llm))
    turns = li_chat_engines.CONVERSATIONS["condense_plus_context"]
    ours = record(lambda: converse_sync(engine, turns, False), llm_proxy)
    explained = engine.explain()
    sites = explained.count("\n  llm:")
    assert sites >= 2, explained
    assert explained.count("not warmed: no run value in its verified prefix") == sites, explained
    assert ours.warmups <= sites, explained


async def test_concurrent_conversations(starter_index, chat_llm, llm_proxy) -> None:
    """Four users, each with their own condense-plus-context engine, chatting at once."""
    turns = li_chat_engines.CONVERSATIONS["condense_plus_context"][:3]

    async def all_users(make: Callable[[], Any]) -> list[Any]:
        return list(await asyncio.gather(*(converse_async(make(), turns, False) for _ in range(4))))

    theirs = await _record_async(lambda: all_users(lambda: li_chat_engines.chat_engine("condense_plus_context", starter_index, chat_llm)), llm_proxy)
    ours = await _record_async(lambda: all_users(lambda: accel.wrap(li_chat_engines.chat_engine("condense_plus_context", starter_index, chat_llm))), llm_proxy)
    assert ours.outputs == theirs.outputs
    assert_same_requests(theirs, ours)


@pytest.mark.parametrize("mode", li_chat_engines.MODES)
@pytest.mark.parametrize("bad", ["not a message type", "empty history"])
def test_chat_bad_input_raises_what_stock_raises(starter_index, chat_llm, mode, bad) -> None:
    from llama_index.core.llms import ChatMessage

    def attempt(engine: Any) -> type[BaseException] | None:
        try:
            if bad == "not a message type":
                engine.chat(ChatMessage(role="user", content="hi"), chat_history=[{"role": "user"}])
            else:
                engine.chat("", chat_history=[])
        except Exception as err:  # noqa: BLE001 - the type is what is compared
            return type(err)
        return None

    stock = attempt(li_chat_engines.chat_engine(mode, starter_index, chat_llm))
    ours = attempt(accel.wrap(li_chat_engines.chat_engine(mode, starter_index, chat_llm)))
    assert ours is stock


# ---- routers, sub-questions -----------------------------------------------------------------------


def outcome(call: Callable[[], Any]) -> Any:
    """The call's result, or the type of the exception it raised (stock's must match)."""
    try:
        return call()
    except Exception as err:  # noqa: BLE001 - compared with stock's
        return type(err)


def assert_same_answer(stock: Any, fast: Any) -> None:
    """`assert_same_response` less node ids: a sub-question engine's answer nodes are fresh
    `TextNode`s, whose ids are drawn anew on every run, stock's too."""
    assert type(fast) is type(stock) and fast.response == stock.response
    assert [n.node.get_content() for n in fast.source_nodes] == [n.node.get_content() for n in stock.source_nodes]
    assert [n.score for n in fast.source_nodes] == pytest.approx([n.score for n in stock.source_nodes], abs=1e-5)


async def compare_queries(engine: Any, fast: Any, questions: list[str], proxy: Any, *, concurrent: bool = True,
                          same: Callable[[Any, Any], None] = assert_same_response) -> None:
    """`query` one by one (worker thread) and `aquery` gathered: same responses or same
    exception types, same engine requests."""
    async def gathered(e: Any) -> list[Any]:
        return list(await asyncio.gather(*(e.aquery(q) for q in questions), return_exceptions=True))

    modes = [("query", lambda e: asyncio.to_thread(lambda: [outcome(lambda q=q: e.query(q)) for q in questions]))]
    if concurrent:
        modes.append(("gather", gathered))
    for mode, run in modes:
        theirs = await _record_async(lambda: run(engine), proxy)
        ours = await _record_async(lambda: run(fast), proxy)
        for s, o in zip(theirs.outputs, ours.outputs, strict=True):
            if isinstance(s, BaseException) or isinstance(s, type):
                assert (type(o) if isinstance(o, BaseException) else o) == (type(s) if isinstance(s, BaseException) else s), (mode, s, o)
            else:
                same(s, o)
        assert_same_requests(theirs, ours)


@pytest.mark.parametrize("selector", li_router.SELECTORS)
async def test_router_query_engine_guide(starter_index, pydoc_dir, llm_proxy, questions, selector) -> None:
    from llama_index.core.query_engine import RouterQueryEngine

    engine = li_router.build(str(pydoc_dir), selector)
    fast = accel.wrap(engine)
    assert isinstance(fast, RouterQueryEngine)
    explained = fast.explain()
    assert "route 1: RetrieverQueryEngine -> retrieval and synthesis as primitives" in explained, explained
    await compare_queries(engine, fast, questions, llm_proxy)


@pytest.mark.parametrize("use_async", [False, True])
async def test_sub_question_query_engine_guide(starter_index, pydoc_files, llm_proxy, questions, use_async) -> None:
    from llama_index.core.query_engine import SubQuestionQueryEngine

    engine = li_sub_question.build(pydoc_files, fixed_questions=True, use_async=use_async)
    fast = accel.wrap(engine)
    assert isinstance(fast, SubQuestionQueryEngine)
    explained = fast.explain()
    assert "sub-questions -> parallel branches" in explained and "tool 'other_modules': RetrieverQueryEngine" in explained
    await compare_queries(engine, fast, questions[:2], llm_proxy, concurrent=use_async, same=assert_same_answer)


async def test_sub_question_guide_generator_fails_as_stock(starter_index, pydoc_files, llm_proxy, questions) -> None:
    engine = li_sub_question.build(pydoc_files, fixed_questions=False)
    await compare_queries(engine, accel.wrap(engine), questions[:1], llm_proxy, concurrent=False)


# ---- workflows and agents ---------------------------------------------------------------------------


async def test_workflow_guide_run_stream_and_context(starter_index, chat_llm, llm_proxy) -> None:
    async def run(flow: Any) -> list[Any]:
        result = await flow.run(topic="pirates")
        handler = flow.run(topic="heaps")
        streamed = [type(ev).__name__ + ":" + getattr(ev, "msg", "") async for ev in handler.stream_events()]
        return [result, await handler, streamed]

    stock = li_workflows.joke_flow(chat_llm)
    fast = accel.wrap(li_workflows.joke_flow(chat_llm))
    assert isinstance(fast, type(stock))
    assert "LLM" in fast.explain()
    theirs = await _record_async(lambda: run(stock), llm_proxy)
    ours = await _record_async(lambda: run(fast), llm_proxy)
    assert ours.outputs == theirs.outputs
    assert len(theirs.llm) == 4
    assert_same_requests(theirs, ours)


async def test_function_agent_with_one_tool(starter_index, base_url, model_name, llm_proxy) -> None:
    """The offline model may never call the tool; everything stock does is compared: the
    result (or stock's exception type), the streamed events, the requests."""
    from llama_index.core.agent.workflow import FunctionAgent

    llm = li_starter.local_llm(base_url, model_name, is_function_calling_model=True)

    async def run(agent: Any) -> list[Any]:
        async def once(message: str) -> Any:
            handler = agent.run(message)
            events = [type(ev).__name__ async for ev in handler.stream_events()]
            try:
                return [str(await handler), events]
            except Exception as err:  # noqa: BLE001 - compared with stock's
                return [type(err), events]

        return [await once("What is 1234 * 4567?"), await once("And 3 * 4?")]

    stock = li_workflows.agent(llm)
    fast = accel.wrap(li_workflows.agent(llm))
    assert isinstance(fast, FunctionAgent)
    theirs = await _record_async(lambda: run(stock), llm_proxy)
    ours = await _record_async(lambda: run(fast), llm_proxy)
    assert ours.outputs == theirs.outputs
    assert theirs.llm
    assert_same_requests(theirs, ours)
