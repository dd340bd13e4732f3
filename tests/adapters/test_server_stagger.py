"""Embeddings that reach the server staggered: 16 LlamaIndex `QueryFusionRetriever` queries
whose query expansions (real LLM calls, on the session's vLLM) end `STAGGER` decode steps apart, so
each question's generated queries are ready for the embedding server (the session's vLLM
pooling server, behind a recording proxy) at a different moment, as they were in the issue-24
benchmark. Wrapped, the retrievers answer what stock answers and send at most a quarter of
stock's embedding requests: a call is held for the items of the expansion streams still open
(`EngineScheduler.feeding`, `EngineLimits.call_overhead_s`).

How long a hold pays is the server's per-call cost against the time between the streams' ends,
and on the real server both are the machine's: 10-20 ms calls against decode steps of a few ms,
so the count moved with the machine's load: with expansions 48 tokens apart, 2-9 requests under
load, 12 and 14 on a quiet machine, 15 in a CI run, against stock's 32. The test states the
economics instead: a saved profile says a call costs `CALL_S` whatever it carries (a server
behind a slow network), as `accel profile` would measure it, so holding for expansions that end
within a few seconds pays (3-4 requests quiet, 3-8 with both cores kept busy, 2026-11-27). The
policy's bounds themselves are pinned on fake engines (tests/core/runtime/test_stream_hold.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import accel
from accel.engines.embed_server import EmbeddingServerEngine
from accel.engines.encoder_servers import EMBED_SERVED_NAME
from accel.engines.profile import EngineProfile, ProfilePoint
from accel.testing.proxy import RecordingProxy

from .test_server_embeddings import CONCURRENT, QUESTIONS, TINY, doc_texts, embed_proxy, embed_url, li_embed_model  # noqa: F401
from .test_server_retrievers import embedding_requests, li_index, li_nodes, sent_inputs  # noqa: F401

pytestmark = [pytest.mark.engines, pytest.mark.slow]

FIRST_MAX_TOKENS = 64
"""Tokens of the shortest expansion: long enough that the 16 streams overlap even where a busy
machine starts the queries apart."""
STAGGER = 4
"""Tokens each expansion decodes beyond the last one's."""
CALL_S = 0.2
"""What the saved profile says one embedding call costs whatever it carries."""
BATCH = 32
"""The profile's efficient batch: each text adds 1 ms, so a duration-sized call (0.11 s) takes
15 query texts: 32 items need 3 calls at least."""


@pytest.fixture
def slow_server_profile(embed_proxy: RecordingProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The embedding server (as the proxy's URL names it) profiled at `CALL_S` a call, in a
    session of its own: sessions read the saved profiles once."""
    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    points = [ProfilePoint(n, n / (CALL_S + 0.001 * n), CALL_S + 0.001 * n) for n in (1, BATCH)]
    EngineProfile(EmbeddingServerEngine(embed_proxy.url + "/v1").name, "query", points, BATCH).save()
    accel.shutdown()
    yield
    accel.shutdown()  # later tests get a session with the default profiles


def fusion(index: Any, llm_url: str, embed_url: str, max_tokens: int) -> Any:
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(model=TINY, api_base=llm_url, api_key="EMPTY", max_tokens=max_tokens, temperature=0.0,
                     context_window=2048, is_chat_model=False,
                     additional_kwargs={"extra_body": {"ignore_eos": True}})  # each ends at its max_tokens
    embed = OpenAILikeEmbedding(model_name=EMBED_SERVED_NAME, api_base=embed_url, api_key="EMPTY",  # long queries cut
                                additional_kwargs={"extra_body": {"truncate_prompt_tokens": 256}})
    return QueryFusionRetriever([index.as_retriever(similarity_top_k=3, embed_model=embed)], llm=llm, num_queries=3,
                                similarity_top_k=3, use_async=False)


async def test_staggered_expansions_send_a_quarter_of_stocks_embedding_requests(
        li_index: Any, llm_proxy: RecordingProxy, embed_proxy: RecordingProxy, slow_server_profile: None) -> None:
    # one retriever per question, each expansion STAGGER tokens longer than the last: the
    # streams end STAGGER decode steps apart (the wrapped ones share the session's engines)
    retrievers = [fusion(li_index, llm_proxy.url + "/v1", embed_proxy.url + "/v1", FIRST_MAX_TOKENS + STAGGER * i)
                  for i in range(CONCURRENT)]
    embedding_requests(embed_proxy)
    stock = await asyncio.gather(*(r.aretrieve(q) for r, q in zip(retrievers, QUESTIONS, strict=True)))
    stock_requests = embedding_requests(embed_proxy)
    wrapped = [accel.wrap(r) for r in retrievers]
    await asyncio.gather(*(w.aretrieve(q) for w, q in zip(wrapped, QUESTIONS, strict=True)))  # templates built
    # the hold needs the expansions lowered (their extra_body forwarded), so that decode_pipeline
    # maps each sub-retriever's embed over its expansion stream, whose items the embed waits for
    assert "Decode(query lines, splittable" in wrapped[0].explain(), wrapped[0].explain()
    embedding_requests(embed_proxy)
    llm_proxy.recorder.take()
    ours = await asyncio.gather(*(w.aretrieve(q) for w, q in zip(wrapped, QUESTIONS, strict=True)))
    ours_requests = embedding_requests(embed_proxy)
    expansions = [r.body for r in llm_proxy.recorder.take() if r.path.endswith("/completions")]
    assert len(expansions) == CONCURRENT and all(body.get("ignore_eos") is True for body in expansions)
    assert [li_nodes(n) for n in ours] == [li_nodes(n) for n in stock]
    assert sent_inputs(ours_requests) == sent_inputs(stock_requests)
    assert len(stock_requests) >= 2 * CONCURRENT  # the question and at least one generated query each
    assert len(ours_requests) <= len(stock_requests) // 4, [len(r.body["input"]) for r in ours_requests]
