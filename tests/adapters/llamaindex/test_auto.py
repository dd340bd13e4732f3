"""ACCEL_AUTO / accel-run accelerate an unchanged LlamaIndex app (`query` / `aquery` of a
`RetrieverQueryEngine`) in a fresh interpreter, with the stock answers; uninstrument restores
the original methods."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

APP = '''
import asyncio, json
from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.llms import MockLLM
from llama_index.core.schema import TextNode
from llama_index.embeddings.huggingface import HuggingFaceEmbedding
from accel.engines.embeddings import packaged_minilm_path
from accel.patches import llamaindex as patch
from accel.session import get_session

embed = HuggingFaceEmbedding(model_name=str(packaged_minilm_path()), device="cpu")
nodes = [TextNode(id_=f"n{i}", text=t) for i, t in enumerate(["the heron sleeps", "a violin hums", "fresh bread"])]
engine = VectorStoreIndex(nodes, embed_model=embed).as_query_engine(llm=MockLLM(), similarity_top_k=2)
sync = engine.query("music at dawn")
async_ = asyncio.run(engine.aquery("baking bread"))
print(json.dumps({
    "answers": [sync.response, async_.response],
    "sources": [[n.node.node_id for n in r.source_nodes] for r in (sync, async_)],
    "patched": patch.patched() and hasattr(BaseQueryEngine.__dict__["query"], "__wrapped__"),
    "accelerated": get_session().started,
}))
'''


def _run(tmp_path: Path, command: list[str], env_extra: dict[str, str]) -> dict:
    app = tmp_path / "app.py"
    app.write_text(APP)
    env = {k: v for k, v in os.environ.items() if k != "ACCEL_AUTO"} | env_extra
    done = subprocess.run([*command, str(app)], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.engines
def test_accel_run_accelerates_the_unchanged_app_with_stock_answers(tmp_path: Path) -> None:
    stock = _run(tmp_path, [sys.executable], {})
    assert stock["patched"] is False and stock["accelerated"] is False
    fast = _run(tmp_path, [sys.executable, "-m", "accel.patches.run", sys.executable], {})
    assert fast["patched"] is True and fast["accelerated"] is True
    assert fast["answers"] == stock["answers"] and fast["sources"] == stock["sources"]


def test_uninstrument_restores_the_query_methods() -> None:
    code = '''
import json
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.base.base_query_engine import BaseQueryEngine
before = {n: BaseQueryEngine.__dict__[n] for n in ("query", "aquery")}
import accel.patches as p
assert p.instrument(force=True)
patched = all(BaseQueryEngine.__dict__[n] is not f for n, f in before.items())
p.uninstrument()
restored = all(BaseQueryEngine.__dict__[n] is f for n, f in before.items())
print(json.dumps([patched, restored]))
'''
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, True]


CHAT_APP = '''
import asyncio, json, sys
from llama_index.core import VectorStoreIndex
from llama_index.core.chat_engine import CondensePlusContextChatEngine, SimpleChatEngine
from llama_index.core.schema import TextNode
from llama_index.core.workflow import Workflow, StartEvent, StopEvent, step
from llama_index.embeddings.huggingface import HuggingFaceEmbedding
from llama_index.llms.openai_like import OpenAILike
from accel.engines.embeddings import packaged_minilm_path

llm = OpenAILike(model="tiny", api_base=sys.argv[1], api_key="EMPTY", is_chat_model=True, temperature=0.0,
                 max_tokens=8, context_window=1600)
embed = HuggingFaceEmbedding(model_name=str(packaged_minilm_path()), device="cpu")
nodes = [TextNode(id_=f"n{i}", text=t) for i, t in enumerate(["the heron sleeps", "a violin hums", "fresh bread"])]
index = VectorStoreIndex(nodes, embed_model=embed)

class JokeFlow(Workflow):
    @step
    async def generate_joke(self, ev: StartEvent) -> StopEvent:
        response = await llm.acomplete(f"Write your best joke about {ev.topic}.")
        scope = sys.modules.get("accel.scope")  # the app imports no accel code
        run = scope.current_run() if scope else None
        return StopEvent(result=[str(response), run is not None and run.app == "JokeFlow"])

chat = index.as_chat_engine(chat_mode="condense_plus_context", llm=llm)
simple = SimpleChatEngine.from_defaults(llm=llm)
answers = [chat.chat("what sleeps?").response, chat.chat("and then?").response, simple.chat("hello").response]

async def both():
    a = (await chat.achat("tell me more")).response
    return a, await JokeFlow(timeout=60).run(topic="pirates")

achat, (joke, flow_wrapped) = asyncio.run(both())
floor = sys.modules.get("accel.adapters.common.floor")
print(json.dumps({
    "answers": [*answers, achat, joke],
    "history": [m.content for m in chat.chat_history],
    "patched": CondensePlusContextChatEngine.chat.__module__.startswith("accel."),
    "flow_wrapped": flow_wrapped,
    "routed": floor.stats.snapshot()["routed"].get("openai-sdk", 0) if floor else 0,
}))
'''


@pytest.mark.engines
def test_accel_run_covers_chat_engines_and_workflows(tmp_path: Path, vllm_server) -> None:
    app = tmp_path / "chat_app.py"
    app.write_text(CHAT_APP)

    def run(command: list[str]) -> dict:
        env = {k: v for k, v in os.environ.items() if k != "ACCEL_AUTO"}
        done = subprocess.run([*command, str(app), vllm_server.base_url], capture_output=True, text=True, env=env,
                              timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    stock = run([sys.executable])
    fast = run([sys.executable, "-m", "accel.patches.run", sys.executable])
    assert stock["patched"] is False and stock["routed"] == 0 and stock["flow_wrapped"] is False
    assert fast["patched"] is True and fast["flow_wrapped"] is True
    assert fast["answers"] == stock["answers"] and fast["history"] == stock["history"]
    assert fast["routed"] >= 6  # condense + answer per chat turn, the simple chat, the workflow's call
