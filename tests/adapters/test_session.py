"""The shared session: one loop thread, engines deduplicated, sync and async callers batch."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import accel
from accel.engines.embeddings import SentenceTransformerEmbedder
from accel.ir import GraphBuilder, ItemsOp, Kind
from accel.session import Session, get_session
from accel.types import EngineSpec, TemplateBuild


def _embed_template(session: Session, engine: str):
    def build():
        b = GraphBuilder()
        texts = b.input("texts")
        vectors = b.add(Kind.EMBED, "embed", engine=engine, inputs={"texts": texts}, op=ItemsOp("texts"))
        b.output(vectors)
        return b.build()

    return session.template(TemplateBuild(("embed-test", engine), build))


@pytest.fixture
def session():
    s = Session()
    yield s
    s.shutdown()


def test_engines_are_shared_by_kind_and_key(session: Session, minilm_path) -> None:
    made = []

    def factory():
        made.append(1)
        return SentenceTransformerEmbedder(minilm_path)

    first = session.engine(EngineSpec("embed", str(minilm_path), factory))
    second = session.engine(EngineSpec("embed", str(minilm_path), factory))
    other = session.engine(EngineSpec("embed", "other-key", factory))
    assert first == second != other
    assert len(made) == 2


def test_sync_threads_and_async_callers_share_one_loop_and_batch(session: Session, minilm_path) -> None:
    name = session.engine(EngineSpec("embed", str(minilm_path), lambda: SentenceTransformerEmbedder(minilm_path)))
    template = _embed_template(session, name)
    expected = session.run(template, {"texts": ["warm up"]})
    assert len(expected[0]) == 384

    texts = [f"sentence number {i}" for i in range(12)]
    with ThreadPoolExecutor(6) as pool:
        sync_results = list(pool.map(lambda t: session.run(template, {"texts": [t]}), texts[:6]))

    async def from_another_loop():
        assert threading.current_thread() is not session._thread
        return await asyncio.gather(*(session.arun(template, {"texts": [t]}) for t in texts[6:]))

    async_results = asyncio.run(from_another_loop())
    direct = asyncio.run(_direct(minilm_path, texts))
    got = [r[0] for r in sync_results + async_results]
    for vector, reference in zip(got, direct, strict=True):
        assert vector == pytest.approx(reference, abs=1e-5)


async def _direct(path, texts):
    async with SentenceTransformerEmbedder(path) as engine:
        return [(await engine.run([t]))[0] for t in texts]


def test_cancelling_a_submitted_query_does_not_break_the_session(session: Session, minilm_path) -> None:
    name = session.engine(EngineSpec("embed", str(minilm_path), lambda: SentenceTransformerEmbedder(minilm_path)))
    template = _embed_template(session, name)
    future = session.submit(template, {"texts": ["a"] * 64})
    future.cancel()
    assert session.run(template, {"texts": ["still works"]})[0]


def test_bad_input_fails_that_query_only(session: Session, minilm_path) -> None:
    name = session.engine(EngineSpec("embed", str(minilm_path), lambda: SentenceTransformerEmbedder(minilm_path)))
    template = _embed_template(session, name)
    bad = session.submit(template, {"texts": [42]})
    good = session.submit(template, {"texts": ["fine"]})
    with pytest.raises(Exception) as info:
        bad.result()
    assert "embed" in str(info.value)
    assert len(good.result()[0]) == 384


def test_blocking_on_the_session_loop_is_refused(session: Session, minilm_path) -> None:
    name = session.engine(EngineSpec("embed", str(minilm_path), lambda: SentenceTransformerEmbedder(minilm_path)))
    template = _embed_template(session, name)

    async def inside():
        with pytest.raises(RuntimeError, match="session loop"):
            session.run(template, {"texts": ["x"]})
        return await session.arun(template, {"texts": ["x"]})

    assert asyncio.run_coroutine_threadsafe(inside(), session.loop).result()


def test_shutdown_stops_the_thread_and_get_session_makes_a_new_one() -> None:
    s = get_session(policy="po")
    assert s is get_session(policy="po")
    loop_thread = (s.loop, s._thread)[1]
    accel.shutdown()
    assert not loop_thread.is_alive()
    assert get_session(policy="po") is not s
    accel.shutdown()


def test_unknown_policy_fails_at_once() -> None:
    with pytest.raises(Exception, match="nope"):
        Session(policy="nope")
