"""LangGraph apps transcribed from the LangChain / LangGraph documentation (tests/external/apps/
lg_*.py) and `RunnableWithMessageHistory`, stock vs `accel.wrap`: the same outputs and engine
requests through every entry point (invoke, batch, ainvoke, abatch, stream and astream in each
stream mode), checkpointers over several turns, interrupts, stock exception types; the wrapped
graph's explain() shows its structure and its LLM requests carry depth priorities."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

pytest.importorskip("langgraph")

import accel  # noqa: E402
from accel.adapters.common import floor  # noqa: E402

from .apps import (  # noqa: E402
    lc_message_history, lg_lcel_nodes, lg_map_reduce, lg_rag_part1, lg_rag_part2, lg_router_memory,
)
from .fidelity import assert_same_requests, record  # noqa: E402

pytestmark = [pytest.mark.engines, pytest.mark.slow]


def plain(value: Any) -> Any:
    """Run-independent view of graph outputs: messages as (type, name, content), documents as
    (id, text, metadata), LangGraph stream metadata as (node, step); ids and timings dropped."""
    from langchain_core.documents import Document
    from langchain_core.messages import BaseMessage
    from langgraph.types import Interrupt

    if isinstance(value, BaseMessage):
        return (value.type, value.name, value.content)
    if isinstance(value, Document):
        return (value.id, value.page_content, value.metadata)
    if isinstance(value, Interrupt):
        return ("interrupt", plain(value.value))
    if isinstance(value, dict):
        if "langgraph_node" in value:
            return (value["langgraph_node"], value.get("langgraph_step"))
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    return value


def comparable(outputs: list[Any], mode: str) -> Any:
    """`plain` outputs; for chunk streams whose order between parallel tasks depends on which
    finishes first (stock's own order varies run to run), each input's chunks as a multiset;
    message chunks joined per message (see `assert_streamed_as_served`)."""
    if mode.endswith(":messages"):
        return [sorted(map(repr, whole_messages(chunks))) for chunks in outputs]
    if mode.endswith(":updates"):
        return [sorted(map(repr, plain(chunks))) for chunks in outputs]
    return plain(outputs)


def whole_messages(chunks: list[Any]) -> list[Any]:
    """stream_mode="messages" pairs, each message's chunks joined: (type, name, text, node, step)."""
    joined: dict[Any, list[Any]] = {}
    for message, metadata in chunks:
        (kind, name, text), where = plain(message), plain(metadata)
        key = (message.id, where)
        if key in joined:
            joined[key][2] += text
        else:
            joined[key] = [kind, name, text, where]
    return [tuple(m) for m in joined.values()]


def assert_streamed_as_served(run: Any) -> None:
    """A stream_mode="messages" run streamed each model's answer as its server sent it: one
    chunk per server-sent event (vLLM joins tokens into one event when its client lags, so
    stock's and accel's runs may split differently, each as its own server did)."""
    from langchain_core.messages import AIMessageChunk

    chunks = [m.content for pairs in run.outputs for m, _ in pairs if isinstance(m, AIMessageChunk) and m.content]
    assert sorted(chunks) == sorted(t for t in run.streamed if t)
    assert len(chunks) > len(run.llm), "no model answer was streamed in chunks"


def entry_points(graph: Any, inputs: list[Any], mode: str, configs: list[Any] | None = None) -> list[Any]:
    configs = configs or [None] * len(inputs)
    if mode == "invoke":
        return [graph.invoke(x, c) for x, c in zip(inputs, configs, strict=True)]
    if mode == "batch":
        return graph.batch(inputs, configs if configs[0] else None)
    if mode.startswith("stream:"):
        return [list(graph.stream(x, c, stream_mode=mode.split(":")[1])) for x, c in zip(inputs, configs, strict=True)]

    async def run() -> list[Any]:
        if mode == "ainvoke":
            return list(await asyncio.gather(*(graph.ainvoke(x, c) for x, c in zip(inputs, configs, strict=True))))
        if mode == "abatch":
            return await graph.abatch(inputs, configs if configs[0] else None)
        if mode.startswith("astream:"):
            async def one(x, c):
                return [chunk async for chunk in graph.astream(x, c, stream_mode=mode.split(":")[1])]
            return list(await asyncio.gather(*(one(x, c) for x, c in zip(inputs, configs, strict=True))))
        raise ValueError(mode)

    return asyncio.run(run())


def compare(graph: Any, inputs: list[Any], proxy: Any, modes: tuple[str, ...]) -> Any:
    fast = accel.wrap(graph)
    for mode in modes:
        stock = record(lambda: entry_points(graph, inputs, mode), proxy)
        ours = record(lambda: entry_points(fast, inputs, mode), proxy)
        assert comparable(ours.outputs, mode) == comparable(stock.outputs, mode), mode
        if mode.endswith(":messages"):
            assert_streamed_as_served(stock)
            assert_streamed_as_served(ours)
        assert stock.llm, "the stock app sent no generation request"
        assert_same_requests(stock, ours)
    return fast


ALL_MODES = ("invoke", "batch", "ainvoke", "abatch", "stream:updates", "stream:values", "stream:messages",
             "astream:updates", "astream:messages")


def test_rag_part1(store, chat, llm_proxy, questions) -> None:
    graph = lg_rag_part1.build(store, chat)
    before = floor.stats.snapshot()["routed"]
    fast = compare(graph, [{"question": q} for q in questions], llm_proxy, ALL_MODES)
    after = floor.stats.snapshot()["routed"]
    for component in ("openai-sdk", "HuggingFaceEmbeddings", "PGVector"):
        assert after.get(component, 0) > before.get(component, 0), component
    explained = fast.explain()
    assert "retrieve -> generate" in explained and "__start__ -> retrieve" in explained


def test_rag_part1_query_analysis_and_depth_priorities(store, chat, llm_proxy, questions) -> None:
    graph = lg_rag_part1.build_with_query_analysis(store, chat)
    fast = compare(graph, [{"question": q} for q in questions], llm_proxy, ("invoke", "batch", "astream:values"))
    assert "analyze_query: function" in fast.explain()
    llm_proxy.recorder.take()
    fast.invoke({"question": questions[0]})
    priorities = [r.body.get("priority") for r in llm_proxy.recorder.take() if r.path.endswith("/chat/completions")]
    assert priorities == [3, 1]  # analyze_query: 3 nodes to the end; generate: the last


def test_lcel_runnables_as_nodes_are_lowered(store, chat, llm_proxy, questions) -> None:
    """Nodes that are LCEL chains run lowered (one accel graph per node call) through the sync
    entry points (the store is langchain-postgres' sync PGVector, whose retriever has no async
    search: stock's `ainvoke` fails on it); under stream_mode="messages" (a streaming callback
    handler) they run stock, so each model's tokens stream as stock's do."""
    graph = lg_lcel_nodes.build(store, chat)
    modes = ("invoke", "batch", "stream:updates", "stream:values", "stream:messages")
    fast = compare(graph, [{"question": q} for q in questions], llm_proxy, modes)
    explained = fast.explain()
    for node in ("analyze_query", "retrieve", "generate"):
        assert f"{node}: RunnableSequence" in explained and "[lowered: runs as one accel graph]" in explained, explained
    generate = fast.nodes["generate"].bound
    assert generate.lowered and graph.nodes["generate"].bound is generate.original  # the original graph is untouched
    assert "Decode on" in generate.explain() and "Embed + Search" in fast.nodes["retrieve"].bound.explain()
    stock_runs = {k: v for k, v in generate.counters.items() if k.startswith("stock runs")}
    assert list(stock_runs) == ["stock runs: a streaming callback handler listens (e.g. LangGraph stream_mode='messages')"]
    assert stock_runs[next(iter(stock_runs))] == len(questions)  # stream:messages only
    assert accel.wrap(graph, fallback=False).nodes["generate"].bound.fallback is False  # the graph's options reach its nodes


def test_map_reduce_with_send(chat, llm_proxy) -> None:
    graph = lg_map_reduce.build(chat)
    topics = [{"topic": t} for t in ("animals", "json", "heaps")]
    fast = compare(graph, topics, llm_proxy, ("invoke", "batch", "ainvoke", "stream:updates", "astream:values"))
    explained = fast.explain()
    assert "generate_topics -?-> generate_joke" in explained and "Send" in explained


def conversation_turns(graph: Any, threads: list[str], turns: list[str], mode: str) -> list[Any]:
    """Several threads at once, several turns each (each turn's calls concurrent across threads),
    then each thread's checkpointed state."""
    outputs = []
    for turn in turns:
        inputs = [{"messages": [{"role": "user", "content": f"{turn} ({t[-1]})"}]} for t in threads]
        configs = [{"configurable": {"thread_id": t}} for t in threads]
        outputs.append(entry_points(graph, inputs, mode, configs))
    states = [graph.get_state({"configurable": {"thread_id": t}}).values for t in threads]
    return [outputs, states]


TURNS = ["Hi, I am learning Python.", "How do I decode JSON in Python?", "And what about heaps?"]


@pytest.mark.parametrize("mode", ["invoke", "batch", "abatch", "stream:values"])
def test_conversational_rag_part2_memory_over_turns(store, chat, llm_proxy, mode) -> None:
    graph = lg_rag_part2.build(store, chat)
    fast = accel.wrap(graph)
    assert fast.checkpointer is graph.checkpointer
    tag = uuid.uuid4().hex[:6]
    stock = record(lambda: conversation_turns(graph, [f"s{tag}1", f"s{tag}2"], TURNS, mode), llm_proxy)
    ours = record(lambda: conversation_turns(fast, [f"f{tag}1", f"f{tag}2"], TURNS, mode), llm_proxy)
    assert plain(ours.outputs) == plain(stock.outputs)
    assert len(stock.outputs[1][0]["messages"]) == 4 * len(TURNS)  # every turn kept by the checkpointer
    assert_same_requests(stock, ours)


def test_conditional_edges_memory_and_interrupt_resume(store, chat, llm_proxy) -> None:
    from langgraph.types import Command

    graph = lg_router_memory.build(chat, store, review=True)
    fast = accel.wrap(graph)
    explained = fast.explain()
    assert "route -?-> docs_bot, chatbot" in explained

    def session(app: Any, thread: str) -> list[Any]:
        config = {"configurable": {"thread_id": thread}}
        out = [app.invoke({"messages": [{"role": "user", "content": "Tell me about Python heaps"}]}, config)]
        out.append(list(app.get_state(config).next))
        out.append(app.invoke(Command(resume="approved"), config))
        out.append(list(app.stream({"messages": [{"role": "user", "content": "thanks!"}]}, config, stream_mode="updates")))
        out.append(app.invoke(Command(resume="fine"), config))
        out.append(len(list(app.get_state_history(config))))
        return out

    tag = uuid.uuid4().hex[:6]
    stock = record(lambda: session(graph, f"s{tag}"), llm_proxy)
    ours = record(lambda: session(fast, f"f{tag}"), llm_proxy)
    assert stock.outputs[1] == ["human_review"] and "__interrupt__" in stock.outputs[0]
    assert plain(ours.outputs) == plain(stock.outputs)
    assert_same_requests(stock, ours)


def test_message_history_chat(chat, llm_proxy) -> None:
    chain = lc_message_history.build(chat)
    fast = accel.wrap(lc_message_history.build(chat))

    def chat_session(app: Any, session_id: str) -> list[str]:
        config = {"configurable": {"session_id": session_id}}
        return [app.invoke({"ability": "math", "input": text}, config=config).content
                for text in ("What does cosine mean?", "What?", "And sine?")]

    stock = record(lambda: chat_session(chain, "s1"), llm_proxy)
    ours = record(lambda: chat_session(fast, "s1"), llm_proxy)
    assert ours.outputs == stock.outputs
    assert_same_requests(stock, ours)


def test_failing_engine_in_a_node_fails_that_run_with_stock_exception(store, chat, llm_proxy, questions) -> None:
    from langchain_openai import ChatOpenAI

    dead = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="EMPTY", model="tiny", max_retries=0, timeout=5)

    class Picky:
        def invoke(self, messages):
            text = messages.to_string() if hasattr(messages, "to_string") else str(messages)
            return (dead if "heapq" in text else chat).invoke(messages)

    graph = lg_rag_part1.build(store, Picky())
    inputs = [{"question": q} for q in questions]
    stock = graph.batch(inputs, return_exceptions=True)
    ours = accel.wrap(graph).batch(inputs, return_exceptions=True)
    failed = [type(o) for o in stock if isinstance(o, Exception)]
    assert failed and len(failed) < len(inputs)
    assert [type(o) for o in ours] == [type(o) for o in stock]
    assert [plain(o) for o in ours if not isinstance(o, Exception)] == [plain(o) for o in stock if not isinstance(o, Exception)]
