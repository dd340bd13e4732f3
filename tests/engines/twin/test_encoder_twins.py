"""Encoder twins: vLLM's embedding, rerank and score shapes, deterministic content, calls timed
from the profile and run one after another on the device."""

from __future__ import annotations

import asyncio
import base64
import struct

import httpx
import pytest

from accel.engines.twin.encoder_server import Device
from accel.engines.twin.profile import load_profile

PROFILE = load_profile("h100-8b")
DOCS = ["Sort a Python list in place with list.sort.", "The weather in Paris is mild in spring.",
        "A dictionary maps keys to values in Python."]


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_embeddings_are_deterministic_normalised_and_rank_overlap_first(embedder, clock) -> None:
    async with httpx.AsyncClient(base_url=embedder.listener.base_url + "/v1") as client:
        docs = (await client.post("/embeddings", json={"model": embedder.model, "input": DOCS})).json()
        query = (await client.post("/embeddings", json={"input": "how to sort a list in Python"})).json()
        again = (await client.post("/embeddings", json={"input": ["how to sort a list in Python"],
                                                         "encoding_format": "base64"})).json()
    vectors = [item["embedding"] for item in sorted(docs["data"], key=lambda item: item["index"])]
    q = query["data"][0]["embedding"]
    assert len(q) == 384 and _cosine(q, q) == pytest.approx(1.0)
    assert max(range(3), key=lambda i: _cosine(q, vectors[i])) == 0
    decoded = struct.unpack("<384f", base64.b64decode(again["data"][0]["embedding"]))
    assert decoded == pytest.approx(q, abs=1e-6)
    tokens = [len(embedder.tokenizer.encode(text).ids) for text in DOCS]
    assert docs["usage"]["prompt_tokens"] == sum(tokens)
    assert clock.waits[0] == pytest.approx(PROFILE.embed.call_s(3, max(tokens)))


async def test_rerank_and_score_agree_and_rank_the_relevant_passage_first(reranker) -> None:
    query = "sort a list in Python"
    async with httpx.AsyncClient(base_url=reranker.listener.base_url) as client:
        ranked = (await client.post("/rerank", json={"query": query, "documents": DOCS, "top_n": 2})).json()
        scored = (await client.post("/score", json={"text_1": query, "text_2": DOCS})).json()
        pairs = (await client.post("/v1/score", json={"text_1": [query] * 3, "text_2": DOCS})).json()
    assert [r["index"] for r in ranked["results"]] == [0, 2]
    by_index = {item["index"]: item["score"] for item in scored["data"]}
    assert ranked["results"][0]["relevance_score"] == by_index[0] == pairs["data"][0]["score"]
    assert by_index[0] > by_index[2] > by_index[1]


async def test_an_input_over_the_real_servers_max_model_len_is_a_400_as_there(embedder, reranker) -> None:
    """The real pooling servers run with max_model_len 256 (embed) and 512 (rerank) and refuse a
    longer input unless the request asks them to cut it; a twin that answered would let an app
    pass that fails there."""
    words = lambda n: " ".join(["heap"] * n)  # noqa: E731 - one token per word, plus [CLS] and [SEP]
    async with httpx.AsyncClient(base_url=embedder.listener.base_url) as client:
        fits = await client.post("/v1/embeddings", json={"input": ["short", words(254)]})
        over = await client.post("/v1/embeddings", json={"input": ["short", words(255)]})
        # what accel's and LangChain's clients send: the server cuts instead of refusing
        cut = await client.post("/v1/embeddings", json={"input": ["short", words(400)], "truncate_prompt_tokens": 256})
        cut_at_max = await client.post("/v1/embeddings", json={"input": [words(400)], "truncate_prompt_tokens": -1})
    assert fits.status_code == 200 and fits.json()["usage"]["prompt_tokens"] == 3 + 256
    assert cut.status_code == 200 and cut.json()["usage"]["prompt_tokens"] == 3 + 256
    assert cut_at_max.status_code == 200 and cut_at_max.json()["usage"]["prompt_tokens"] == 256
    assert over.status_code == 400
    assert "maximum context length is 256 tokens" in over.json()["error"]["message"]
    assert "257 input tokens" in over.json()["error"]["message"]
    async with httpx.AsyncClient(base_url=reranker.listener.base_url) as client:
        ranked = await client.post("/rerank", json={"query": "heap", "documents": ["short", words(600)]})
        scored = await client.post("/score", json={"text_1": "heap", "text_2": [words(600)]})
        models = (await client.get("/v1/models")).json()
    assert ranked.status_code == scored.status_code == 400
    assert "maximum context length is 512 tokens" in ranked.json()["error"]["message"]
    assert models["data"][0]["max_model_len"] == 512


