"""PgVectorEngine against a real pgserver PostgreSQL: own tables, metrics, HNSW, errors."""

from __future__ import annotations

import time

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector_async
from psycopg import sql

from accel.adapters.langchain.tables import pgvector_collection
from accel.adapters.llamaindex.tables import pgvector_table
from accel.engines.base import VectorQuery
from accel.engines.errors import DimensionMismatch, EmptyBatch, InvalidRequest
from accel.engines.vectordb import PgVectorEngine, Row
from accel.engines.vectordb.layouts import resolve
from accel.engines.vectordb.query import batched_search

DIM = 16
N_ROWS = 300


def _corpus(seed: int = 0, n: int = N_ROWS) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)


def _rows(vectors: np.ndarray) -> list[Row]:
    return [Row(f"r{i}", f"text {i}", vectors[i], {"i": i, "parity": "even" if i % 2 == 0 else "odd"}) for i in range(len(vectors))]


def _brute_force(store: np.ndarray, query: np.ndarray, metric: str, k: int) -> tuple[list[int], np.ndarray]:
    s, q = store.astype(np.float64), query.astype(np.float64)
    if metric == "cosine":
        d = 1.0 - (s @ q) / (np.linalg.norm(s, axis=1) * np.linalg.norm(q))
    elif metric == "l2":
        d = np.linalg.norm(s - q, axis=1)
    else:
        d = -(s @ q)
    order = np.argsort(d, kind="stable")[:k]
    return [int(i) for i in order], d[order]


async def _filled(engine: PgVectorEngine, name: str, *, hnsw: bool = False, metric: str = "cosine") -> np.ndarray:
    vectors = _corpus()
    await engine.create_collection(name, DIM, metric=metric, hnsw=hnsw)
    assert await engine.ingest(name, _rows(vectors)) == N_ROWS
    return vectors


async def test_own_collection_round_trip(engine: PgVectorEngine, collection_name: str) -> None:
    vectors = await _filled(engine, collection_name)
    [hits] = await engine.run([VectorQuery(vectors[42], 3, collection_name)])
    assert hits[0].id == "r42"
    assert hits[0].text == "text 42"
    assert hits[0].metadata == {"i": 42, "parity": "even"}
    assert hits[0].score == pytest.approx(0.0, abs=1e-6)
    assert await engine.dimension(collection_name) == DIM


@pytest.mark.parametrize("metric", ["cosine", "l2", "ip"])
async def test_batched_equals_one_by_one_equals_numpy(engine: PgVectorEngine, collection_name: str, metric: str) -> None:
    vectors = await _filled(engine, collection_name)
    queries = _corpus(seed=7, n=12)
    k = 5
    batched = await engine.run([VectorQuery(q, k, collection_name, metric) for q in queries])
    one_by_one = [(await engine.run([VectorQuery(q, k, collection_name, metric)]))[0] for q in queries]
    assert batched == one_by_one
    for query, hits in zip(queries, batched):
        expected_ids, expected_distances = _brute_force(vectors, query, metric, k)
        assert [h.id for h in hits] == [f"r{i}" for i in expected_ids]
        np.testing.assert_allclose([h.score for h in hits], expected_distances, rtol=1e-4, atol=1e-4)


async def test_mixed_batch_keeps_request_order(engine: PgVectorEngine, collection_name: str) -> None:
    vectors = await _filled(engine, collection_name)
    batch = [
        VectorQuery(vectors[1], 2, collection_name, "l2"),
        VectorQuery(vectors[2], 4, collection_name, "cosine"),
        VectorQuery(vectors[3], 2, collection_name, "l2"),
        VectorQuery(vectors[4], 3, collection_name, "cosine", filter={"parity": "odd"}),
    ]
    results = await engine.run(batch)
    assert [len(r) for r in results] == [2, 4, 2, 3]
    assert [r[0].id for r in results[:3]] == ["r1", "r2", "r3"]
    assert results[3][0].id != "r4" and all(h.metadata["parity"] == "odd" for h in results[3])
    for query, hits in zip(batch, results):
        assert hits == (await engine.run([query]))[0]


async def test_filters_follow_langchain_operators(engine: PgVectorEngine, collection_name: str) -> None:
    vectors = await _filled(engine, collection_name)
    probe = vectors[0]
    cases = {
        "lt": ({"i": {"$lt": 10}}, lambda i: i < 10),
        "in": ({"i": {"$in": [3, 5, 250]}}, lambda i: i in (3, 5, 250)),
        "and": ({"$and": [{"parity": "odd"}, {"i": {"$gte": 100}}]}, lambda i: i % 2 == 1 and i >= 100),
        "or": ({"$or": [{"i": 7}, {"i": 8}]}, lambda i: i in (7, 8)),
        "not": ({"$not": {"parity": "even"}}, lambda i: i % 2 == 1),
    }
    results = await engine.run([VectorQuery(probe, 4, collection_name, filter=f) for f, _ in cases.values()])
    for (name, (_, keep)), hits in zip(cases.items(), results):
        allowed = np.array([i for i in range(N_ROWS) if keep(i)])
        expected, _ = _brute_force(vectors[allowed], probe, "cosine", 4)
        assert [h.id for h in hits] == [f"r{allowed[i]}" for i in expected], name


