"""One scheduler per engine: queue node tasks, form batches by policy, run them, resolve futures.

A single dispatcher task per engine sleeps on an `asyncio.Event` that is set when work arrives or
an engine call finishes (no timer loop, no RPC per node). Batch engines get whole batches through
`engine.run(batch)`; LLM engines batch internally, so each request is its own call, admitted in
policy order up to `max_inflight`, with `GenerationRequest.priority` derived from depth.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing, contextmanager
from typing import Any

from accel.engines.base import Engine, GenerationChunk, GenerationRequest, LLMEngine
from accel.engines.errors import EngineDied, EngineError, EngineUnavailable, InvalidRequest
from accel.engines.llm.api_call import APICall
from accel.runtime.limits import EngineLimits
from accel.runtime.objectives import priority_offset
from accel.runtime.policies import get_policy, within_seconds
from accel.runtime.sharing import current_scope
from accel.runtime.task import EngineTask, Slice, TaskQueue


class _Call:
    """One running engine call and the tasks still waiting for it."""

    __slots__ = ("owners", "job")

    def __init__(self, owners: set[EngineTask]) -> None:
        self.owners = owners
        self.job: asyncio.Task[None] | None = None


class EngineScheduler:
    """Feeds one engine. `submit` returns a node's results in request order; `stream` streams
    one LLM request after admission. Both wait while the queue is full (backpressure)."""

    def __init__(
        self,
        name: str,
        engine: Engine,
        *,
        policy: str = "topology",
        limits: EngineLimits | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.name = name
        self.engine = engine
        self.policy_name = policy
        self._policy = get_policy(policy)
        self.limits = limits or EngineLimits()
        self._clock = clock
        self._llm = isinstance(engine, LLMEngine)
        self._queue = TaskQueue()
        self._queued = 0
        self._running = 0
        self._wake = asyncio.Event()
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._reserved = 0
        self._group: asyncio.TaskGroup | None = None
        self._serving: asyncio.Task[None] | None = None
        self._ids = itertools.count()
        self._feeding = 0
        self._overhead = self.limits.call_overhead_s

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the dispatcher (owned by this scheduler, ended by `stop`). Idempotent."""
        if self._serving is None:
            ready = asyncio.get_running_loop().create_future()
            self._serving = asyncio.create_task(self._serve(ready), name=f"accel-dispatch-{self.name}")
            await ready

    async def stop(self) -> None:
        """Cancel the dispatcher and every engine call it owns; fail what is still queued."""
        serving, self._serving = self._serving, None
        if serving is not None:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)

    async def __aenter__(self) -> EngineScheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def queued(self) -> int:
        """Requests waiting for a batch (bounded by `limits.queue_limit`)."""
        return self._queued

    @property
    def load(self) -> int:
        """Work on the engine now: LLM requests (batch calls, for other engines) in flight,
        plus requests waiting."""
        return self._running + self._queued

    @contextmanager
    def feeding(self) -> Iterator[None]:
        """While inside, an open stream will submit its items to this engine (a consumer mapped
        over a streamed decode): the next call may be held for them (`limits.call_overhead_s`)."""
        self._feeding += 1
        try:
            yield
        finally:
            self._feeding -= 1
            self._wake.set()

    # ---- submission -----------------------------------------------------------------------

    async def submit(self, task: EngineTask) -> list[Any]:
        """Queue one node's requests and return their results in order. Cancelling the caller
        withdraws the task and stops engine calls that no other task waits for. Inside a batch
        call's share scope, identical deterministic requests are computed once (`sharing`)."""
        if not task.requests:
            return []
        scope = current_scope()
        if scope is not None:
            return await scope.submit(self, task)
        return await self.submit_unshared(task)

    async def submit_unshared(self, task: EngineTask) -> list[Any]:
        """`submit` without the share scope: every request goes to the engine."""
        if not task.requests:
            return []
        await self._enqueue(task)
        try:
            return await task.future
        except asyncio.CancelledError:
            stopped = self._withdraw(task)
            if stopped:
                await asyncio.wait(stopped)
            raise

    async def stream(self, task: EngineTask) -> AsyncIterator[GenerationChunk]:
        """`stream_unshared`, or within a batch call's share scope, the one stream of identical
        deterministic requests (`sharing.ShareScope.stream`)."""
        scope = current_scope()
        source = scope.stream(self, task) if scope is not None else self.stream_unshared(task)
        async with aclosing(source) as chunks:
            async for chunk in chunks:
                yield chunk

    async def stream_unshared(self, task: EngineTask) -> AsyncIterator[GenerationChunk]:
        """Admit one LLM request in policy order, then stream it with `engine.stream`.
        Leaving early (cancel, error, break) aborts the request in the engine."""
        if not self._llm or len(task.requests) != 1:
            raise InvalidRequest(
                self.name, "streaming needs an LLM engine and exactly one request per node",
                "mark only single-request LLM nodes as streaming",
            )
        task.stream = True
        await self._enqueue(task)
        try:
            [request] = await task.future
        except asyncio.CancelledError:
            self._withdraw(task)
            if task.future.done() and not task.future.cancelled():
                self._release()  # admitted just before the caller was cancelled
            raise
        finished = False
        try:
            async with aclosing(self.engine.stream(request)) as chunks:
                async for chunk in chunks:
                    finished = chunk.finished
                    yield chunk
        finally:
            if not finished:
                await self._abort(request)
            self._release()

    def _release(self) -> None:
        self._running -= 1
        self._wake.set()

    async def _enqueue(self, task: EngineTask) -> None:
        if self._serving is None:
            raise EngineUnavailable(
                self.name, "the engine scheduler is not started", "start the Runtime (async with Runtime(...))"
            )
        n = len(task.requests)
        if self._waiters or not self._fits(n):
            await self._wait_for_space(n)
        if task.arrival is None:
            task.arrival = self._clock()
        task.results = [None] * n
        task.future = asyncio.get_running_loop().create_future()
        self._queue.add(task)
        self._queued += n
        self._wake.set()

    def _fits(self, n: int) -> bool:
        held = self._queued + self._reserved
        return held == 0 or held + n <= self.limits.queue_limit

    async def _wait_for_space(self, n: int) -> None:
        """Wait in line (FIFO) until `n` requests fit; the space is reserved when granted, so
        freeing space wakes only the callers it can take, never the whole crowd."""
        granted = asyncio.get_running_loop().create_future()
        self._waiters.append((n, granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._reserved -= n
                self._admit_waiters()
            raise
        self._reserved -= n

    def _admit_waiters(self) -> None:
        while self._waiters:
            n, granted = self._waiters[0]
            if granted.done():
                self._waiters.popleft()
            elif self._fits(n):
                self._waiters.popleft()
                self._reserved += n
                granted.set_result(None)
            else:
                return

    def _withdraw(self, task: EngineTask) -> list[asyncio.Task[None]]:
        """Forget a task whose caller is gone; cancel calls that served only it."""
        if task in self._queue:
            self._queue.remove(task)
            self._queued -= task.pending
            task.taken = len(task.requests)
            self._admit_waiters()
        stopped = []
        for call in list(task.inflight):
            call.owners.discard(task)
            if not call.owners and call.job not in (None, asyncio.current_task()) and not call.job.done():
                call.job.cancel()
                stopped.append(call.job)
        task.inflight.clear()
        return stopped

    # ---- dispatch -------------------------------------------------------------------------

    async def _serve(self, ready: asyncio.Future[None]) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                ready.set_result(None)
                while True:
                    hold = self._hold_s() if self._queue and self._free() > 0 else None
                    if hold is not None and hold <= 0:
                        self._dispatch(group)
                        continue
                    self._wake.clear()
                    try:
                        async with asyncio.timeout(hold):  # a held call goes when its hold is over
                            await self._wake.wait()
                    except TimeoutError:
                        pass
        finally:
            self._group = None
            stopped = EngineUnavailable(self.name, "the engine scheduler stopped", "keep the Runtime open until queries finish")
            for task in list(self._queue):
                self._fail(task, stopped)
            self._queue.clear()
            self._queued = 0
            self._admit_waiters()

    def _hold_s(self) -> float:
        """Seconds the next call may still wait for the items open streams are about to bring:
        until one call's cost (`call_overhead_s`, as calls cost now) after the newest item.
        An item that comes sooner would have waited behind the call had it gone at once, and
        merging it spares the engine a call; one that comes later would find the engine free
        again, so waiting for it costs the queued items and saves them nothing. The oldest
        request thus waits at most one call's cost for each call the merge spares, plus one.
        It goes at once with a full batch, or when no stream feeding the engine is open.
        0: go now."""
        overhead = self._overhead if self.limits.call_overhead_s else 0.0
        if self._llm or not self._feeding or not overhead or self._queued >= self.limits.max_batch_size:
            return 0.0
        newest = max((task.arrival for task in self._queue if task.arrival is not None), default=None)
        return 0.0 if newest is None else newest + overhead - self._clock()

    def _free(self) -> int:
        if self._llm:
            return self.limits.max_inflight - self._running
        return self.limits.max_concurrent_batches - self._running

    def _dispatch(self, group: asyncio.TaskGroup) -> None:
        limit = self._free() if self._llm else self.limits.max_batch_size
        slices = self._policy(self._queue, limit)
        if not self._llm and self.limits.sized_by_duration:
            slices = within_seconds(slices, self.limits.item_seconds, self.limits.max_call_s)
        gone = [s for s in slices if s.task.future.done()]  # callers cancelled, not yet withdrawn
        if gone:
            for s in gone:
                self._withdraw(s.task)
            return
        size = sum(s.size for s in slices)
        now = self._clock()
        for s in slices:
            task = s.task
            task.taken = s.stop
            if task.dispatched_at is None:
                task.dispatched_at = now
            task.batch_sizes.append(size)
            if not task.pending:
                self._queue.remove(task)
        self._queued -= size
        self._admit_waiters()
        if not self._llm:
            self._running += 1
            self._launch(group, {s.task for s in slices}, self._run_batch(slices))
            return
        for s in slices:
            for index in range(s.start, s.stop):
                request = self._prepare(s.task, index)
                self._running += 1
                if s.task.stream:
                    s.task.future.set_result([request])
                else:
                    self._launch(group, {s.task}, self._run_one(s.task, index, request))

    def _launch(self, group: asyncio.TaskGroup, owners: set[EngineTask], work: Any) -> None:
        call = _Call(owners)
        for task in owners:
            task.inflight.add(call)
        call.job = group.create_task(self._finish(call, work))

    async def _finish(self, call: _Call, work: Any) -> None:
        try:
            await work
        finally:
            for task in call.owners:
                task.inflight.discard(call)
            self._release()

    def _prepare(self, task: EngineTask, index: int) -> Any:
        """LLM request with an id (for abort) and a priority from depth (deeper runs first),
        the task's own priority (a program's, for captured engine calls) and its deduced
        objective (latency-critical first, `objectives`)."""
        request = task.requests[index]
        if not isinstance(request, (GenerationRequest, APICall)):
            return request
        priority = request.priority
        if self.limits.use_priority:
            priority += task.priority - task.depth + priority_offset(task.objective)
        request_id = request.request_id or f"{task.query_id}/{task.node}/{index}/{next(self._ids)}"
        return dataclasses.replace(request, priority=priority, request_id=request_id)

    # ---- engine calls ---------------------------------------------------------------------

    async def _run_batch(self, slices: list[Slice]) -> None:
        batch = [r for s in slices for r in s.task.requests[s.start : s.stop]]
        began = self._clock()
        try:
            results = await self._call(batch)
        except asyncio.CancelledError:
            self._fail_all(slices, EngineUnavailable(self.name, "the engine call was cancelled", "keep the Runtime open until queries finish"))
            raise
        except (EngineDied, EngineUnavailable) as exc:  # the engine failed, not a request: no re-run
            self._fail_all(slices, exc)
        except Exception as exc:
            if len({s.task for s in slices}) > 1:
                # One query's bad request must not fail the others batched with it, whatever the
                # backend raises for it (a tokenizer's TypeError for a lone surrogate, say): each
                # query's part runs alone, and only the bad one gets the error, as stock would.
                for s in slices:
                    await self._run_batch([s])
            else:
                self._fail_all(slices, exc)
        except BaseException as exc:
            self._fail_all(slices, exc)
        else:
            self._observe(batch, self._clock() - began)
            offset = 0
            for s in slices:
                self._deliver(s.task, s.start, results[offset : offset + s.size])
                offset += s.size

    def _observe(self, batch: list[Any], seconds: float) -> None:
        """What a call costs beyond its requests now (a loaded server answers slower than when
        it was profiled): the call's time less its requests' measured share, averaged over the
        last calls; never below the measured `call_overhead_s`. Calls of one request count
        whole where no per-request cost was measured."""
        if not self.limits.call_overhead_s:
            return
        if self.limits.item_seconds is not None:
            seconds -= sum(self.limits.item_seconds(request) for request in batch)
        elif len(batch) > 1:
            return
        self._overhead = max(self.limits.call_overhead_s, 0.75 * self._overhead + 0.25 * max(0.0, seconds))

    async def _run_one(self, task: EngineTask, index: int, request: Any) -> None:
        try:
            results = await self._call([request])
        except asyncio.CancelledError:
            await self._abort(request)
            self._fail(task, EngineUnavailable(self.name, "the request was cancelled", "keep the Runtime open until queries finish"))
            raise
        except BaseException as exc:
            self._fail(task, exc)
        else:
            self._deliver(task, index, results)

    async def _call(self, batch: list[Any]) -> list[Any]:
        results = await self.engine.run(batch)
        if len(results) != len(batch):
            raise EngineError(
                self.name, f"run() returned {len(results)} results for {len(batch)} requests",
                "fix the engine to return exactly one result per request, in order",
            )
        return results

    async def _abort(self, request: Any) -> None:
        request_id = getattr(request, "request_id", None)
        if self._llm and request_id is not None:
            await self.engine.abort(request_id)

    def _deliver(self, task: EngineTask, start: int, results: list[Any]) -> None:
        if task.future is None or task.future.done():
            return
        task.results[start : start + len(results)] = results
        task.done += len(results)
        if task.done == len(task.requests):
            task.future.set_result(task.results)

    def _fail(self, task: EngineTask, exc: BaseException) -> None:
        if task.future is not None and not task.future.done():
            task.future.set_exception(exc)
            self._withdraw(task)

    def _fail_all(self, slices: list[Slice], exc: BaseException) -> None:
        for s in slices:
            self._fail(s.task, exc)
