"""`accel.wrap(compiled_graph)` is the same graph to LangGraph and LangChain: v2 results keep
the state schema's type (the mappers `compile()` sets, which `Pregel.copy()` drops), every
instance attribute of the original is on the drop-in, and a wrapped subgraph is drawn and
serialised under LangGraph's own class (no engines: plain python nodes)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

import pytest
from pydantic import BaseModel

pytest.importorskip("langgraph")

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.state import CompiledStateGraph  # noqa: E402

import accel  # noqa: E402


class PydanticState(BaseModel):
    x: int = 0


@dataclasses.dataclass
class DataclassState:
    x: int = 0


def _graph(schema: type) -> Any:
    def inc(state: Any) -> dict[str, int]:
        return {"x": state.x + 1}

    builder = StateGraph(schema)
    builder.add_node("inc", inc)
    builder.add_edge(START, "inc")
    builder.add_edge("inc", END)
    return builder.compile()


@pytest.mark.parametrize("schema", [PydanticState, DataclassState])
def test_v2_results_keep_the_state_schema_type(schema: type) -> None:
    graph = _graph(schema)
    fast = accel.wrap(graph)
    stock = graph.invoke(schema(x=1), version="v2")
    assert isinstance(stock.value, schema)  # what LangGraph itself returns
    result = fast.invoke(schema(x=1), version="v2")
    assert type(result.value) is schema and result.value == stock.value
    streamed = [part["data"] for part in fast.stream(schema(x=1), stream_mode="values", version="v2")]
    assert [type(v) for v in streamed] == [schema, schema] and streamed[-1] == schema(x=2)


async def test_v2_async_results_keep_the_state_schema_type() -> None:
    fast = accel.wrap(_graph(PydanticState))
    result = await fast.ainvoke(PydanticState(x=1), version="v2")
    assert result.value == PydanticState(x=2)
    streamed = [part["data"] async for part in fast.astream(PydanticState(x=1), stream_mode="values", version="v2")]
    assert all(type(v) is PydanticState for v in streamed)


def test_every_instance_attribute_of_the_original_is_on_the_drop_in() -> None:
    graph = _graph(PydanticState)
    graph.app_note = {"set": "after compile"}  # anything an app or LangGraph sets on the instance
    fast = accel.wrap(graph)
    missing = {name for name, value in vars(graph).items() if vars(fast).get(name, object()) != value}
    # a graph built before accel first replaced run_in_executor gets a copy of each sync function
    # node (sync_nodes.py), the same otherwise:
    assert missing <= {"nodes"}
    assert fast.nodes.keys() == graph.nodes.keys()
    for name, node in graph.nodes.items():
        copy = fast.nodes[name]
        assert (copy.triggers, copy.channels, copy.writers, copy.bound.func, copy.bound.name) == \
            (node.triggers, node.channels, node.writers, node.bound.func, node.bound.name)
    assert fast.app_note is graph.app_note


class _Outer(TypedDict):
    x: int


def _with_subgraph(sub: Any) -> Any:
    builder = StateGraph(_Outer)
    builder.add_node("sub", sub)
    builder.add_edge(START, "sub")
    builder.add_edge("sub", END)
    return builder.compile()


def test_a_wrapped_subgraph_is_drawn_and_serialised_as_langgraph_s_class() -> None:
    class Inner(TypedDict):
        x: int

    builder = StateGraph(Inner)
    builder.add_node("inner", lambda state: {"x": state["x"] + 1})
    builder.add_edge(START, "inner")
    builder.add_edge("inner", END)
    sub = builder.compile()
    fast = accel.wrap(sub)
    assert isinstance(fast, CompiledStateGraph) and fast is not sub
    for xray in (False, True):
        stock, wrapped = _with_subgraph(sub).get_graph(xray=xray), _with_subgraph(fast).get_graph(xray=xray)
        assert wrapped.to_json() == stock.to_json()
        assert wrapped.draw_mermaid() == stock.draw_mermaid()
    ids = [node["data"]["id"] for node in _with_subgraph(fast).get_graph().to_json()["nodes"] if node["id"] == "sub"]
    assert ids == [["langgraph", "graph", "state", "CompiledStateGraph"]]
    assert _with_subgraph(fast).invoke({"x": 1}) == {"x": 2}


def _default_executor_threads() -> int:
    import os

    return min(32, (os.cpu_count() or 1) + 4)


def _waiting_graph(meet: Any, threads: list[str]) -> Any:
    import threading

    class Count(TypedDict):
        x: int

    def inc(state: Count) -> dict[str, int]:  # a sync node: LangGraph's async side is the default executor
        threads.append(threading.current_thread().name)
        if meet is not None:
            meet.wait()
        return {"x": state["x"] + 1}

    builder = StateGraph(Count)
    builder.add_node("inc", inc)
    builder.add_edge(START, "inc")
    builder.add_edge("inc", END)
    return _built_before_accel(builder.compile())


def _built_before_accel(graph: Any) -> Any:
    """`graph` as LangGraph builds it before `accel.wrap` first replaced langchain-core's
    `run_in_executor`: each sync node's async side holds stock's function."""
    from functools import partial, wraps

    from langchain_core.runnables import config

    stock = getattr(config.run_in_executor, "__wrapped__", config.run_in_executor)
    for node in graph.nodes.values():
        bound = node.bound
        if isinstance(getattr(bound, "afunc", None), partial) and bound.afunc.args[:1] == (None,):
            bound.afunc = wraps(bound.func)(partial(stock, None, bound.func))
    return graph


def test_sync_nodes_of_concurrent_async_runs_are_not_held_to_the_default_executor() -> None:
    """One more concurrent `ainvoke` than the default executor has threads: the wrapped graph's
    sync nodes (their async side taken before accel replaced `run_in_executor`) all meet at a
    barrier (accel's pool), which stock's could not (each would wait for a thread); results as
    stock's, and the original graph still runs stock's way."""
    import asyncio
    import threading

    parties = _default_executor_threads() + 1
    threads: list[str] = []
    graph = _waiting_graph(threading.Barrier(parties, timeout=60), threads)
    fast = accel.wrap(graph)

    async def together() -> list[Any]:
        return await asyncio.gather(*(fast.ainvoke({"x": i}) for i in range(parties)))

    assert asyncio.run(together()) == [{"x": i + 1} for i in range(parties)]
    assert len(threads) == parties and not any(name.startswith("asyncio") for name in threads)
    assert "function nodes rebound to it: inc" in fast.explain()
    threads.clear()
    alone = _waiting_graph(None, threads)
    accel.wrap(alone)
    assert asyncio.run(alone.ainvoke({"x": 1})) == {"x": 2}
    assert threads[0].startswith("asyncio")  # wrapping left the original's nodes as they were


def test_a_default_executor_the_user_set_runs_the_sync_nodes() -> None:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    threads: list[str] = []
    fast = accel.wrap(_waiting_graph(None, threads))

    async def run() -> Any:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2, thread_name_prefix="mine"))
        return await fast.ainvoke({"x": 1})

    assert asyncio.run(run()) == {"x": 2}
    assert threads[0].startswith("mine")
