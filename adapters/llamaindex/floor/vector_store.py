"""`PGVectorStore.query` / `aquery` through the shared pgvector engine.

In the default dense mode stock runs `ORDER BY embedding <=> q LIMIT k` on the store's
`data_<table>` (SQLAlchemy over psycopg2, or asyncpg) and rebuilds nodes from the rows; the
engine runs the same nearest-neighbour query (many programs' vectors per round trip) and the
rows are rebuilt by the same code (`bindings.hits_to_result`, the store's
`_db_rows_to_query_result`), similarities `1 - distance`. Filters, node or doc ids, other query
modes, index settings (`ivfflat_probes`, HNSW, halfvec), a customised query and the store's
custom fields stay stock. The store's own lazy initialisation runs first, as in stock.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.common.floor import Plugin, arouted, register, routed
from accel.types import EngineCall
from accel.adapters.llamaindex.floor.spans import keep_span

COMPONENT = "PGVectorStore"


def _plan(store: Any, query: Any, **kwargs: Any) -> EngineCall | str:
    from accel.adapters.llamaindex.bindings import Unbound, bind_store, hits_to_result
    from accel.engines.base import VectorQuery

    if kwargs:
        return f"query options {sorted(kwargs)}"
    if str(getattr(query.mode, "value", query.mode)) != "default":
        return f"query mode {query.mode}"
    if query.filters is not None or query.node_ids or query.doc_ids or query.query_embedding is None:
        return "filters, node or doc ids, or no query vector"
    k = query.similarity_top_k
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        return f"similarity_top_k={k!r}"
    binding = bind_store(store)
    if isinstance(binding, Unbound):
        return binding.reason
    store._initialize()  # stock's lazy set-up (both entry points call it first)
    vector = VectorQuery([float(v) for v in query.query_embedding], k, binding.collection, "cosine")
    return EngineCall(binding.engine, [vector], COMPONENT, shape=lambda results: hits_to_result(results[0]))


MODULE = "llama_index.vector_stores.postgres.base"
register(Plugin(
    "llamaindex:" + COMPONENT,
    MODULE,
    "PGVectorStore",
    {"query": keep_span(MODULE, routed(COMPONENT, _plan)), "aquery": keep_span(MODULE, arouted(COMPONENT, _plan))},
))