async def test_calls_on_one_device_run_one_after_another(clock) -> None:
    device = Device(clock.sleep, clock.now)
    started = clock.hold(0.004)
    first = asyncio.ensure_future(device.run(0.004))
    second = asyncio.ensure_future(device.run(0.009))
    await started.wait()  # tasks run in creation order: the second has queued behind the first by now
    assert clock.waits == [0.004]
    clock.release(0.004)
    await asyncio.gather(first, second)
    assert clock.waits == [0.004, 0.009] and device.simulated_s == pytest.approx(0.013)


async def test_a_call_cancelled_in_the_queue_keeps_the_order(clock) -> None:
    device = Device(clock.sleep, clock.now)
    started = clock.hold(0.004)
    first = asyncio.ensure_future(device.run(0.004))
    second = asyncio.ensure_future(device.run(0.005))
    third = asyncio.ensure_future(device.run(0.006))
    await started.wait()
    second.cancel()
    await asyncio.gather(second, return_exceptions=True)
    assert clock.waits == [0.004]  # the third still waits for the first
    clock.release(0.004)
    await asyncio.gather(first, third)
    assert clock.waits == [0.004, 0.006]


async def test_encoder_faults(reranker, clock) -> None:
    body = {"text_1": "q", "text_2": ["a passage"]}
    async with httpx.AsyncClient(base_url=reranker.listener.base_url) as client:
        assert (await client.post("/admin/faults", json={"die_after_tokens": 3})).status_code == 400
        await client.post("/admin/faults", json={"error_on_request": 1, "slow_factor": 2.0, "stall_s": 7.0})
        assert (await client.post("/score", json=body)).status_code == 503
        assert (await client.post("/score", json=body)).status_code == 200
    assert clock.waits[-1] == pytest.approx(7.0 + 2.0 * PROFILE.rerank.call_s(1, len(reranker.tokenizer.encode("q", "a passage").ids)))


async def test_accels_server_engines_work_against_the_twins(embedder, reranker) -> None:
    from accel.engines.embed_server import EmbeddingServerEngine, ServerEmbedRequest
    from accel.engines.rerank_server import RerankServerEngine

    async with EmbeddingServerEngine(embedder.listener.base_url + "/v1") as embed, \
            RerankServerEngine(reranker.listener.base_url, reranker.model) as rerank:
        [vector] = await embed.run([ServerEmbedRequest("hello world", (("model", embedder.model),))])
        scores = await rerank.run([("sort a list", DOCS[0]), ("sort a list", DOCS[1])])
    assert len(vector) == 384 and scores[0] > scores[1]


async def test_the_twins_own_work_counts_inside_the_modelled_time(clock) -> None:
    """A call that arrived 3 ms ago (the twin tokenised and built vectors meanwhile) waits only
    the rest of its modelled time; a call later than its modelled end counts as lag."""
    device = Device(clock.sleep, clock.now)
    clock.time = 0.010
    await device.run(0.006, arrived=0.007)
    assert clock.waits == [pytest.approx(0.003)] and device.lag_s == 0.0
    await device.run(0.001, arrived=0.012)  # the device is busy until 0.013, so it ends at 0.014
    assert clock.waits[-1] == pytest.approx(0.001)
    clock.time = 0.030
    await device.run(0.002, arrived=0.020)
    assert clock.waits[-1] == 0.0 and device.lag_s == pytest.approx(0.008)


