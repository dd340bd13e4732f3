"""ACCEL_AUTO=1 keeps no app object alive: a graph, LCEL chain or LlamaIndex query engine that
auto-instrumentation wrapped dies with its drop-in once the app drops it, and a copy of a
wrapped object gets a drop-in of its own (fresh interpreters; cheap components, no engines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("llama_index.core")

APP = '''
import copy, gc, json, pickle, sys, weakref
from typing import TypedDict
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor

N = int(sys.argv[1])

def wrapped():
    scope = sys.modules.get("accel.scope")  # the app imports no accel code
    return scope is not None and scope.current_run() is not None

class State(TypedDict):
    x: int
    wrapped: bool

def inc(state):
    return {"x": state["x"] + 1, "wrapped": wrapped()}

def graph():
    builder = StateGraph(State)
    builder.add_node("inc", inc)
    builder.add_edge(START, "inc")
    builder.add_edge("inc", END)
    return builder.compile()

def add(x):
    return x + 1

def seen(x):
    return {"x": x * 2, "wrapped": wrapped()}

def chain():
    return RunnableLambda(add) | RunnableLambda(seen)

class Seen(BaseNodePostprocessor):
    def _postprocess_nodes(self, nodes, query_bundle=None):
        runs.append(wrapped())
        return nodes

runs = []
index = VectorStoreIndex.from_documents([Document(text="accel keeps nothing")], embed_model=MockEmbedding(embed_dim=8))

def engine():
    return index.as_query_engine(llm=MockLLM(max_tokens=4), node_postprocessors=[Seen()])

kinds = {
    "graph": (graph, lambda g: g.invoke({"x": 1, "wrapped": False}) == {"x": 2, "wrapped": True}),
    "chain": (chain, lambda c: c.invoke(1) == {"x": 4, "wrapped": True}),
    "engine": (engine, lambda e: bool(str(e.query("what?"))) and runs.pop() is True),
}
result = {}
for kind, (make, call) in kinds.items():
    refs, ok = [], 0
    for _ in range(N):
        obj = make()
        ok += bool(call(obj))
        refs.append(weakref.ref(obj))
        del obj
    gc.collect()
    result[kind] = {"wrapped": ok, "alive": sum(ref() is not None for ref in refs)}

# copies of a wrapped chain: each runs as its own object (its own first step), wrapped
first = chain()
first.invoke(1)
copies = [copy.copy(first), first.model_copy(), copy.deepcopy(first), pickle.loads(pickle.dumps(first))]
result["copies"] = []
for c in copies:
    c.first = RunnableLambda(lambda x: x + 2)
    result["copies"].append(c.invoke(1))
result["first"] = first.invoke(1)
print(json.dumps(result))
'''


def test_wrapped_objects_die_with_their_drop_ins_and_copies_wrap_their_own(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(APP)
    env = {k: v for k, v in os.environ.items() if k != "ACCEL_AUTO"}
    done = subprocess.run([sys.executable, "-m", "accel.patches.run", sys.executable, str(app), "1000"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for kind in ("graph", "chain", "engine"):
        assert result[kind] == {"wrapped": 1000, "alive": 0}, kind
    assert result["copies"] == [{"x": 6, "wrapped": True}] * 4
    assert result["first"] == {"x": 4, "wrapped": True}


SPIED = '''
import asyncio, json
from typing import TypedDict
from langgraph.graph import END, START, StateGraph

class State(TypedDict):
    x: int

graph = StateGraph(State)
graph.add_node("inc", lambda state: {"x": state["x"] + 1})
graph.add_edge(START, "inc")
graph.add_edge("inc", END)
app = graph.compile()
seen = []
original = app.astream

async def spy(input, config=None, **kwargs):  # as LangGraph's own kwarg-forwarding tests spy
    seen.append(sorted(kwargs))
    async for chunk in original(input, config, **kwargs):
        yield chunk

app.astream = spy

async def main():
    return [e["event"] async for e in app.astream_events({"x": 1}, version="v2")]

events = asyncio.run(main())
print(json.dumps({"calls": len(seen), "ended": events[-1]}))
'''


def test_a_method_set_on_the_instance_is_not_carried_into_the_drop_in(tmp_path: Path) -> None:
    """A spy set on a compiled graph's `astream` (LangGraph's own kwarg-forwarding tests) runs
    once under ACCEL_AUTO: the drop-in carried it and its entry points then called themselves
    (RecursionError in 26 of LangGraph's tests)."""
    app = tmp_path / "spied.py"
    app.write_text(SPIED)
    env = {k: v for k, v in os.environ.items() if k != "ACCEL_AUTO"}
    done = subprocess.run([sys.executable, "-m", "accel.patches.run", sys.executable, str(app)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"calls": 1, "ended": "on_chain_end"}
