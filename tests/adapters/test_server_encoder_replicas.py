"""Encoder servers with replicas: ACCEL_EMBED_REPLICA_URLS / ACCEL_RERANK_REPLICA_URLS list
servers that serve one model together (as ACCEL_OPENAI_REPLICA_URLS does for vLLM). An app
bound to one of them is served by all, and when one dies (a fault proxy in front of the real
pooling server refuses its connections, deterministically) the others answer: the wrapped app
still returns stock's results. The servers are the session's (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import accel
from accel.engines.catalogue import embed_server, rerank_server
from accel.engines.embed_server import ServerEmbedRequest
from accel.engines.encoder_servers import EMBED_SERVED_NAME, RERANK_SERVED_NAME, replica_urls
from accel.engines.llm.api_call import APICall
from accel.engines.replicas import ReplicatedEngine
from accel.testing.faults import FaultProxy

from .test_server_embeddings import doc_texts, embed_proxy, li_embed_model  # noqa: F401
from .test_server_retrievers import li_index, li_nodes  # noqa: F401

pytestmark = [pytest.mark.engines, pytest.mark.slow]

PARAMS = (("encoding_format", "float"), ("model", EMBED_SERVED_NAME))


@pytest.fixture()
def embed_replicas(embed_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FaultProxy, FaultProxy]]:
    with FaultProxy(embed_url) as first, FaultProxy(embed_url) as second:
        monkeypatch.setenv("ACCEL_EMBED_REPLICA_URLS", f"{first.url}/v1,{second.url}/v1/")
        yield first, second


@pytest.fixture()
def rerank_replicas(rerank_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FaultProxy, FaultProxy]]:
    with FaultProxy(rerank_url) as first, FaultProxy(rerank_url) as second:
        monkeypatch.setenv("ACCEL_RERANK_REPLICA_URLS", f"{first.url}/v1,{second.url}/v1")
        yield first, second


def test_replica_lists_name_the_bound_server_first() -> None:
    listed = ("http://a:1/v1/", "http://b:2/v1")
    assert replica_urls("http://b:2/v1/", listed) == ["http://b:2/v1", "http://a:1/v1"]
    assert replica_urls("http://c:3/v1", listed) == ["http://c:3/v1"]  # not listed: itself alone


async def _run(engine: Any, batch: list[Any]) -> list[Any]:
    async with engine:
        return await engine.run(batch)


def test_an_embedding_server_that_dies_is_failed_over(embed_url: str, embed_replicas: tuple[FaultProxy, FaultProxy]) -> None:
    first, second = embed_replicas
    engine = embed_server(first.url + "/v1").factory()
    assert isinstance(engine, ReplicatedEngine) and len(engine.set.replicas) == 2
    body = {"model": EMBED_SERVED_NAME, "input": ["a client's own request"], "encoding_format": "float"}
    call = APICall("POST", f"{first.url}/v1/embeddings", (("content-type", "application/json"),), json.dumps(body).encode())
    alone = httpx.post(f"{embed_url}/embeddings", json={**body, "input": ["one input", "another"]}, timeout=60).json()
    expected = [d["embedding"] for d in alone["data"]]
    own = httpx.post(f"{embed_url}/embeddings", json=body, timeout=60).json()["data"][0]["embedding"]
    first.kill()  # refuses every connection from now on
    vectors = asyncio.run(_run(engine, [ServerEmbedRequest("one input", PARAMS), ServerEmbedRequest("another", PARAMS), call]))
    assert vectors[:2] == expected
    assert json.loads(vectors[2].content)["data"][0]["embedding"] == own  # the client's request, sent to the live one
    out, live = engine.set.replicas
    assert (out.down_since is not None, out.failures) == (True, 1) and live.served == 1


def test_a_rerank_server_that_dies_is_failed_over(rerank_url: str, rerank_replicas: tuple[FaultProxy, FaultProxy]) -> None:
    first, _ = rerank_replicas
    pairs = [("what is a heap?", "A heap is a tree."), ("what is a heap?", "Paris is in France.")]
    direct = httpx.post(f"{rerank_url.removesuffix('/v1')}/score", timeout=60,
                        json={"model": RERANK_SERVED_NAME, "text_1": [q for q, _ in pairs], "text_2": [p for _, p in pairs]})
    expected = [d["score"] for d in sorted(direct.json()["data"], key=lambda d: d["index"])]
    engine = rerank_server(first.url + "/v1", RERANK_SERVED_NAME).factory()
    assert isinstance(engine, ReplicatedEngine) and engine.name == f"rerank-server:{RERANK_SERVED_NAME}"
    first.kill()
    # the live replica's scores (within float32 noise: the shared server may batch other tests' pairs beside these)
    assert asyncio.run(_run(engine, pairs)) == pytest.approx(expected, abs=1e-5)
    assert engine.set.replicas[0].down_since is not None and engine.set.replicas[1].served == 1


def test_a_wrapped_retriever_answers_as_stock_when_its_server_dies(
        li_index: Any, embed_replicas: tuple[FaultProxy, FaultProxy]) -> None:
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding

    first, second = embed_replicas
    model = OpenAILikeEmbedding(model_name=EMBED_SERVED_NAME, api_base=first.url + "/v1", api_key="EMPTY", max_retries=0)
    retriever = li_index.as_retriever(similarity_top_k=3, embed_model=model)
    questions = ["What is json.loads?", "How do I use heapq.heappush?", "Explain textwrap.fill?"]
    stock = [li_nodes(retriever.retrieve(q)) for q in questions]
    fast = accel.wrap(retriever)
    assert li_nodes(fast.retrieve(questions[0])) == stock[0]
    first.kill()
    with pytest.raises(Exception):  # stock's own client has no other server
        retriever.retrieve(questions[1])
    assert [li_nodes(fast.retrieve(q)) for q in questions] == stock
