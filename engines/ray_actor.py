"""`RayActorEngine`: an engine hosted in a Ray actor, driven through the same protocol.

Why actors, not Ray Serve: the engine scheduler already batches across queries and picks the
replica by load (`replicas.py`); Serve would add a second router, an HTTP proxy and its own
batching in front of the same model. An async actor holding one engine is the smallest unit
Ray restarts on failure (`max_restarts`), places on any node, and reports dead
(`RayActorError`), which becomes `EngineDied` here so the replica set fails over.

Only imported when scale-out is configured (`scaleout.py`): the single-process path never
imports Ray.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from .base import Engine, Health
from .errors import EmptyBatch, EngineDied, EngineError, EngineUnavailable

log = logging.getLogger("accel.engines.ray_actor")


@ray.remote(max_restarts=-1, max_concurrency=64)
class _EngineActor:
    """Holds one engine; starts it lazily so that a restarted actor serves again."""

    def __init__(self, make: Callable[[], Engine]) -> None:
        self.engine = make()

    async def start(self) -> None:
        await self.engine.start()

    async def run(self, batch: list[Any]) -> list[Any]:
        await self.engine.start()
        return await self.engine.run(batch)

    async def health(self) -> Health:
        return await self.engine.health()

    async def node(self) -> str:
        return ray.get_runtime_context().get_node_id()

    async def stop(self) -> None:
        await self.engine.stop()


class RayActorEngine(Engine):
    """One replica: `make()` builds the engine inside an actor (on the node Ray picks)."""

    def __init__(self, make: Callable[[], Engine], *, kind: str, name: str, num_cpus: float = 1.0,
                 options: dict[str, Any] | None = None) -> None:
        self.kind = kind  # type: ignore[misc]
        self.name = name
        self._make = make
        self._num_cpus = num_cpus
        self._options = options or {}
        self._actor: Any = None

    async def start(self) -> None:
        if self._actor is None:
            self._actor = _EngineActor.options(num_cpus=self._num_cpus, **self._options).remote(self._make)
        await self._call("start")

    async def stop(self) -> None:
        actor, self._actor = self._actor, None
        if actor is not None:
            try:
                await actor.stop.remote()
            except RayError:
                pass
            ray.kill(actor, no_restart=True)

    async def run(self, batch: Sequence[Any]) -> list[Any]:
        if not batch:
            raise EmptyBatch(self.name, "run() got an empty batch", "send at least one request")
        if self._actor is None:
            await self.start()
        return await self._call("run", list(batch))

    async def health(self) -> Health:
        try:
            return await self._call("health")
        except EngineError as exc:
            return Health(self.name, False, str(exc))

    async def node(self) -> str:
        return await self._call("node")

    @property
    def actor(self) -> Any:
        return self._actor

    async def _call(self, method: str, *args: Any) -> Any:
        try:
            return await getattr(self._actor, method).remote(*args)
        except RayActorError as exc:  # the actor process died (or is restarting)
            raise EngineDied(self.name, f"its Ray actor died ({type(exc).__name__})",
                             "Ray restarts it; check the node's memory and the actor's log") from exc
        except GetTimeoutError as exc:
            raise EngineUnavailable(self.name, "its Ray actor did not answer", "check the Ray cluster") from exc
        except ray.exceptions.RayTaskError as exc:  # the engine's own error, raised inside the actor
            raise (exc.cause if exc.cause is not None else exc) from None


def connect(address: str | None) -> None:
    """Join the Ray cluster at `address` once per process (`auto` or `host:port`)."""
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, logging_level=logging.WARNING, log_to_driver=False)
