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

from .apps import li_chat_engines, li_starter
from .fidelity import assert_same_requests, record

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


def view(response: Any) -> tuple[Any, ...]:
    """What a chat response tells the app: text, source node ids and scores, tool outputs."""
    def nodes(found: list[Any]) -> list[tuple[str, float]]:
        return [(n.node.node_id, round(n.score or 0.0, 4)) for n in found]

    # a retriever's tool output holds str(nodes), scores in full: batched embedding (concurrent
    # conversations) moves them by float noise, so its nodes are compared as ids and rounded scores
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
    from accel.adapters.common.recording import record_requests

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
