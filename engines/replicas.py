"""`ReplicatedEngine`: one engine's name and protocol over N replicas of it.

The engine scheduler above it batches as before and hands each batch (or LLM request) to this
engine, which picks a replica: the least loaded (requests this process has in flight on it),
and for LLM requests the prefix's home replica (rendezvous hashing of the prompt's first
characters, so a program's calls sharing a prefix meet that replica's prefix cache) unless it
is busier than the least loaded by more than `affinity_slack`.

A replica that fails with `EngineDied` / `EngineUnavailable` is taken out. Its request is
retried on another replica when that is safe: every batch request (embed, search, rerank,
and LLM `run`, whose tokens reach no caller before it ends) and an LLM stream that has not
yielded yet; otherwise the error is raised. A replica that is out gets one request again after
`retry_after_s` (doubling to `max_retry_after_s` while it keeps failing): the first that
succeeds brings it back. With every replica out, requests fail at once with
`EngineUnavailable` naming the engine and the remedy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

from .base import Engine, GenerationChunk, GenerationRequest, Health, LLMEngine
from .errors import EmptyBatch, EngineDied, EngineUnavailable

log = logging.getLogger("accel.engines.replicas")

Req = TypeVar("Req")
Res = TypeVar("Res")
FAILOVER: tuple[type[BaseException], ...] = (EngineDied, EngineUnavailable, httpx.TransportError)
"""httpx's own errors come from forwarded client requests (`APICall`), which keep them for fidelity."""
_PREFIX_CHARS = 512


@dataclass
class Replica:
    engine: Engine
    inflight: int = 0
    down_since: float | None = None
    retry_after_s: float = 0.0
    served: int = 0
    failures: int = 0
    last_error: str = ""
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return getattr(self.engine, "base_url", None) or self.engine.name


class ReplicaSet(Generic[Req, Res]):
    """Choice, accounting and failover over a list of replicas (shared by both engine kinds)."""

    def __init__(self, engines: Sequence[Engine], *, name: str, remedy: str, retry_after_s: float = 1.0,
                 max_retry_after_s: float = 30.0, affinity_slack: int = 4, clock: Callable[[], float] = time.monotonic) -> None:
        if not engines:
            raise EngineUnavailable(name, "no replicas given", remedy)
        self.replicas = [Replica(e) for e in engines]
        self.name = name
        self.remedy = remedy
        self._retry_after_s = retry_after_s
        self._max_retry_after_s = max_retry_after_s
        self._slack = affinity_slack
        self._clock = clock
        self.retried = 0  # requests re-sent to another replica after a failure

    def candidates(self, key: str | None = None) -> list[Replica]:
        """Replicas to try, in order: an out-of-service one whose retry time has come and that no
        request is probing yet (one request probes it; if that fails, the request moves on),
        then the healthy ones by load, the key's home first when it is not much busier."""
        now = self._clock()
        healthy = [r for r in self.replicas if r.down_since is None]
        due = [r for r in self.replicas
               if r.down_since is not None and r.inflight == 0 and now - r.down_since >= r.retry_after_s]
        healthy.sort(key=lambda r: r.inflight)
        if key is not None and healthy:
            home = max(healthy, key=lambda r: _score(key, r.name))
            if home.inflight <= healthy[0].inflight + self._slack:
                healthy.remove(home)
                healthy.insert(0, home)
        return due + healthy

    def unavailable(self) -> EngineUnavailable:
        errors = "; ".join(f"{r.name}: {r.last_error}" for r in self.replicas)
        return EngineUnavailable(self.name, f"all {len(self.replicas)} replicas are out of service ({errors})", self.remedy)

    def succeeded(self, replica: Replica) -> None:
        replica.served += 1
        if replica.down_since is not None:
            log.warning("%s: replica %s is back", self.name, replica.name)
            replica.down_since, replica.retry_after_s = None, 0.0

    def failed(self, replica: Replica, exc: BaseException) -> None:
        replica.failures += 1
        replica.last_error = f"{type(exc).__name__}: {exc}"[:300]
        if replica.down_since is None:
            log.warning("%s: replica %s taken out (%s)", self.name, replica.name, replica.last_error)
            replica.retry_after_s = self._retry_after_s
        else:
            replica.retry_after_s = min(replica.retry_after_s * 2, self._max_retry_after_s)
        replica.down_since = self._clock()

    async def call(self, work: Callable[[Engine], Any], key: str | None = None) -> Any:
        """`await work(engine)` on the best replica, failing over while replicas are left."""
        tried: set[int] = set()
        while True:
            replica = next((r for r in self.candidates(key) if id(r) not in tried), None)
            if replica is None:
                raise self.unavailable()
            tried.add(id(replica))
            if len(tried) > 1:
                self.retried += 1
            replica.inflight += 1
            try:
                result = await work(replica.engine)
            except FAILOVER as exc:
                self.failed(replica, exc)
                continue
            finally:
                replica.inflight -= 1
            self.succeeded(replica)
            return result


