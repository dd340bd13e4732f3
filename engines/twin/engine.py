"""The twin LLM's clock: one scheduler task runs steps and waits each step's simulated time.

Requests hand their `Seq` to the scheduler and read their tokens from a queue. The task sleeps
only on timers until a step's modelled end (the model's time, not coordination) and, when
nothing runs, on an event a new request sets. Back-to-back steps are timed from the previous
step's end, not from when the twin's own Python work finished (vLLM overlaps scheduling with
the GPU), so the twin does not drift behind its model while that work is shorter than a step.
`sleep` and `clock` are injectable, so tests run the same code on a virtual clock. A twin of an
engine on the host's own cores (a `burner`) burns each step's time there instead of sleeping,
and spins like vLLM-CPU's worker when idle (engines/twin/burn.py).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from accel.engines.twin.burn import Burner
from accel.engines.twin.profile import LLMConfig, LLMCost
from accel.engines.twin.scheduler import Scheduler, Seq, Step

log = logging.getLogger("accel.engines.twin.engine")

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]


class TwinDied(Exception):
    """The twin was told to die: every stream in flight ends without its end."""


STEPS_KEPT = 65536
"""Steps the engine's log holds (`GET /admin/steps`), the oldest dropped first."""


@dataclass(frozen=True)
class StepRecord:
    """One step as the model ran it: what it held and where its modelled time went."""

    at: float
    """When the step began, on the engine's clock (this host's `time.monotonic` when served)."""
    seconds: float
    prefill_tokens: int
    prefill_seqs: int
    decode_seqs: int
    context_tokens: int
    work_s: float
    """The step's time without the weights' read floor: its tokens', sequences' and KV's work.
    Under the floor (`work_s < floor_s`) the step paid for reading the weights, not for its tokens."""
    stall_s: float
    """What the step's prefill added to its decoding sequences' wait: the step's time less a
    step of its decodes alone (0 where it had no prefill or no decode)."""


@dataclass(frozen=True)
class Token:
    id: int
    finished: str | None


class TwinEngine:
    """Owns the scheduler task; `close()` cancels it and ends every request."""

    def __init__(self, cost: LLMCost, config: LLMConfig, *, priority: bool = False, sleep: Sleep = asyncio.sleep,
                 clock: Clock | None = None, burner: Burner | None = None, idle_spin_s: float = 0.0) -> None:
        self.cost = cost
        self.burner = burner
        """Set for an engine on the host's cores: a step burns its time there instead of sleeping."""
        self.idle_spin_s = idle_spin_s
        self.scheduler = Scheduler(config, priority=priority)
        self.sleep = sleep
        self.clock = clock or time.monotonic  # the clock asyncio's timers use
        self.lag_s = 0.0
        """Wall time the twin fell behind its model (its own work longer than a step): a number
        measured on a twin is only as good as this is small."""
        self.simulated_s = 0.0
        """Modelled time the engine spent running steps: its busy time, idle time excluded."""
        self.steps = 0
        self.step_log: collections.deque[StepRecord] = collections.deque(maxlen=STEPS_KEPT)
        self._unfloored = dataclasses.replace(cost, floor_s=0.0, one_token_floor_s=None)
        self.absorbed_s = 0.0
        """Of `simulated_s`, the twin's own work between burned steps, counted inside them."""
        self.slow_factor = 1.0
        self.die_after_tokens: int | None = None
        self.dead = False
        self.on_death: Callable[[], None] | None = None
        self._stall_s = 0.0
        self._ends_at: float | None = None  # the last step's modelled end while steps run back to back
        self._burned_at: float | None = None  # when the last burned step ended, while steps run back to back
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
                                                   step.context_tokens, step.prefill_pairs)

    def record(self, step: Step, at: float, seconds: float) -> StepRecord:
        """`step`, begun at `at` and modelled at `seconds`, as the log keeps it."""
        prefill_tokens, prefill_seqs, decodes = step.prefill_tokens, len(step.prefill), len(step.decode)
        work = self.slow_factor * self._unfloored.step_s(prefill_tokens, prefill_seqs, decodes, step.context_tokens,
                                                         step.prefill_pairs)
        stall = 0.0
        if prefill_seqs and decodes:
            stall = max(seconds - self.slow_factor * self.cost.step_s(0, 0, decodes, step.context_tokens), 0.0)
        return StepRecord(at, seconds, prefill_tokens, prefill_seqs, decodes, step.context_tokens, work, stall)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self.burner is not None:
            await self.burner.close()

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
                self._ends_at = self._burned_at = None
                if self.burner is not None:
                    self.burner.idle(self.idle_spin_s)
                self._wake.clear()
                await self._wake.wait()
                continue
            seconds, began = self.step_s(step), self.clock()
            await self._take(seconds)
            if self._ends_at is not None:  # back to back: the step began at the previous one's modelled end
                began = self._ends_at - seconds
            self.steps += 1
            self.step_log.append(self.record(step, began, seconds))
            for seq, token in self.scheduler.finish(step):
                queue = self._queues.get(seq)
                if queue is not None:
                    queue.put_nowait(Token(token, seq.finished))
                    if seq.finished is not None:
                        self._queues.pop(seq)
            limit = self.die_after_tokens
            if limit is not None and self.scheduler.counters.generation_tokens >= limit:
                self.die()

    async def _take(self, seconds: float) -> None:
        """A step's time: burned on the host's cores (stretching as they are shared), or slept.

        A measured step holds all of the real engine's work between two steps (scheduling,
        sampling, sending tokens), so the twin's own work since the last burn (planning the
        step, sending its tokens) is counted inside the step: only the rest is burned."""
        if self.burner is None:
            await self._advance(seconds)
            return
        self._ends_at = None
        own = 0.0 if self._burned_at is None else self.clock() - self._burned_at
        self.lag_s += max(own - seconds, 0.0)
        self.absorbed_s += min(own, seconds)
        await self.burner.work(seconds - own)
        self._burned_at = self.clock()
        self.simulated_s += seconds

    async def _advance(self, seconds: float) -> None:
        now = self.clock()
        if self._ends_at is not None and self._ends_at < now - seconds:  # more than a step behind: give up
            self.lag_s += now - self._ends_at
            self._ends_at = None
        self._ends_at = (now if self._ends_at is None else self._ends_at) + seconds
        await self.sleep(max(self._ends_at - now, 0.0))
        self.simulated_s += seconds
