"""Recording of engine requests at boundaries shared by stock and accelerated runs, for
fidelity tests: sentence-transformers `encode` (texts embedded), `CrossEncoder.predict`
(pairs scored), and vector searches (stock langchain-postgres' own SQL query
and accel's `PgVectorEngine.run`), normalised to comparable tuples.

    with record_requests() as log:
        chain.invoke(x)
    log.embedded, log.scored, log.searched
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

_DIGITS = 5


@dataclass
class RequestLog:
    embedded: list[tuple[str, bool]] = field(default_factory=list)
    scored: list[tuple[str, str]] = field(default_factory=list)
    searched: list[tuple[str, int, Any, tuple[float, ...]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str, items: list[Any]) -> None:
        with self._lock:
            getattr(self, name).extend(items)


def _vector(values: Any) -> tuple[float, ...]:
    return tuple(round(float(v), _DIGITS) for v in values)


@contextlib.contextmanager
def record_requests() -> Iterator[RequestLog]:
    """Patch the shared boundaries for the duration of the block (restored afterwards)."""
    from sentence_transformers import CrossEncoder, SentenceTransformer

    from accel.engines.vectordb import PgVectorEngine

    log = RequestLog()
    patches: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, make: Any) -> None:
        original = owner.__dict__[name]
        patches.append((owner, name, original))
        setattr(owner, name, make(original))

    def encode(original: Any) -> Any:
        def wrapper(self: Any, sentences: Any, *args: Any, **kwargs: Any) -> Any:
            texts = [sentences] if isinstance(sentences, str) else list(sentences)
            log.add("embedded", [(t, bool(kwargs.get("normalize_embeddings", False))) for t in texts])
            return original(self, sentences, *args, **kwargs)

        return wrapper

    def predict(original: Any) -> Any:
        def wrapper(self: Any, sentences: Any, *args: Any, **kwargs: Any) -> Any:
            log.add("scored", [(q, p) for q, p in sentences])
            return original(self, sentences, *args, **kwargs)

        return wrapper

    def engine_run(original: Any) -> Any:
        async def wrapper(self: Any, batch: Any) -> Any:
            log.add("searched", [(_collection_name(q.collection), q.k, q.filter, _vector(q.vector)) for q in batch])
            return await original(self, batch)

        return wrapper

    patch(SentenceTransformer, "encode", encode)
    patch(CrossEncoder, "predict", predict)
    patch(PgVectorEngine, "run", engine_run)
    try:
        from langchain_postgres.vectorstores import PGVector
    except ImportError:
        PGVector = None
    if PGVector is not None:
        # the store's own SQL query (private, langchain-postgres 0.0.19): a search accel's
        # floor routes to PgVectorEngine never reaches it, so nothing is recorded twice
        def query(original: Any) -> Any:
            def wrapper(self: Any, embedding: Any, k: int = 4, filter: Any = None) -> Any:
                log.add("searched", [(self.collection_name, k, filter, _vector(embedding))])
                return original(self, embedding, k=k, filter=filter)

            return wrapper

        def aquery(original: Any) -> Any:
            async def wrapper(self: Any, session: Any, embedding: Any, k: int = 4, filter: Any = None) -> Any:
                log.add("searched", [(self.collection_name, k, filter, _vector(embedding))])
                return await original(self, session, embedding, k=k, filter=filter)

            return wrapper

        patch(PGVector, "_PGVector__query_collection", query)
        patch(PGVector, "_PGVector__aquery_collection", aquery)
    try:
        yield log
    finally:
        for owner, name, original in reversed(patches):
            setattr(owner, name, original)


def _collection_name(collection: Any) -> str:
    """A LangChain collection's own name (what PGVector's search sees), else its name."""
    scope = getattr(collection, "scope", None)
    return scope.value if scope is not None else str(collection)
