"""`PgVectorEngine`: nearest-neighbour search in PostgreSQL + pgvector, many queries per round trip.

Requests are grouped by (collection, metric, k, filter); each group is one statement (see
`query.py`) on one pooled connection, groups run concurrently. `SearchHit.score` is the raw
pgvector distance, smaller is nearer: cosine distance for "cosine", Euclidean distance for
"l2", negative inner product for "ip" -- the number the frameworks' own stores return.
`SearchHit.id` is the row's id (the `id_column` of a framework table's `TableLayout`, the id
of an own collection's row) and `metadata` is the row's metadata unchanged, so an adapter
rebuilds exactly the framework's objects.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from accel.engines.base import Engine, Health, SearchHit, VectorQuery
from accel.engines.errors import EmptyBatch, EngineError, EngineUnavailable, InvalidRequest

from . import tables
from .connections import ConnectionLost, Connections, T, Work
from .failures import ENGINE, UNAVAILABLE_REMEDY, redact_dsn, translate, unavailable
from .filters import filter_key
from .layouts import Collection, Target, check, name_of, own_table, resolve
from .query import batched_search, operator
from .server import resolve_dsn
from .tables import Row, as_vector

GroupKey = tuple[str, str, int, str]


class PgVectorEngine(Engine[VectorQuery, list[SearchHit]]):
    """Vector search over accel's own tables and LangChain / LlamaIndex pgvector tables.

    `dsn=None` resolves at `start()`: `ACCEL_PG_DSN`, else the running embedded server.
    `ef_search` sets `hnsw.ef_search` on every pooled connection (HNSW recall/speed trade-off).
    """

    kind = "vectordb"

    def __init__(
        self,
        dsn: str | None = None,
        *,
        name: str = "pgvector",
        pool_size: int = 4,
        connect_timeout_s: int = 3,
        checkout_timeout_s: float = 10.0,
        ef_search: int | None = None,
    ) -> None:
        self.name = name
        self._dsn = dsn
        self._pool_size = pool_size
        self._connect_timeout_s = max(2, int(connect_timeout_s))  # libpq's minimum is 2 s
        self._checkout_timeout_s = checkout_timeout_s
        self._ef_search = ef_search
        self._conns = Connections(self._open_pool, name=name)
        self._targets: dict[Collection, Target] = {}

    @property
    def dsn(self) -> str:
        """The DSN in use (resolved at `start()`); may hold a password, use `redact_dsn` to show it."""
        if self._dsn is None:
            raise EngineUnavailable(ENGINE, "the engine is not started", "await engine.start() first")
        return self._dsn

    # ---- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Resolve the DSN, check the server and open the pool. Idempotent; after a lost
        server the next request reopens (see `connections.py`)."""
        await self._conns.pool()

    async def stop(self) -> None:
        await self._conns.close()
        self._targets.clear()

    async def _open_pool(self) -> AsyncConnectionPool:
        if self._dsn is None:
            self._dsn = resolve_dsn()
        await self._check_server()
        self._targets.clear()  # tables may have changed while we were away
        pool = AsyncConnectionPool(
            self._dsn,
            min_size=1,
            max_size=self._pool_size,
            kwargs={"autocommit": True, "connect_timeout": self._connect_timeout_s},
            configure=self._configure,
            timeout=self._checkout_timeout_s,
            name=f"accel-{self.name}",
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=self._connect_timeout_s + 2)
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, Exception):
                raise unavailable(self._dsn, exc) from exc
            raise
        return pool

    async def _check_server(self) -> None:
        """One direct connection first: its libpq error names the real cause (no socket, auth
        failed, timeout), where a pool would only report that it timed out."""
        dsn = self.dsn
        try:
            async with asyncio.timeout(self._connect_timeout_s + 2):
                conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=self._connect_timeout_s)
        except (psycopg.Error, OSError, TimeoutError) as exc:
            raise unavailable(dsn, exc) from exc
        async with conn:
            if await (await conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).fetchone():
                return
            try:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as exc:
                raise EngineUnavailable(
                    ENGINE,
                    f"the pgvector extension is missing at {redact_dsn(dsn)} and cannot be created ({exc})",
                    f"install pgvector on that server or {UNAVAILABLE_REMEDY}",
                ) from exc

    async def _configure(self, conn: psycopg.AsyncConnection) -> None:
        await register_vector_async(conn)
        if self._ef_search is not None:
            await conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(str(int(self._ef_search)))))

    async def _use(self, work: Work[T], *, collection: str, read: bool = True) -> T:
        """`work(conn)` on a pooled connection, its failures typed. Reads are retried once on a
        fresh pool after a lost connection (a restarted server answers at once)."""
        try:
            return await self._conns.run(work, retry=read)
        except ConnectionLost as lost:
            self._targets.clear()
            raise unavailable(self.dsn, lost.__cause__ or lost) from lost
        except Exception as exc:
            raise translate(exc, dsn=self._dsn or "?", collection=collection) from exc

    async def health(self) -> Health:
        began = time.perf_counter()
        try:
            await self._use(lambda conn: conn.execute("SELECT 1"), collection="-")
        except (EngineError, psycopg.Error) as exc:
            return Health(self.name, False, str(translate(exc, dsn=self._dsn or "?", collection="-")))
        return Health(self.name, True, f"PostgreSQL at {redact_dsn(self.dsn)}", time.perf_counter() - began)

    # ---- search -----------------------------------------------------------------------------

    async def run(self, batch: Sequence[VectorQuery]) -> list[list[SearchHit]]:
        """Hits per query, in request order; one statement per (collection, metric, k, filter)."""
        if not batch:
            raise EmptyBatch(ENGINE, "run() got an empty batch", "send at least one VectorQuery")
        groups: dict[GroupKey, list[int]] = {}
        for position, query in enumerate(batch):
            if not isinstance(query.k, int) or query.k < 1:
                raise InvalidRequest(ENGINE, f"query {position}: k={query.k!r}", "ask for k >= 1 neighbours")
            operator(query.metric)
            key = (query.collection, query.metric, query.k, filter_key(query.filter))
            groups.setdefault(key, []).append(position)
        await self.start()
        results: list[list[SearchHit]] = [[] for _ in batch]
        try:
            async with asyncio.TaskGroup() as group:
                for positions in groups.values():
                    group.create_task(self._search_group([batch[p] for p in positions], positions, results))
        except BaseExceptionGroup as failures:
            raise failures.exceptions[0] from None
        return results

    async def _search_group(self, queries: list[VectorQuery], positions: list[int], results: list[list[SearchHit]]) -> None:
        first = queries[0]
        target = await self._target(first.collection)
        vectors = [as_vector(query.vector, target.dim, target.collection) for query in queries]
        statement = batched_search(target, first.metric, first.k, first.filter)

        async def search(conn: psycopg.AsyncConnection) -> list[tuple]:
            return await (await conn.execute(statement, (vectors,))).fetchall()

        try:
            rows = await self._use(search, collection=target.collection)
        except EngineError:
            self._targets.pop(first.collection, None)  # the table may have changed under us
            raise
        for ordinal, hit_id, text, metadata, distance in rows:
            results[positions[ordinal - 1]].append(SearchHit(hit_id, text, float(distance), dict(metadata or {})))

    async def _target(self, collection: Collection) -> Target:
        """The resolved collection, cached while its dimension is known."""
        cached = self._targets.get(collection)
        if cached is not None:
            return cached
        check(collection)
        target = await self._use(lambda conn: resolve(conn, collection), collection=name_of(collection))
        if target.dim is not None:
            self._targets[collection] = target
        return target

    async def dimension(self, collection: Collection) -> int | None:
        """The collection's vector dimension (None for an empty, unconstrained one)."""
        return (await self._target(collection)).dim

    # ---- own collections --------------------------------------------------------------------

    async def create_collection(
        self, name: str, dim: int, metric: str = "cosine", hnsw: bool = False, *, hnsw_m: int = 16, hnsw_ef_construction: int = 64
    ) -> None:
        """Create an own collection (idempotent for the same dimension), with an optional HNSW
        index for `metric`; searches with another metric still work, by exact scan."""
        self._targets.pop(name, None)
        await self._use(lambda conn: tables.create(conn, name, dim, metric, hnsw, m=hnsw_m, ef_construction=hnsw_ef_construction),
                        collection=name, read=False)

    async def drop_collection(self, name: str) -> None:
        self._targets.pop(name, None)
        await self._use(lambda conn: tables.drop(conn, name), collection=name, read=False)

    async def ingest(self, collection: Collection, rows: Sequence[Row]) -> int:
        """Store rows in an own collection, all or none; returns how many were stored."""
        if not isinstance(collection, str):
            raise InvalidRequest(ENGINE, f"{name_of(collection)!r} is a framework table", "add documents through the framework's own store")
        own_table(collection)
        if not rows:
            raise EmptyBatch(ENGINE, f"ingest into {collection!r} got no rows", "send at least one Row")
        target = await self._target(collection)
        return await self._use(lambda conn: tables.insert(conn, target, rows), collection=collection, read=False)


__all__ = ["PgVectorEngine", "Row"]
