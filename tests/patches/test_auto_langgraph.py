"""ACCEL_AUTO=1 covers LangGraph entry points, in fresh interpreters: an unchanged app's compiled
graph runs each call as a wrapped run (invoke, batch, stream, ainvoke, astream), its node's
engine calls are captured, and engine calls outside any app are captured too (the floor is
process-wide); uninstrument restores Pregel's methods."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

APP = '''
import asyncio, json, sys
from typing import TypedDict
from langgraph.graph import StateGraph, START, END
from langgraph.pregel import Pregel
from langchain_openai import ChatOpenAI

llm = ChatOpenAI(base_url=sys.argv[1], api_key="EMPTY", model="tiny", temperature=0, max_tokens=4, max_retries=0)

class State(TypedDict):
    question: str
    answer: str
    wrapped: bool

def answer(state):
    scope = sys.modules.get("accel.scope")  # the app imports no accel code
    run = scope.current_run() if scope else None
    return {"answer": llm.invoke(state["question"]).content, "wrapped": run is not None and run.app != "auto"}

builder = StateGraph(State)
builder.add_node("answer", answer)
builder.add_edge(START, "answer")
builder.add_edge("answer", END)
graph = builder.compile()

out = graph.invoke({"question": "hi"})
batch = graph.batch([{"question": "a"}, {"question": "b"}])
streamed = list(graph.stream({"question": "hi"}, stream_mode="updates"))
async def both():
    a = await graph.ainvoke({"question": "hi"})
    s = [c async for c in graph.astream({"question": "hi"}, stream_mode="values")]
    return a, s
aout, astreamed = asyncio.run(both())
plain = llm.invoke("outside any graph").content
floor = sys.modules.get("accel.adapters.common.floor")
print(json.dumps({
    "patched": hasattr(Pregel.invoke, "__wrapped__"),
    "wrapped": [out["wrapped"], *(b["wrapped"] for b in batch), streamed[0]["answer"]["wrapped"],
                aout["wrapped"], astreamed[-1]["wrapped"]],
    "answers": [out["answer"], aout["answer"], astreamed[-1]["answer"], streamed[0]["answer"]["answer"]],
    "routed": floor.stats.snapshot()["routed"].get("openai-sdk", 0) if floor else 0,
}))
'''


def _run(tmp_path: Path, url: str, env_extra: dict[str, str]) -> dict:
    app = tmp_path / "app.py"
    app.write_text(APP)
    env = {k: v for k, v in os.environ.items() if k != "ACCEL_AUTO"} | env_extra
    done = subprocess.run([sys.executable, str(app), url], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.engines
def test_accel_auto_covers_langgraph_entry_points(tmp_path: Path, vllm_server) -> None:
    from accel.patches.run import BOOTSTRAP

    stock = _run(tmp_path, vllm_server.base_url, {"PYTHONPATH": str(BOOTSTRAP)})
    auto = _run(tmp_path, vllm_server.base_url, {"ACCEL_AUTO": "1", "PYTHONPATH": str(BOOTSTRAP)})
    assert stock["patched"] is False and not any(stock["wrapped"]) and stock["routed"] == 0
    assert auto["patched"] is True and all(auto["wrapped"])
    assert auto["answers"] == stock["answers"]
    assert auto["routed"] == 7  # 6 graph runs, and the plain call outside any graph


def test_uninstrument_restores_pregel() -> None:
    code = '''
import json
from langgraph.pregel import Pregel
names = ("invoke", "ainvoke", "stream", "astream")
before = {n: Pregel.__dict__[n] for n in names}
import accel.patches as p
assert p.instrument(force=True)
patched = all(Pregel.__dict__[n] is not f for n, f in before.items())
p.uninstrument()
restored = all(Pregel.__dict__[n] is f for n, f in before.items())
print(json.dumps([patched, restored]))
'''
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, True]
