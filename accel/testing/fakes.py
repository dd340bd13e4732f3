"""Fake engines with known latency, for scheduler benchmarks and unit tests only.

They implement the real engine protocol so the schedulers cannot tell them apart from vLLM or
MiniLM, but they compute nothing: results are produced by a plain function of the request and
the cost is a configured latency (none at all when it is zero, so a benchmark measures the
runtime's own overhead). Never use them to claim anything about model quality or speed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from accel.engines.base import Engine, Generation, GenerationChunk, GenerationRequest, Health, LLMEngine

Latency = float | Callable[[int], float]


def _seconds(latency: Latency, n: int) -> float:
    return latency(n) if callable(latency) else latency


class FakeEngine(Engine[Any, Any]):
    """A batch engine whose `run(batch)` takes `latency(len(batch))` seconds and returns
    `compute(request)` for each request (the request itself by default). With `record`, the
    batches it ran are kept in `batches`; `running` counts calls in flight."""

    kind = "embed"

    def __init__(
        self,
        name: str = "fake",
        *,
        latency: Latency = 0.0,
        compute: Callable[[Any], Any] | None = None,
        record: bool = True,
    ) -> None:
        self.name = name
        self.latency = latency
        self.compute = compute
        self.record = record
        self.batches: list[list[Any]] = []
        self.running = 0
        self.cancelled = 0

    async def run(self, batch: Sequence[Any]) -> list[Any]:
        if self.record:
            self.batches.append(list(batch))
        seconds = _seconds(self.latency, len(batch))
        self.running += 1
        try:
            if seconds > 0:
                await asyncio.sleep(seconds)  # the modelled compute time, not coordination
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        return [r if self.compute is None else self.compute(r) for r in batch]

    async def health(self) -> Health:
        return Health(self.name, True, "fake engine")


class FakeLLMEngine(LLMEngine):
    """An LLM engine that answers `reply(request)` after `latency` seconds (`run`) or streams
    the reply word by word, `token_latency` seconds apart (`stream`). It records requests,
    aborted request ids and the ids in flight, so tests can see cancellation arrive."""

    model = "fake-llm"
    max_model_len = 4096

    def __init__(
        self,
        name: str = "fake-llm",
        *,
        latency: float = 0.0,
        token_latency: float = 0.0,
        reply: Callable[[GenerationRequest], str] | None = None,
        record: bool = True,
    ) -> None:
        self.name = name
        self.latency = latency
        self.token_latency = token_latency
        self.reply = reply or (lambda request: f"reply to {request.prompt or request.messages or 'tokens'}")
        self.record = record
        self.requests: list[GenerationRequest] = []
        self.aborted: list[str] = []
        self.active: set[str] = set()
        self.stopped: list[str] = []
        self._tasks: dict[str, asyncio.Task[Any]] = {}

    def _generation(self, request: GenerationRequest, text: str) -> Generation:
        prompt = request.prompt or str(request.messages or request.prompt_token_ids)
        return Generation(
            text=text,
            prompt_tokens=len(prompt.split()),
            completion_tokens=len(text.split()),
            finish_reason="stop",
            request_id=request.request_id,
        )

    def _enter(self, request: GenerationRequest) -> str:
        request_id = request.request_id or f"fake-{len(self.requests)}"
        if self.record:
            self.requests.append(request)
        self.active.add(request_id)
        current = asyncio.current_task()
        if current is not None:
            self._tasks[request_id] = current
        return request_id

    def _leave(self, request_id: str, finished: bool) -> None:
        self.active.discard(request_id)
        self._tasks.pop(request_id, None)
        if not finished:
            self.stopped.append(request_id)

    async def run(self, batch: Sequence[GenerationRequest]) -> list[Generation]:
        return [await self._one(request) for request in batch]

    async def _one(self, request: GenerationRequest) -> Generation:
        request_id = self._enter(request)
        finished = False
        try:
            if self.latency > 0:
                await asyncio.sleep(self.latency)
            finished = True
            return self._generation(request, self.reply(request))
        finally:
            self._leave(request_id, finished)

    async def stream(self, request: GenerationRequest) -> AsyncIterator[GenerationChunk]:
        request_id = self._enter(request)
        finished = False
        try:
            text = self.reply(request)
            words = text.split(" ")
            for i, word in enumerate(words):
                if self.token_latency > 0:
                    await asyncio.sleep(self.token_latency)
                yield GenerationChunk(delta=word if i == 0 else " " + word)
            finished = True
            yield GenerationChunk(delta="", finished=True, generation=self._generation(request, text))
        finally:
            self._leave(request_id, finished)

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)
        task = self._tasks.get(request_id)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def tokenize(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return list(text.encode())

    async def health(self) -> Health:
        return Health(self.name, True, "fake LLM engine")