@pytest.mark.engines
async def test_pgvector_search_over_twin_vectors_finds_the_overlapping_passage(embedder, postgres_factory) -> None:
    """Postgres stays real: the twin's vectors, stored and searched by pgvector, rank the
    passage that shares the query's words first."""
    import psycopg

    corpus = DOCS + ["Binary search halves a sorted list each step.", "Trains leave the station every hour."]
    async with httpx.AsyncClient(base_url=embedder.listener.base_url + "/v1") as client:
        stored = (await client.post("/embeddings", json={"input": corpus})).json()["data"]
        [query] = (await client.post("/embeddings", json={"input": "when does the train leave the station"})).json()["data"]
    dsn = await asyncio.to_thread(postgres_factory, "accel-twin-pg-")
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute("CREATE TABLE docs (id int, embedding vector(384))")
        for item in stored:
            await conn.execute("INSERT INTO docs VALUES (%s, %s::vector)", (item["index"], str(item["embedding"])))
        cursor = await conn.execute("SELECT id FROM docs ORDER BY embedding <=> %s::vector LIMIT 1", (str(query["embedding"]),))
        [(best,)] = await cursor.fetchall()
    assert corpus[best].startswith("Trains")


async def test_every_connection_the_twin_accepts_sends_without_nagle(embedder) -> None:
    """A kept-alive connection's answers went out ~40 ms late (the response's second write held
    for the client's delayed ACK): 44 ms a request on a reused connection against 0.3 ms."""
    import socket

    async with httpx.AsyncClient(base_url=embedder.listener.base_url) as client:
        for _ in range(2):
            assert (await client.post("/v1/embeddings", json={"model": embedder.model, "input": ["a"]})).status_code == 200
        connections = list(embedder.listener._server.server_state.connections)
        assert connections
        for connection in connections:
            accepted = connection.transport.get_extra_info("socket")
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_token_counts_built_from_remembered_texts_equal_encoding_each_input_whole() -> None:
    """The twins count a pair as its two texts' counts plus the template's special tokens, each
    text's count remembered; every count equals the tokenizer's on the whole input (what the
    real server computes), for prose, code, unicode, whitespace and empty texts."""
    from accel.engines.twin.encoder_server import TwinEncoderServer

    twin = TwinEncoderServer(PROFILE, "rerank")
    texts = [*DOCS, "", "   ", "heapq.heappush(heap, item) -> None", "naïve café — 東京 🚀", "a\nb\tc", "x" * 600]
    pairs = [(q, d) for q in texts for d in texts]
    assert twin._lengths(texts) == [len(twin.tokenizer.encode(t).ids) for t in texts]
    assert twin._lengths(pairs) == [len(twin.tokenizer.encode(q, d).ids) for q, d in pairs]
    assert twin._text_tokens.cache_info().misses == len(texts)  # each text encoded once


async def test_the_call_log_gives_each_calls_arrival_inputs_and_charged_tokens(reranker, clock) -> None:
    """A bench replays a run's encoder work from this log (benchmarks/twin_run.py): each call's
    inputs and the tokens the twin charged each one (padded to the longest), from `since` on."""
    query = "sort a list"
    lengths = [len(reranker.tokenizer.encode(query, doc).ids) for doc in DOCS]
    async with httpx.AsyncClient(base_url=reranker.listener.base_url) as client:
        await client.post("/score", json={"text_1": query, "text_2": DOCS[:1]})
        second_at = clock.now()
        await client.post("/rerank", json={"query": query, "documents": DOCS})
        everything = (await client.get("/admin/calls")).json()
        later = (await client.get("/admin/calls", params={"since": second_at})).json()
        bad = await client.get("/admin/calls", params={"since": "soon"})
    assert [(c["items"], c["tokens"]) for c in everything["calls"]] == [(1, lengths[0]), (3, max(lengths))]
    assert everything["calls"][1]["at"] == second_at
    assert [c["items"] for c in later["calls"]] == [3]
    assert bad.status_code == 400


async def test_lag_is_how_far_the_schedule_slipped_not_every_queued_calls_lateness(clock) -> None:
    """Calls queued back to back are each late by the slip before them plus their own: three
    calls late by 5, 8 and 6 ms moved the device's last answer 8 ms, not 19 (the sum, which
    read 0.15-0.18 s on the embedding twin under a stock LlamaIndex batch of ~70 small calls).
    A call that arrives to an idle device starts a slip of its own."""
    device = Device(clock.sleep, clock.now)
    for arrived, handled in ((0.000, 0.015), (0.000, 0.028), (0.001, 0.036)):  # modelled ends 0.010, 0.020, 0.030
        clock.time = handled
        await device.run(0.010, arrived=arrived)
    assert device.lag_s == pytest.approx(0.008)
    clock.time = 0.052
    await device.run(0.010, arrived=0.040)  # idle since 0.030: ends at 0.050, answered at 0.052
    assert device.lag_s == pytest.approx(0.010)