def _score(key: str, replica: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{replica}\0{key}".encode(errors="surrogatepass"), digest_size=8).digest(), "big")


def prefix_key(request: Any) -> str | None:
    if isinstance(request, GenerationRequest):
        if request.prompt is not None:
            return request.prompt[:_PREFIX_CHARS]
        if request.messages is not None:
            return "".join(str(m.get("content", "")) for m in request.messages)[:_PREFIX_CHARS]
        return ",".join(map(str, (request.prompt_token_ids or [])[:128]))
    return None


class ReplicatedEngine(Engine[Req, Res]):
    """Batch engines (embed, rerank, search, vectordb) over replicas; a batch goes whole to one."""

    def __init__(self, engines: Sequence[Engine], *, name: str | None = None, remedy: str = "restart the replicas",
                 **options: Any) -> None:
        self.kind = engines[0].kind  # type: ignore[misc]
        self.name = name or engines[0].name
        self.set: ReplicaSet = ReplicaSet(engines, name=self.name, remedy=remedy, **options)

    async def start(self) -> None:
        """Start every replica that can start; fail only if none can."""
        for replica in self.set.replicas:
            try:
                await replica.engine.start()
            except FAILOVER as exc:
                self.set.failed(replica, exc)
        if all(r.down_since is not None for r in self.set.replicas):
            raise self.set.unavailable()

    async def stop(self) -> None:
        for replica in self.set.replicas:
            await replica.engine.stop()

    async def run(self, batch: Sequence[Req]) -> list[Res]:
        if not batch:
            raise EmptyBatch(self.name, "run() got an empty batch", "send at least one request")
        return await self.set.call(lambda engine: engine.run(batch))

    async def health(self) -> Health:
        results = [await r.engine.health() for r in self.set.replicas]
        ok = [h for h in results if h.ok]
        return Health(self.name, bool(ok), f"{len(ok)}/{len(results)} replicas ok: " + "; ".join(h.detail for h in results))


class ReplicatedLLM(LLMEngine):
    """LLM replicas: requests by load and prefix affinity; a stream fails over only before its
    first chunk; `abort` goes to the replica running the request."""

    def __init__(self, engines: Sequence[LLMEngine], *, name: str | None = None,
                 remedy: str = "restart the vLLM servers (`accel up --replicas N`)", **options: Any) -> None:
        self.name = name or engines[0].name
        self.model = engines[0].model
        self.set: ReplicaSet = ReplicaSet(engines, name=self.name, remedy=remedy, **options)
        self._running: dict[str, LLMEngine] = {}

    @property
    def max_model_len(self) -> int:  # type: ignore[override]
        return min(r.engine.max_model_len for r in self.set.replicas)  # type: ignore[attr-defined]

    @property
    def block_size(self) -> int:  # type: ignore[override]
        return self.set.replicas[0].engine.block_size  # type: ignore[attr-defined]

    async def start(self) -> None:
        await ReplicatedEngine.start(self)  # type: ignore[arg-type]

    async def stop(self) -> None:
        await ReplicatedEngine.stop(self)  # type: ignore[arg-type]

    async def health(self) -> Health:
        return await ReplicatedEngine.health(self)  # type: ignore[arg-type]

    async def run(self, batch: Sequence[Any]) -> list[Any]:
        if not batch:
            raise EmptyBatch(self.name, "run() got an empty batch", "send at least one request")
        return [await self._one(r) for r in batch] if len(batch) == 1 else await _gather(self._one(r) for r in batch)

    async def _one(self, request: Any) -> Any:
        async def work(engine: LLMEngine) -> Any:
            rid = getattr(request, "request_id", None)
            if rid:
                self._running[rid] = engine
            try:
                return (await engine.run([self._for(engine, request)]))[0]
            finally:
                if rid:
                    self._running.pop(rid, None)

        return await self.set.call(work, prefix_key(request))

    async def stream(self, request: Any) -> AsyncIterator[GenerationChunk]:
        tried: set[int] = set()
        while True:
            replica = next((r for r in self.set.candidates(prefix_key(request)) if id(r) not in tried), None)
            if replica is None:
                raise self.set.unavailable()
            if tried:
                self.set.retried += 1
            tried.add(id(replica))
            rid = getattr(request, "request_id", None)
            yielded = False
            replica.inflight += 1
            if rid:
                self._running[rid] = replica.engine  # type: ignore[assignment]
            try:
                async for chunk in replica.engine.stream(self._for(replica.engine, request)):  # type: ignore[attr-defined]
                    yielded = True
                    yield chunk
            except FAILOVER as exc:
                self.set.failed(replica, exc)
                if yielded:
                    raise  # tokens reached the caller: a retry would repeat them
                continue
            finally:
                replica.inflight -= 1
                if rid:
                    self._running.pop(rid, None)
            self.set.succeeded(replica)
            return

    def _for(self, engine: LLMEngine, request: Any) -> Any:
        """A framework client's own HTTP request (`APICall`) names the server it was built for:
        send it to the chosen replica's URL instead; everything else goes as it is."""
        url = getattr(request, "url", None)
        target = getattr(engine, "base_url", None)
        if url is None or target is None:
            return request
        for replica in self.set.replicas:
            base = getattr(replica.engine, "base_url", "")
            if base and url.startswith(base):
                return dataclasses.replace(request, url=target + url[len(base):])
        return request

    async def abort(self, request_id: str) -> None:
        engine = self._running.get(request_id)
        if engine is not None:
            await engine.abort(request_id)

    async def tokenize(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return await self.set.call(lambda e: e.tokenize(text, add_special_tokens=add_special_tokens))

    async def render_chat(self, messages: list[dict[str, str]]) -> str:
        return await self.set.call(lambda e: e.render_chat(messages))

    def __getattr__(self, name: str) -> Any:  # engine-specific extras (forward, supports_priority)
        if name.startswith("_") or name == "set":
            raise AttributeError(name)
        return getattr(self.set.replicas[0].engine, name)


async def _gather(coros: Any) -> list[Any]:
    import asyncio

    return list(await asyncio.gather(*coros))
