"""The twin LLM's clock: one scheduler task runs steps and waits each step's simulated time.

Requests hand their `Seq` to the scheduler and read their tokens from a queue. The task sleeps
only on timers for a step's modelled duration (the model's time, not coordination) and, when
nothing runs, on an event a new request sets. `sleep` is injectable, so tests run the same code
on a virtual clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from accel.engines.twin.profile import LLMConfig, LLMCost
from accel.engines.twin.scheduler import Scheduler, Seq, Step

log = logging.getLogger("accel.engines.twin.engine")

Sleep = Callable[[float], Awaitable[None]]


class TwinDied(Exception):
    """The twin was told to die: every stream in flight ends without its end."""


@dataclass(frozen=True)
class Token:
    id: int
    finished: str | None


class TwinEngine:
    """Owns the scheduler task; `close()` cancels it and ends every request."""

    def __init__(self, cost: LLMCost, config: LLMConfig, *, priority: bool = False, sleep: Sleep = asyncio.sleep) -> None:
        self.cost = cost
        self.scheduler = Scheduler(config, priority=priority)
        self.sleep = sleep
        self.simulated_s = 0.0
        self.slow_factor = 1.0
        self.die_after_tokens: int | None = None
        self.dead = False
        self.on_death: Callable[[], None] | None = None
        self._stall_s = 0.0
        self._queues: dict[Seq, asyncio.Queue[Token | TwinDied]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def submit(self, seq: Seq) -> asyncio.Queue[Token | TwinDied]:
        if self.dead:
            raise TwinDied("the twin is dead")
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="twin-llm-scheduler")
        queue: asyncio.Queue[Token | TwinDied] = asyncio.Queue()
        self._queues[seq] = queue
        self.scheduler.add(seq)
        self._wake.set()
        return queue

    def end(self, seq: Seq, reason: str) -> None:
        """The request is over (its stop string, or 'abort' when its client left)."""
        self.scheduler.end(seq, reason)
        self._queues.pop(seq, None)

    def stall(self, seconds: float) -> None:
        """The next step starts `seconds` of simulated time late."""
        self._stall_s += seconds
        self._wake.set()

    def step_s(self, step: Step) -> float:
        return self.slow_factor * self.cost.step_s(step.prefill_tokens, len(step.prefill), len(step.decode),
                                                   step.context_tokens)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def die(self) -> None:
        self.dead = True
        for seq, queue in list(self._queues.items()):
            self.scheduler.end(seq, "abort")
            queue.put_nowait(TwinDied("the twin died"))
        self._queues.clear()
        log.warning("twin died after %d generated tokens", self.scheduler.counters.generation_tokens)
        if self.on_death is not None:
            self.on_death()

    async def _run(self) -> None:
        while not self.dead:
            if self._stall_s:
                stall, self._stall_s = self._stall_s, 0.0
                await self._advance(stall)
            step = self.scheduler.plan()
            if step is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._advance(self.step_s(step))
            for seq, token in self.scheduler.finish(step):
                queue = self._queues.get(seq)
                if queue is not None:
                    queue.put_nowait(Token(token, seq.finished))
                    if seq.finished is not None:
                        self._queues.pop(seq)
            limit = self.die_after_tokens
            if limit is not None and self.scheduler.counters.generation_tokens >= limit:
                self.die()

    async def _advance(self, seconds: float) -> None:
        await self.sleep(seconds)
        self.simulated_s += seconds
