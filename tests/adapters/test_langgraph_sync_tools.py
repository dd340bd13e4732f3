"""A wrapped graph's prebuilt `ToolNode` under `ainvoke`: tools without async code run in accel's
worker pool, not the caller loop's default executor, with the arguments, config and callbacks
stock gives them (no engines: a plain node writes the tool calls a model would)."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest

pytest.importorskip("langgraph.prebuilt")

from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langchain_core.tools import BaseTool, tool  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402

import accel  # noqa: E402


def _default_executor_threads() -> int:
    return min(32, (os.cpu_count() or 1) + 4)


def _agent(tools: list[Any], calls: list[tuple[str, dict[str, Any]]]) -> Any:
    """A model node's tool calls (written, not generated), then LangGraph's `ToolNode` answering a
    tool's error with a message (`handle_tool_errors=True`)."""
    def plan(state: MessagesState) -> dict[str, Any]:
        question = state["messages"][-1].content
        tool_calls = [{"name": name, "args": {**args, "query": question}, "id": f"call{i}"}
                      for i, (name, args) in enumerate(calls)]
        return {"messages": [AIMessage(content="", tool_calls=tool_calls)]}

    builder = StateGraph(MessagesState)
    builder.add_node("plan", plan)
    builder.add_node("tools", ToolNode(tools, handle_tool_errors=True))
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "tools")
    builder.add_edge("tools", END)
    return builder.compile()


def _answers(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The tool messages as a model reads them (message ids are fresh uuids in every run)."""
    return [(m.name, m.tool_call_id, m.content) for m in result["messages"] if m.type == "tool"]


def _waiting_lookup(meet: threading.Barrier | None, threads: list[str]) -> Any:
    @tool
    def lookup(query: str) -> str:
        """Look the query up (a blocking call to a search service)."""
        threads.append(threading.current_thread().name)
        if meet is not None:
            meet.wait()
        return f"found: {query}"

    return lookup


def test_sync_tools_of_concurrent_async_runs_are_not_held_to_the_default_executor() -> None:
    """One more concurrent `ainvoke` than the default executor has threads: every wrapped run's
    tool call meets at a barrier, which stock's could not (each waits for a thread); the
    answers are stock's, and the original graph's ToolNode still runs stock's way."""
    parties = _default_executor_threads() + 1
    threads: list[str] = []
    calls = [("lookup", {})]
    fast = accel.wrap(_agent([_waiting_lookup(threading.Barrier(parties, timeout=60), threads)], calls))
    stock = _agent([_waiting_lookup(None, [])], calls)
    questions = [f"what is json? ({i})" for i in range(parties)]

    async def stock_one_by_one() -> list[Any]:
        return [_answers(await stock.ainvoke({"messages": [("user", q)]})) for q in questions]

    async def fast_together() -> list[Any]:
        results = await asyncio.gather(*(fast.ainvoke({"messages": [("user", q)]}) for q in questions))
        return [_answers(result) for result in results]

    assert asyncio.run(fast_together()) == asyncio.run(stock_one_by_one())
    assert len(threads) == parties and not any(name.startswith("asyncio") for name in threads)
    assert "sync code of async runs (function nodes, tools" in fast.explain()
    threads.clear()
    alone = _agent([_waiting_lookup(None, threads)], calls)
    accel.wrap(alone)
    asyncio.run(alone.ainvoke({"messages": [("user", "q")]}))
    assert threads[0].startswith("asyncio")  # the original graph, outside a wrapped run, runs stock's way


class Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_tool_start(self, serialized: dict[str, Any], input_str: str, **kwargs: Any) -> None:
        self.events.append(("start", serialized["name"], input_str, kwargs.get("inputs")))

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        self.events.append(("end", getattr(output, "content", output)))

    def on_tool_error(self, error: BaseException, **kwargs: Any) -> None:
        self.events.append(("error", type(error).__name__, str(error)))


class Shout(BaseTool):
    """A tool class with `_run` only, taking the run manager, as the LangChain docs write one."""

    name: str = "shout"
    description: str = "Say the query louder."
    calls: int = 0

    def _run(self, query: str, run_manager: Any = None) -> str:
        self.calls += 1
        return f"{query.upper()} ({type(run_manager).__name__} on {'pool' if not _on_asyncio() else 'asyncio'})"


def _on_asyncio() -> bool:
    return threading.current_thread().name.startswith("asyncio")


@tool
def configured(query: str, config: RunnableConfig) -> str:
    """Answer with the caller's configured user."""
    return f"{query} for {config['configurable'].get('user')}"


@tool
def failing(query: str) -> str:
    """Fail the way a tool fails."""
    raise ValueError(f"no result for {query}")


def test_tool_arguments_config_callbacks_and_errors_are_stock_s() -> None:
    """A `BaseTool` subclass (its run manager, state kept on the user's object), an `@tool`
    taking the `RunnableConfig`, and one that raises (ToolNode's error message): the same tool
    messages and tool events as stock's, only the thread differs."""
    shout = Shout()
    calls = [("shout", {}), ("configured", {}), ("failing", {})]
    graph = _agent([shout, configured, failing], calls)
    fast = accel.wrap(graph)
    config = {"configurable": {"user": "ada"}}

    async def run(app: Any) -> tuple[list[Any], list[Any]]:
        events = Events()
        result = await app.ainvoke({"messages": [("user", "json")]}, {**config, "callbacks": [events]})
        return _answers(result), sorted(events.events, key=repr)

    stock_answers, stock_events = asyncio.run(run(graph))
    fast_answers, fast_events = asyncio.run(run(fast))
    assert [a[:2] for a in fast_answers] == [a[:2] for a in stock_answers]
    assert fast_answers[0][2] == "JSON (CallbackManagerForToolRun on pool)"
    assert stock_answers[0][2] == "JSON (CallbackManagerForToolRun on asyncio)"
    assert fast_answers[1:] == stock_answers[1:]
    assert "no result for json" in fast_answers[2][2]
    assert [e for e in fast_events if "JSON" not in repr(e)] == [e for e in stock_events if "JSON" not in repr(e)]
    assert len(fast_events) == len(stock_events) == 6
    assert shout.calls == 2  # the tool's own object ran both times


def test_a_default_executor_the_user_set_runs_the_tools() -> None:
    from concurrent.futures import ThreadPoolExecutor

    threads: list[str] = []
    fast = accel.wrap(_agent([_waiting_lookup(None, threads)], [("lookup", {})]))

    async def run() -> Any:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2, thread_name_prefix="mine"))
        return await fast.ainvoke({"messages": [("user", "q")]})

    assert _answers(asyncio.run(run())) == [("lookup", "call0", "found: q")]
    assert threads[0].startswith("mine")
