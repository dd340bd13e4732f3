"""Scale-out configuration: which engines run as replica sets. Zero by default.

- `ACCEL_RAY_ADDRESS` (`host:port`, or `auto`/`local`): the embedder and the reranker run as
  `ACCEL_REPLICAS` (default 2) Ray actors each, spread over the cluster's nodes.
- `ACCEL_OPENAI_REPLICA_URLS` (comma-separated), or the `replica_urls` that
  `accel up --replicas N` records: a chain bound to any of these vLLM servers is served by all
  of them (stock keeps talking to the one it was built for).

With neither, every factory returns the engine it made, unchanged, and Ray is never imported.
Postgres stays one server behind the engine's connection pool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from accel.config import settings

from .base import Engine

log = logging.getLogger("accel.engines.scaleout")
DEFAULT_REPLICAS = 2


def _state() -> object | None:
    from .errors import EngineError
    from .stack import read_state

    try:
        return read_state()
    except EngineError:
        return None


def ray_address() -> str | None:
    return settings().ray_address or getattr(_state(), "ray_address", None)


def replica_count() -> int:
    value = settings().replicas
    return DEFAULT_REPLICAS if value is None else max(1, value)


def llm_replica_urls(base_url: str) -> list[str]:
    """Every server serving the same model as `base_url` (itself first), or just it."""
    listed = settings().openai_replica_urls
    urls = [u.rstrip("/") for u in listed] if listed else list(getattr(_state(), "replica_urls", None) or [])
    base = base_url.rstrip("/")
    if base not in urls:
        return [base]
    return [base] + [u for u in urls if u != base]


def scaled_llm(base_url: str, make: Callable[[str], Engine]) -> Engine:
    urls = llm_replica_urls(base_url)
    if len(urls) == 1:
        return make(base_url)
    from .replicas import ReplicatedLLM

    log.info("LLM at %s served by %d replicas", base_url, len(urls))
    return ReplicatedLLM([make(url) for url in urls])  # type: ignore[list-item]


def scaled(kind: str, make: Callable[[], Engine], *, num_cpus: float = 1.0) -> Engine:
    """`make()` itself, or replicas of it as Ray actors when a Ray address is configured (the
    set keeps the local engine's name: measured profiles are looked up by it)."""
    local = make()  # engines load weights in start(), so this is cheap
    address = ray_address()
    if address is None or kind not in ("embed", "rerank"):
        return local
    name = local.name
    from .ray_actor import RayActorEngine, connect
    from .replicas import ReplicatedEngine

    connect(None if address == "local" else address)
    count = replica_count()
    log.info("%s %s: %d Ray actor replicas", kind, name, count)
    replicas = [RayActorEngine(make, kind=kind, name=f"{name}#{i}", num_cpus=num_cpus,
                               options={"scheduling_strategy": "SPREAD"}) for i in range(count)]
    return ReplicatedEngine(replicas, name=name, remedy="check the Ray cluster (`ray status`) and the actors' logs")
