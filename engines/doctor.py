"""Health of every engine of the local stack, each checked with one real request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from .base import Engine, Health
from .stack import StackInfo

ENGINE_NAMES = ("llm", "vectordb", "embed", "rerank", "search")
SERVER_ENCODER_NAMES = ("embed-server", "rerank-server")
"""Checked too when the stack records encoder servers (`accel up --encoders server`, or
ACCEL_EMBED_BASE_URL / ACCEL_RERANK_BASE_URL)."""


def make_engines(info: StackInfo | None, *, embed_model: str | None = None, rerank_model: str | None = None) -> dict[str, Callable[[], Engine]]:
    """Factories for the engines apps reach (from the engine catalogue): ACCEL_PG_DSN /
    ACCEL_OPENAI_BASE_URL where set (examples and benches use them before the state file),
    else what `accel up` recorded; a missing stack leaves the LLM and DB unconfigured."""
    from accel.config import settings

    from . import catalogue

    factories: dict[str, Callable[[], Engine]] = {
        "embed": catalogue.embedder(embed_model or (info.embed_model if info else None)).factory,
        "rerank": catalogue.reranker(rerank_model or (info.rerank_model if info else None)).factory,
        "search": catalogue.search().factory,
    }
    cfg = settings()
    dsn = cfg.pg_dsn or (info.pg_dsn if info else None)
    base_url = cfg.openai_base_url or (info.openai_base_url if info else None)
    model = (info.model if info else None) or cfg.llm_model
    if base_url and model:
        factories["llm"] = catalogue.openai_server(base_url, model).factory
    if dsn:
        factories["vectordb"] = catalogue.pgvector(dsn).factory
    factories.update(_server_encoders(info))
    return factories


def _server_encoders(info: StackInfo | None) -> dict[str, Callable[[], Engine]]:
    from . import catalogue

    found: dict[str, Callable[[], Engine]] = {}
    if info is not None and info.embed_base_url:
        found["embed-server"] = catalogue.embed_server(info.embed_base_url).factory
    if info is not None and info.rerank_base_url and info.rerank_model_name:
        found["rerank-server"] = catalogue.rerank_server(info.rerank_base_url, info.rerank_model_name).factory
    return found


async def _check(name: str, factory: Callable[[], Engine] | None, timeout_s: float) -> Health:
    if factory is None:
        return Health(name, False, "not running: start the local stack with `accel up`")
    start = time.perf_counter()
    engine: Engine | None = None
    try:
        engine = factory()
        await asyncio.wait_for(engine.start(), timeout_s)
        health = await asyncio.wait_for(engine.health(), timeout_s)
        return Health(name, health.ok, health.detail, time.perf_counter() - start)
    except Exception as exc:  # a doctor reports every failure instead of raising the first
        return Health(name, False, f"{type(exc).__name__}: {exc}", time.perf_counter() - start)
    finally:
        if engine is not None:
            try:
                await engine.stop()
            except Exception:
                pass


async def check_all(
    info: StackInfo | None,
    *,
    timeout_s: float = 120.0,
    on_result: Callable[[Health], Awaitable[None] | None] | None = None,
) -> list[Health]:
    """Check the engines one after another (they share two cores; parallel checks would only
    make each look slower) and return one Health per engine, in ENGINE_NAMES order, then the
    encoder servers the stack records."""
    factories = make_engines(info)
    results = []
    for name in ENGINE_NAMES + tuple(n for n in SERVER_ENCODER_NAMES if n in factories):
        health = await _check(name, factories.get(name), timeout_s)
        results.append(health)
        if on_result is not None:
            maybe = on_result(health)
            if maybe is not None:
                await maybe
    return results
