"""The sweeps `accel profile` runs, one per engine kind, on engines made here.

The profiler measures raw engines at the batch sizes it asks for (`max_batch` up to the
largest), so it makes them itself rather than through the catalogue, whose specs carry the
limits apps run with; like the rest of engines/, it knows no framework. Each function returns
the `EngineProfile`(s) of `accel.engines.profile.profile_engine`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from accel.config import settings
from accel.engines.errors import InvalidRequest
from accel.engines.profile import (
    DEFAULT_BATCH_SIZES,
    EngineProfile,
    PrefillCost,
    chunk_texts,
    profile_engine,
    query_texts,
)

if TYPE_CHECKING:
    from rich.progress import Progress

LLM_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Swept until throughput flattens (a CPU's by 32; an H100's 8B decode still gains past 64),
up to `accel profile --max-batch`."""
SEQUENTIAL_VS_BATCHED = 16
PREFILL_LENGTHS = (32, 1024)
"""Prompt tokens of the two lone prompt-only requests `measure_prefill` times: a question's
length and a retrieved context's, both inside every served model's window."""


def _pairs(n: int) -> list[tuple[str, str]]:
    return list(zip(query_texts(n), chunk_texts(n), strict=True))


async def profile_embedder(batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES, *, repeats: int = 3,
                           threads: int | None = None, progress: Progress | None = None) -> list[EngineProfile]:
    """The packaged MiniLM embedder in this process, on query- and chunk-length texts."""
    from accel.engines.embeddings import SentenceTransformerEmbedder

    async with SentenceTransformerEmbedder(max_batch=max(batch_sizes), threads=threads) as embedder:
        return [await profile_engine(embedder, make, batch_sizes, label=label, repeats=repeats, progress=progress)
                for label, make in (("query", query_texts), ("chunk", chunk_texts))]


async def profile_reranker(batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES, *, repeats: int = 3,
                           threads: int | None = None, progress: Progress | None = None) -> EngineProfile:
    """The offline cross-encoder in this process, on (query, chunk) pairs."""
    from accel.engines.reranker import CrossEncoderReranker

    async with CrossEncoderReranker(max_batch=max(batch_sizes), threads=threads) as reranker:
        return await profile_engine(reranker, _pairs, batch_sizes, label="pairs", repeats=repeats, progress=progress)


async def profile_vectordb(*, repeats: int = 3, progress: Progress | None = None) -> EngineProfile:
    """Nearest-neighbour search of n query vectors in one round trip over 5,000 stored rows, on
    the stack's Postgres (else the one `resolve_dsn` finds or starts)."""
    import numpy as np

    from accel.engines.base import VectorQuery
    from accel.engines.stack import read_state
    from accel.engines.vectordb import PgVectorEngine, Row, resolve_dsn

    state = read_state()
    dsn = state.pg_dsn if state else resolve_dsn(start=True)
    rng = np.random.default_rng(0)
    collection = "accel_profile"
    async with PgVectorEngine(dsn) as db:
        await db.drop_collection(collection)
        await db.create_collection(collection, dim=384, metric="cosine")
        vectors = rng.standard_normal((5000, 384)).astype("float32")
        await db.ingest(collection, [Row(str(i), f"row {i}", v, {}) for i, v in enumerate(vectors)])

        def queries(n: int) -> list[VectorQuery]:
            return [VectorQuery(v, k=8, collection=collection) for v in rng.standard_normal((n, 384))]

        try:
            return await profile_engine(db, queries, label="search-k8-5000rows", repeats=repeats, progress=progress)
        finally:
            await db.drop_collection(collection)


