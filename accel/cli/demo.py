"""The demo behind `accel demo`: one real request through every engine of the local stack.

It is a smoke run a person can read, not a benchmark: stdlib documentation is chunked, embedded
and ingested into pgvector; a question is embedded, searched, reranked and keyword-searched; the
LLM answers from the top passages, and a second request with the same instructions shows vLLM's
prefix cache at work.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack

from rich.console import Console
from rich.table import Table

from accel.engines.base import GenerationRequest, SamplingParams, TextQuery, VectorQuery
from accel.engines.stack import StackInfo

QUESTION = "How do I read a text file line by line and strip the newline?"
COLLECTION = "accel_demo"
CHUNK_WORDS = 120


def _chunks(n_docs: int = 6) -> list[tuple[str, str]]:
    from accel.engines.offline.corpus import stdlib_docs

    out = []
    for doc in stdlib_docs()[:n_docs]:
        words = doc.text.split()
        for i in range(0, len(words), CHUNK_WORDS):
            out.append((f"{doc.id}:{i // CHUNK_WORDS}", " ".join(words[i : i + CHUNK_WORDS])))
    return out


async def run_demo(info: StackInfo, console: Console) -> None:
    from accel.engines import catalogue
    from accel.engines.vectordb.engine import Row

    steps = Table(title=f"accel demo — {QUESTION!r}")
    for col in ("step", "engine", "requests", "seconds", "result"):
        steps.add_column(col)

    def record(step: str, engine: str, n: int, t0: float, result: str) -> None:
        steps.add_row(step, engine, str(n), f"{time.perf_counter() - t0:.3f}", result)

    async with AsyncExitStack() as stack:
        embedder = await stack.enter_async_context(catalogue.embedder(info.embed_model).factory())
        reranker = await stack.enter_async_context(catalogue.reranker(info.rerank_model).factory())
        db = await stack.enter_async_context(catalogue.pgvector(info.pg_dsn).factory())
        search = await stack.enter_async_context(catalogue.search().factory())
        llm = await stack.enter_async_context(catalogue.openai_server(info.openai_base_url, info.model).factory())

        chunks = _chunks()
        t0 = time.perf_counter()
        vectors = await embedder.run([text for _, text in chunks])
        record("embed chunks", "embed", len(chunks), t0, f"{len(vectors)} x {len(vectors[0])}-d vectors")

        t0 = time.perf_counter()
        await db.drop_collection(COLLECTION)
        await db.create_collection(COLLECTION, dim=len(vectors[0]), metric="cosine")
        await db.ingest(COLLECTION, [Row(cid, text, vec, {}) for (cid, text), vec in zip(chunks, vectors)])
        record("ingest", "vectordb", len(chunks), t0, f"collection {COLLECTION!r}")

        t0 = time.perf_counter()
        (qvec,) = await embedder.run([QUESTION])
        record("embed question", "embed", 1, t0, "1 vector")

        t0 = time.perf_counter()
        (hits,) = await db.run([VectorQuery(qvec, k=8, collection=COLLECTION)])
        record("vector search", "vectordb", 1, t0, ", ".join(h.id for h in hits[:3]) + ", ...")

        t0 = time.perf_counter()
        scores = await reranker.run([(QUESTION, h.text) for h in hits])
        top = [h for _, h in sorted(zip(scores, hits), key=lambda p: -p[0])[:3]]
        record("rerank 8 -> 3", "rerank", len(hits), t0, ", ".join(h.id for h in top))

        t0 = time.perf_counter()
        (kw_hits,) = await search.run([TextQuery(QUESTION, k=3)])
        record("keyword search", "search", 1, t0, ", ".join(h.id for h in kw_hits))

        context = "\n\n".join(h.text for h in top)
        system = "You answer questions about the Python standard library from the context given."
        params = SamplingParams(max_tokens=32, temperature=0.0)
        for label in ("generate", "generate again (prefix cache)"):
            t0 = time.perf_counter()
            messages = [{"role": "system", "content": system},
                        {"role": "user", "content": f"Context:\n{context}\n\nQuestion: {QUESTION}"}]
            (gen,) = await llm.run([GenerationRequest(messages=messages, params=params)])
            record(label, "llm", 1, t0,
                   f"{gen.prompt_tokens} prompt / {gen.completion_tokens} output tokens, {gen.cached_tokens} cached")
        await db.drop_collection(COLLECTION)

    console.print(steps)
    console.print(f"LLM answer (random offline weights unless ACCEL_LLM_MODEL is set): {gen.text[:200]!r}")