async def test_hnsw_index_is_used_and_finds_neighbours(pg_dsn: str, collection_name: str) -> None:
    async with PgVectorEngine(pg_dsn, ef_search=400) as engine:
        vectors = await _filled(engine, collection_name, hnsw=True, metric="l2")
        queries = _corpus(seed=3, n=6)
        results = await engine.run([VectorQuery(q, 5, collection_name, "l2") for q in queries])
        for query, hits in zip(queries, results):  # ef_search >= rows: the graph search is exhaustive
            expected, _ = _brute_force(vectors, query, "l2", 5)
            assert [h.id for h in hits] == [f"r{i}" for i in expected]
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        await register_vector_async(conn)
        target = await resolve(conn, collection_name)
        statement = sql.SQL("EXPLAIN ") + batched_search(target, "l2", 5, None)
        plan = await (await conn.execute(statement, (list(queries),))).fetchall()
    assert any("Index Scan using" in line and "hnsw" in line for (line,) in plan), plan


async def test_ingest_is_atomic(engine: PgVectorEngine, collection_name: str) -> None:
    await engine.create_collection(collection_name, DIM)
    vectors = _corpus(n=5)
    await engine.ingest(collection_name, [Row("existing", "x", vectors[0])])
    clashing = [Row("a", "a", vectors[1]), Row("existing", "dup", vectors[2]), Row("c", "c", vectors[3])]
    with pytest.raises(InvalidRequest, match="duplicate id"):
        await engine.ingest(collection_name, clashing)
    not_a_number = [Row("d", "d", vectors[1]), Row("e", "e", [float("nan")] * DIM), Row("f", "f", vectors[3])]
    with pytest.raises(InvalidRequest, match="NaN"):
        await engine.ingest(collection_name, not_a_number)
    [hits] = await engine.run([VectorQuery(vectors[1], 10, collection_name)])
    assert [h.id for h in hits] == ["existing"]


async def test_dimension_mismatch(engine: PgVectorEngine, collection_name: str) -> None:
    await engine.create_collection(collection_name, DIM)
    with pytest.raises(DimensionMismatch, match=f"{DIM}-dimensional"):
        await engine.ingest(collection_name, [Row("a", "a", [0.1] * DIM), Row("b", "b", [0.1] * (DIM + 1))])
    with pytest.raises(DimensionMismatch):
        await engine.run([VectorQuery([0.1] * (DIM - 1), 3, collection_name)])
    with pytest.raises(DimensionMismatch):
        await engine.create_collection(collection_name, DIM * 2)


async def test_bad_requests_are_typed(engine: PgVectorEngine, collection_name: str) -> None:
    with pytest.raises(EmptyBatch):
        await engine.run([])
    with pytest.raises(InvalidRequest, match="unknown collection"):
        await engine.run([VectorQuery([0.1] * DIM, 3, "no_such_collection")])
    with pytest.raises(InvalidRequest, match="unknown collection"):
        await engine.run([VectorQuery([0.1] * DIM, 3, pgvector_collection("no_such_collection"))])
    with pytest.raises(InvalidRequest, match="unknown collection"):
        await engine.run([VectorQuery([0.1] * DIM, 3, pgvector_table("no_such_table"))])
    await engine.create_collection(collection_name, DIM)
    with pytest.raises(InvalidRequest, match="metric"):
        await engine.run([VectorQuery([0.1] * DIM, 3, collection_name, "manhattan")])  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="k="):
        await engine.run([VectorQuery([0.1] * DIM, 0, collection_name)])
    with pytest.raises(InvalidRequest, match="filter"):
        await engine.run([VectorQuery([0.1] * DIM, 3, collection_name, filter={"$xor": []})])
    with pytest.raises(InvalidRequest, match="framework"):
        await engine.ingest(pgvector_collection("whatever"), [Row("a", "a", [0.1] * DIM)])
    with pytest.raises(InvalidRequest, match="plain identifier"):
        await engine.run([VectorQuery([0.1] * DIM, 3, "langchain:no_such_collection")])  # names an own table only


async def test_round_trip_timing(engine: PgVectorEngine, collection_name: str) -> None:
    """Reports (does not assert) one batched call of N queries against N single calls."""
    await _filled(engine, collection_name)
    queries = [VectorQuery(q, 5, collection_name) for q in _corpus(seed=11, n=64)]
    await engine.run(queries[:1])  # warm the connection and the collection cache
    for n in (8, 64):
        began = time.perf_counter()
        batched = await engine.run(queries[:n])
        one_call = time.perf_counter() - began
        began = time.perf_counter()
        singles = [(await engine.run([q]))[0] for q in queries[:n]]
        n_calls = time.perf_counter() - began
        assert batched == singles
        print(f"\npgvector N={n}: one batched call {one_call * 1e3:.1f} ms, {n} calls {n_calls * 1e3:.1f} ms "
              f"({n_calls / one_call:.1f}x)")