async def profile_llm(batch_sizes: Sequence[int] = LLM_BATCH_SIZES, *, repeats: int = 3,
                      progress: Progress | None = None) -> tuple[EngineProfile, dict[str, Any]]:
    """Concurrent generations of ~350 prompt tokens and 32 output tokens on the stack's vLLM
    server (else the configured model in this process), and 16 requests one after another
    against submitted together. Every prompt is new (a counter leads it) so vLLM's prefix cache
    cannot flatter larger batches."""
    from accel.engines.base import GenerationRequest, SamplingParams
    from accel.engines.stack import read_state

    counter = itertools.count()
    body = " ".join(chunk_texts(2))
    params = SamplingParams(max_tokens=32, temperature=0.0, extra={"ignore_eos": True})

    def requests(n: int) -> list[GenerationRequest]:
        return [GenerationRequest(prompt=f"Request {next(counter)}. {body}", params=params) for _ in range(n)]

    state = read_state()
    if state is not None:
        from accel.engines.llm import OpenAIServerEngine

        engine: Any = OpenAIServerEngine(state.openai_base_url, state.model)
    else:
        from accel.engines.llm import VLLMEngine
        from accel.engines.offline.llm import resolve_llm

        cfg = settings()
        engine = VLLMEngine(resolve_llm(cfg.llm_model, size=cfg.llm_size))
    async with engine:
        profile = await profile_engine(engine, requests, batch_sizes, label="prompt350-out32",
                                       repeats=repeats, progress=progress, fresh=True, until_flat=True)
        profile = dataclasses.replace(profile, prefill=await measure_prefill(engine, repeats=repeats, progress=progress))
        n = SEQUENTIAL_VS_BATCHED
        task = progress.add_task(f"{engine.name}: {n} one after another vs together", total=2 * repeats) if progress else None
        loop = asyncio.get_running_loop()
        sequential, batched = [], []
        for _ in range(repeats):  # the fastest of `repeats`, as for the sweep above
            began = loop.time()
            for request in requests(n):
                await engine.run([request])
            sequential.append(loop.time() - began)
            began = loop.time()
            await engine.run(requests(n))
            batched.append(loop.time() - began)
            if progress is not None and task is not None:
                progress.advance(task, 2)
    best_sequential, best_batched = min(sequential), min(batched)
    return profile, {"n": n, "sequential_s": best_sequential, "batched_s": best_batched,
                     "ratio": best_sequential / best_batched}


async def measure_prefill(engine: Any, lengths: tuple[int, int] = PREFILL_LENGTHS, *, repeats: int = 3,
                          progress: Progress | None = None) -> PrefillCost:
    """Lone prompt-only requests (`max_tokens` 1) of exactly `lengths` prompt tokens, one after
    another, the fastest of `repeats` (after one untimed) for each: what a prompt's length costs
    the engine, beside the sweep's decode-bound figures. Each prompt opens with its own counter
    so no block of it is in the prefix cache."""
    from accel.engines.base import GenerationRequest, SamplingParams

    short, long = lengths
    window = getattr(engine, "max_model_len", 0)  # known once the engine started; 0: unknown
    if window and long >= window:  # a model with a short window: its longest prompt instead
        long = window - 1
    if long <= short:
        raise InvalidRequest("profile", f"{engine.name}'s window of {window} tokens leaves no prompt longer than {short}",
                             "serve the model with a longer max_model_len to profile its prefill")
    body = await engine.tokenize(" ".join(chunk_texts(16)), add_special_tokens=False)
    if len(body) < long:
        raise InvalidRequest("profile", f"the prefill probe text has {len(body)} tokens, fewer than {long}",
                             "measure a shorter length")
    counter = itertools.count()
    params = SamplingParams(max_tokens=1, temperature=0.0)
    task = progress.add_task(f"{engine.name}: prefill of {short} and {long} tokens", total=2 * (repeats + 1)) if progress else None

    async def fastest(tokens: int) -> float:
        timings = []
        for attempt in range(repeats + 1):
            lead = await engine.tokenize(f"Probe {next(counter)}.", add_special_tokens=True)
            request = GenerationRequest(prompt_token_ids=(lead + body)[:tokens], params=params)
            began = time.perf_counter()
            await engine.run([request])
            if attempt:
                timings.append(time.perf_counter() - began)
            if progress is not None and task is not None:
                progress.advance(task)
        return min(timings)

    return PrefillCost(short, await fastest(short), long, await fastest(long))
