"""Content replay for validation check 1: the bench's recorder keeps each engine request with the
body its client read, and twins loaded with a recording answer those requests with the recorded
content (LLM text, vectors, rerank scores) and everything else with their own."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from accel.benchmarks.content_recording import recording
from accel.benchmarks.encoder_requests import counting
from accel.engines.http_client import engine_client
from accel.engines.twin.content import embedding
from accel.engines.twin.replay import answer_text


async def test_the_recorder_keeps_each_engine_request_with_the_body_its_client_read(make_twin, embedder, tmp_path) -> None:
    twin = await make_twin()
    path = tmp_path / "content.jsonl"
    body = {"model": "tiny", "prompt": "The capital of France is", "max_tokens": 6, "ignore_eos": True}
    with recording(path):
        async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
            plain = (await client.post("/v1/completions", json=body)).json()
            streamed = (await client.post("/v1/completions", json={**body, "stream": True})).text
            await client.get("/v1/models")  # not an engine request: not recorded
        vectors = await asyncio.to_thread(
            lambda: httpx.post(embedder.listener.base_url + "/v1/embeddings", json={"input": ["a", "b c"]}).json())
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["path"] for r in records] == ["/v1/completions", "/v1/completions", "/v1/embeddings"]
    assert records[0]["request"] == body and json.loads(records[0]["response"]) == plain
    assert records[1]["response"] == streamed
    assert answer_text("/v1/completions", records[1]["response"]) == (plain["choices"][0]["text"], "length")
    assert json.loads(records[2]["response"]) == vectors
    # a timeline too: each request's send and read-to-the-end times, in the order bodies were read
    assert all(r["sent_at"] <= r["done_at"] for r in records)
    assert [r["done_at"] for r in records] == sorted(r["done_at"] for r in records)
    assert records[1]["sent_at"] >= records[0]["done_at"]  # the client awaited the first before sending the second


async def test_the_recorder_and_the_counter_see_accels_engine_clients_too(make_twin, embedder, reranker, tmp_path) -> None:
    """accel's engines send through their own transport (aiohttp's connections under httpx's API),
    not httpx's: both hooks must see them, or every accel row counts no encoder request and a
    recording for check 1 holds only stock's content."""
    twin = await make_twin()
    stack = type("Stack", (), {"embed_base_url": embedder.listener.base_url + "/v1", "rerank_base_url": reranker.listener.base_url})
    path = tmp_path / "content.jsonl"
    body = {"model": "tiny", "prompt": "The capital of France is", "max_tokens": 4, "ignore_eos": True}
    with recording(path), counting(stack) as counter:
        async with engine_client() as client:
            answer = (await client.post(twin.listener.base_url + "/v1/completions", json=body)).json()
            await client.post(embedder.listener.base_url + "/v1/embeddings", json={"input": ["a", "b c"]})
            await client.post(embedder.listener.base_url + "/v1/embeddings", json={"input": ["d"]})
            await client.post(reranker.listener.base_url + "/v2/rerank", json={"query": "q", "documents": ["x", "y"]})
            await client.get(embedder.listener.base_url + "/metrics")  # a read of the server's state: not its work
            await client.get(reranker.listener.base_url + "/v1/models")
        counts = counter.counts()
    assert counts == {"embed": 2, "rerank": 1}
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["path"] for r in records] == ["/v1/completions", "/v1/embeddings", "/v1/embeddings", "/v2/rerank"]
    assert json.loads(records[0]["response"]) == answer


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


async def _load(base_url: str, path: Path) -> int:
    async with httpx.AsyncClient(base_url=base_url) as client:
        reply = await client.post("/admin/replay", json={"path": str(path)})
    assert reply.status_code == 200, reply.text
    return reply.json()["loaded"]


async def test_an_llm_twin_answers_a_recorded_request_with_the_recorded_text_and_others_with_its_own(make_twin, tmp_path) -> None:
    twin = await make_twin()
    recorded = {"model": "tiny", "prompt": "Recorded prompt", "max_tokens": 16}
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16, "stream": True}
    sse = ('data: {"choices":[{"index":0,"delta":{"content":" kept"}}]}\n\n'
           'data: {"choices":[{"index":0,"delta":{"content":" words"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    path = _write(tmp_path / "r.jsonl", [
        {"path": "/v1/completions", "request": recorded,
         "response": json.dumps({"choices": [{"text": " the recorded answer", "finish_reason": "stop"}]})},
        {"path": "/v1/chat/completions", "request": chat, "response": sse}])
    assert await _load(twin.listener.base_url, path) == 2
    async with httpx.AsyncClient(base_url=twin.listener.base_url) as client:
        as_text = (await client.post("/v1/completions", json=recorded)).json()
        as_ids = (await client.post("/v1/completions", json={**recorded, "prompt": twin.tokenizer("Recorded prompt").input_ids})).json()
        chatted = (await client.post("/v1/chat/completions", json={**chat, "stream": False})).json()
        other = (await client.post("/v1/completions", json={**recorded, "max_tokens": 15})).json()
        await client.delete("/admin/replay")
        dropped = (await client.post("/v1/completions", json=recorded)).json()
    assert as_text["choices"][0]["text"] == as_ids["choices"][0]["text"] == " the recorded answer"
    assert as_text["choices"][0]["finish_reason"] == "stop"
    assert as_text["usage"]["completion_tokens"] == len(twin.tokenizer(" the recorded answer", add_special_tokens=False).input_ids) + 1
    assert chatted["choices"][0]["message"]["content"] == " kept words"
    assert other["choices"][0]["text"] != " the recorded answer"  # another key: the twin's own content
    assert dropped["choices"][0]["text"] != " the recorded answer"


async def test_encoder_twins_serve_recorded_vectors_and_scores(embedder, reranker, tmp_path) -> None:
    recorded = [0.0] * 383 + [1.0]
    path = _write(tmp_path / "e.jsonl", [
        {"path": "/v1/embeddings", "request": {"input": ["recorded text"]},
         "response": json.dumps({"data": [{"index": 0, "embedding": recorded}]})},
        {"path": "/v2/rerank", "request": {"query": "q", "documents": ["best", "second", "third"], "top_n": 2},
         "response": json.dumps({"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.4}]})}])
    assert await _load(embedder.listener.base_url, path) == 3
    assert await _load(reranker.listener.base_url, path) == 3
    async with httpx.AsyncClient() as client:
        vectors = (await client.post(embedder.listener.base_url + "/v1/embeddings",
                                     json={"input": ["recorded text", "fresh text"]})).json()["data"]
        ranked = (await client.post(reranker.listener.base_url + "/v2/rerank",
                                    json={"query": "q", "documents": ["best", "second", "third", "fourth"]})).json()["results"]
    assert vectors[0]["embedding"] == recorded
    assert vectors[1]["embedding"] == pytest.approx(embedding("fresh text", 384))
    # the recorded scores; the passages the recording's top_n left out rank below both
    assert [r["index"] for r in ranked][:2] == [1, 0]
    assert [r["relevance_score"] for r in ranked][:2] == [0.9, 0.4]
    assert all(r["relevance_score"] < 0.4 for r in ranked[2:])
