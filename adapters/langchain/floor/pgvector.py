"""langchain-postgres `PGVector` searches through the shared pgvector engine.

Every `similarity_search*` entry point ends in `similarity_search_with_score_by_vector` (sync)
or `asimilarity_search_with_score_by_vector` (async): the nearest `k` rows of the collection
by the store's distance, with its metadata filter. The engine runs the same query (many
programs' vectors per round trip) and returns the same rows and distances, rebuilt as the
`(Document, distance)` pairs stock returns. The store's own preconditions stay its own: a
store built on a sync connection still refuses the async path with stock's error, and an async
store still runs its lazy initialisation first.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.common import bindings
from accel.adapters.common.floor import Plugin, arouted, register, routed, values
from accel.types import EngineCall

COMPONENT = "PGVector"
_METRICS = {"cosine": "cosine", "l2": "l2", "inner": "ip"}


def _plan(store: Any, engine: Any, embedding: Any, k: int, filter: dict | None) -> EngineCall | str:
    from accel.engines.base import VectorQuery

    if store.embeddings is None:
        return "a store without embeddings (stock scores are None)"
    if not store.use_jsonb:
        return "a non-JSONB store"
    metric = _METRICS.get(getattr(store._distance_strategy, "value", store._distance_strategy))
    if metric is None:
        return f"distance strategy {store._distance_strategy!r}"
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        return f"k={k!r}"
    from accel.adapters.langchain.tables import pgvector_collection

    query = VectorQuery(vector=[float(v) for v in embedding], k=k, collection=pgvector_collection(store.collection_name),
                        metric=metric, filter=filter)
    spec = bindings.pgvector(bindings.libpq_dsn(engine.url))
    # shown: the documents as a later prompt built from state may print them (learned prefill)
    return EngineCall(spec, [query], COMPONENT, shape=_scored_documents, shown=values.shown)


def _scored_documents(results: list[Any]) -> list[tuple[Any, float]]:
    from langchain_core.documents import Document

    [hits] = results
    return [(Document(id=hit.id, page_content=hit.text, metadata=dict(hit.metadata)), hit.score) for hit in hits]


def _search(store: Any, embedding: Any, k: int = 4, filter: dict | None = None) -> EngineCall | str:
    if store._async_engine is not None or store._engine is None:
        return "an async store on the sync path (stock refuses it)"
    return _plan(store, store._engine, embedding, k, filter)


async def _asearch(store: Any, embedding: Any, k: int = 4, filter: dict | None = None) -> EngineCall | str:
    if store._async_engine is None:
        return "a sync-connection store on the async path (stock refuses it)"
    await store.__apost_init__()  # stock's lazy async initialisation (tables, collection)
    return _plan(store, store._async_engine, embedding, k, filter)


register(Plugin(
    "langchain:" + COMPONENT,
    "langchain_postgres.vectorstores",
    "PGVector",
    {
        "similarity_search_with_score_by_vector": routed(COMPONENT, _search),
        "asimilarity_search_with_score_by_vector": arouted(COMPONENT, _asearch),
    },
))
