"""The graph scheduler: runs one query's e-graph, event driven.

Each query keeps a pending-predecessor count per node; finishing a node decrements its
successors' counts and starts those that reach zero. Cheap local nodes are computed on the spot;
the others get a task in the query's TaskGroup, engine nodes await their engine scheduler. There
is no polling and no sleeping: everything waits on futures. A failing node raises its original
exception out of `run`, and the TaskGroup cancels the query's other work (engine schedulers
turn that into aborts); other queries never see it. With `on_item`, the plan's text source
(the Decode whose text is the query's output) is streamed and each text delta handed over, or
an output dict's parts (`Plan.parts_at`), each as soon as its node finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from contextlib import aclosing
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from accel.engines.errors import EngineDied
from accel.ir.expand import ExpandEachOp, Expansion, max_concurrency
from accel.ir.getters import ITEM_OFFSET
from accel.ir.kinds import Kind
from accel.ir.node import Node
from accel.ir.template import GraphInstance
from accel.runtime.engine_scheduler import EngineScheduler
from accel.runtime.output_points import OutputPoints
from accel.runtime.plan import Mode, Plan
from accel.runtime.programs.spare import SpareGate
from accel.runtime.store import ObjectStore
from accel.runtime.streams import ItemStream
from accel.runtime.task import EngineTask
from accel.runtime.watch import QueryWatcher
from accel.tracer.spans import primitive_span, record_engine_call, record_generations, record_items
from accel.types import StreamItem

log = logging.getLogger("accel.runtime.graph_scheduler")
lost_speculations: Counter[str] = Counter()
"""Speculative engine work the engine failed, per node name (the queries went on without it)."""


class QueryRun:
    """The state of one query: pending counts, values, streams, and the task group that owns
    every piece of work started for it."""

    def __init__(
        self,
        plan: Plan,
        instance: GraphInstance,
        schedulers: Mapping[str, EngineScheduler],
        executor: Executor,
        tracer: trace.Tracer | None,
        parent: otel_context.Context | None,
        priority: int = 0,
        on_item: Callable[[StreamItem], None] | None = None,
        plan_of: Callable[[Any], Plan] | None = None,
        depth_offset: int = 0,
        watcher: QueryWatcher | None = None,
        warm_gate: Callable[[str], SpareGate] | None = None,
        compute: Executor | None = None,
    ) -> None:
        self.plan = plan
        self.compute = compute or executor
        """Where ops marked `cpu_bound` run (`CallOp`); `executor` for the rest."""
        self.warm_gate = warm_gate
        self.plan_of = plan_of
        self.depth_offset = depth_offset
        self.template = plan.template
        self.instance = instance
        self.query_id = instance.query_id
        self.schedulers = schedulers
        self.executor = executor
        self.tracer = tracer
        self.parent = parent
        self.priority = priority
        self.watcher = watcher
        self.output = OutputPoints(plan, on_item) if on_item is not None else None
        self.taps = self.output.taps if self.output is not None else {}
        self.pending = list(plan.pending)
        self.store = ObjectStore(plan.readers, keep=plan.output)
        self.streams = {i: ItemStream() for i, flag in enumerate(plan.produces_stream) if flag}
        self._group: asyncio.TaskGroup | None = None

    async def run(self) -> Any:
        """Run the graph to its Output node and return its value."""
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                self._start(self.plan.roots)
        except BaseExceptionGroup as group_error:
            raise _original(group_error) from None
        finally:
            self._group = None
        return self.store.get(self.plan.output)

    # ---- dependency tracking --------------------------------------------------------------

    def _start(self, ready: tuple[int, ...] | list[int]) -> None:
        stack = list(reversed(ready))
        plan = self.plan
        while stack:
            i = stack.pop()
            mode = plan.modes[i]
            if plan.mapped_src[i] >= 0:
                self._group.create_task(self._mapped(i), name=self.template.order[i])
            elif mode is Mode.INPUT:
                self._finish(i, self.instance.inputs[self.template.order[i]], stack)
            elif mode is Mode.INLINE:
                self._finish(i, self._inline(i), stack)
            else:
                self._group.create_task(self._node(i), name=self.template.order[i])

    def _finish(self, i: int, value: Any, stack: list[int] | None = None) -> None:
        """Store a finished node's value and start the successors it was the last wait of."""
        self.store.put(i, value)
        if self.output is not None and i in self.output.parts_at:
            self.output.finished(i, value)
        if self.watcher is not None:  # a stream's slices joined, as its whole readers see it
            sliced = self.plan.produces_stream[i] or self.plan.mapped_src[i] >= 0
            whole = list(itertools.chain.from_iterable(value)) if sliced else value
            self.watcher.finished(self.template, self.template.order[i], whole)
        mapped_src = self.plan.mapped_src
        ready = stack if stack is not None else []
        for s in self.template.succs[i]:
            if mapped_src[s] == i:
                continue  # a mapped consumer follows the stream, not its end
            self.pending[s] -= 1
            if self.pending[s] == 0:
                ready.append(s)
        if stack is None and ready:
            self._start(ready)

    def _resolve(self, i: int, skip_port: str | None = None) -> dict[str, Any]:
        """Input values of node i; each distinct producer is released once."""
        values: dict[str, Any] = {}
        released: set[int] = set()
        for port, src, key in self.template.port_refs[i]:
            if port == skip_port:
                released.add(src)
                continue
            value = self.store.get(src)
            values[port] = value if key is None else value[key]
            released.add(src)
        for src in released:
            self.store.release(src)
        return values

    # ---- node execution -------------------------------------------------------------------

    def _inline(self, i: int) -> Any:
        node = self.template.nodes[i]
        values = self._resolve(i)
        if node.op is None:
            return _passthrough(node, values)
        with primitive_span(self.tracer, self.parent, query_id=self.query_id, node=node.name, kind=node.kind, engine=None):
            return node.op.compute(values)

    async def _node(self, i: int) -> None:
        node = self.template.nodes[i]
        mode = self.plan.modes[i]
        with primitive_span(self.tracer, self.parent, query_id=self.query_id, node=node.name, kind=node.kind, engine=node.engine) as span:
            values = self._resolve(i)
            if i in self.taps or (mode is Mode.ENGINE and self._watched_tokens(i, node)):
                value = await self._tapped(i, node, values, span)
            elif mode is Mode.EXPAND:
                value = await self._expand(i, node, values)
            elif mode is Mode.STREAM:
                value = await self._stream(i, node, values, span)
            elif mode is Mode.MICRO:
                value = await self._micro(i, node, values, span)
            else:
                value = await self._compute(i, node, values, span)
        self._finish(i, value)

    async def _compute(self, i: int, node: Node, values: dict[str, Any], span: trace.Span) -> Any:
        """One execution of a non-streaming node: a local op, or engine requests + output."""
        mode = self.plan.modes[i]
        op = node.op
        if mode is Mode.INLINE:
            return _passthrough(node, values) if op is None else op.compute(values)
        if mode is Mode.ASYNC:
            return await op.compute(values)
        if mode is Mode.THREAD:
            # In the query's context (its caller's contextvars: tracing spans, framework
            # instrumentation), as the stock app's own code would run.
            loop = asyncio.get_running_loop()
            call = functools.partial(contextvars.copy_context().run, op.compute, values)
            pool = self.compute if getattr(op, "cpu_bound", False) else self.executor
            return await loop.run_in_executor(pool, call)
        if node.kind is Kind.PARTIAL_PREFILL and self.warm_gate is not None and node.engine is not None:
            return await self._warm_up(i, node, values, span, self.warm_gate(node.engine))
        return await self._answer(i, node, values, span)

    async def _answer(self, i: int, node: Node, values: dict[str, Any], span: trace.Span) -> Any:
        """An engine node's requests sent and its value made from the results. A speculative op
        (work ahead of need, e.g. `RerankAheadOp`) that the engine fails is logged and counted,
        and settles without results: whoever needed them asks again, where stock asks."""
        op = node.op
        requests = await op.requests(values)
        if not getattr(op, "speculative", False):
            return op.output(values, await self._submit(i, node, requests, span))
        try:
            results = await self._submit(i, node, requests, span)
        except Exception as err:  # noqa: BLE001 - speculative work never fails its query
            lost_speculations[node.name] += 1
            log.warning("%s: speculative %s failed, the query goes on without it: %s: %s",
                        self.query_id, node.name, type(err).__name__, err)
            span.set_attribute("accel.speculative.failed", f"{type(err).__name__}: {err}")
            results = None
        return op.settle(values, requests, results)

    async def _warm_up(self, i: int, node: Node, values: dict[str, Any], span: trace.Span, gate: SpareGate) -> Any:
        """A prefix-cache warm-up, sent only while its LLM engine has spare capacity: with the
        batch full, its prefill takes step time from the requests running and saves the real
        request less than it costs (the LlamaIndex batch on the `h100-8b` twins: 28 against 20 ms
        of loop CPU a query with pass 3's warm-ups sent regardless). Refused, it warms nothing
        (0 tokens) and the prefill it precedes goes as it would have without it. Nor is a
        prefix sent whose prefill would save less than a request costs (`SpareGate.least`)."""
        if not gate.try_enter():
            log.debug("%s: warm-up %s not sent, engine %s has no spare capacity", self.query_id, node.name, node.engine)
            span.set_attribute("accel.warmup.skipped", "no spare capacity")
            return node.op.output(values, [])
        try:
            requests = await gate.requests(node.op, values)
        finally:
            gate.leave()  # from here its requests count in the engine's load themselves
        if not requests:
            log.debug("%s: warm-up %s not sent, its prefix is under %d tokens", self.query_id, node.name, gate.least())
            span.set_attribute("accel.warmup.skipped", f"prefix under {gate.least()} tokens")
        return node.op.output(values, await self._submit(i, node, requests, span))

    def _depth(self, i: int) -> int:
        """Node i's depth for topology-aware batching (below its Expand node in a sub-run)."""
        return self.template.depth[i] + self.depth_offset

    async def _expand(self, i: int, node: Node, values: dict[str, Any]) -> Any:
        """Run the sub-template the Expand op picks, as part of this query: same id, engines,
        trace, priority and cancellation (its tasks live inside this node's task)."""
        if self.plan_of is None:
            raise RuntimeError(f"{node.name}: an Expand node needs a runtime that plans sub-templates")
        if isinstance(node.op, ExpandEachOp):
            return await self._expand_each(i, await node.op.expand_each(values), max_concurrency(node.op, values))
        template, inputs = await node.op.expand(values)
        return await self._sub_run(i, Expansion(template, inputs))

    async def _sub_run(self, i: int, expansion: Expansion) -> Any:
        template = expansion.template
        sub = QueryRun(self.plan_of(template), template.instantiate(expansion.inputs, self.query_id), self.schedulers, self.executor,
                       self.tracer, self.parent, self.priority, None, self.plan_of, self._depth(i), expansion.watcher or self.watcher,
                       self.warm_gate, self.compute)
        try:
            value = await sub.run()
        except BaseException as err:
            if expansion.on_end is not None:
                expansion.on_end(err)
            raise
        if expansion.on_end is not None:
            expansion.on_end(None)
        return value

    async def _expand_each(self, i: int, expansions: list[Expansion], limit: int | None = None) -> list[Any]:
        """The sub-runs side by side (at most `limit` at once, in item order, where given); if
        any fails, the others are cancelled and the failure of the lowest item raises (as a
        stock `batch` reports the first failing input)."""
        gate = asyncio.Semaphore(limit) if limit is not None and limit < len(expansions) else contextlib.nullcontext()

        async def sub_run(expansion: Expansion) -> Any:
            async with gate:
                return await self._sub_run(i, expansion)

        tasks: list[asyncio.Task[Any]] = []
        try:
            async with asyncio.TaskGroup() as group:
                tasks += [group.create_task(sub_run(e), name=f"{self.template.order[i]}[{k}]") for k, e in enumerate(expansions)]
        except BaseExceptionGroup as group_error:
            failed = [t.exception() for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
            raise (failed[0] if failed else _original(group_error)) from None
        return [task.result() for task in tasks]

    async def _submit(self, i: int, node: Node, requests: list[Any], span: trace.Span) -> list[Any]:
        if not requests:
            return []
        task = EngineTask(self.query_id, node.name, self._depth(i), list(requests), priority=self.priority,
                          objective=node.schedule.objective)
        results = await self.schedulers[node.engine].submit(task)
        wait = None if task.dispatched_at is None else task.dispatched_at - task.arrival
        record_engine_call(span, batch_sizes=task.batch_sizes, queue_wait_s=wait, requests=len(requests))
        record_generations(span, results)
        if self.watcher is not None:
            self.watcher.generated(self.template, node.name, results)
        return results

    async def _stream(self, i: int, node: Node, values: dict[str, Any], span: trace.Span) -> list[Any]:
        """PartialDecode: stream the LLM request, forward each parsed item as it completes."""
        out = self.streams[i]
        requests = list(await node.op.requests(values))
        task = EngineTask(self.query_id, node.name, self._depth(i), requests, priority=self.priority,
                          objective=node.schedule.objective)
        final: list[Any] = []

        watched = self._watched_tokens(i, node)

        async def chunks():
            async with aclosing(self.schedulers[node.engine].stream(task)) as source:
                async for chunk in source:
                    if chunk.generation is not None:
                        final.append(chunk.generation)
                    if watched and chunk.delta:
                        self.watcher.delta(self.template, node.name, chunk.delta)
                    yield chunk

        async with aclosing(node.op.stream(values, chunks())) as items:
            async for item in items:
                out.emit(item)
        out.close()
        wait = None if task.dispatched_at is None else task.dispatched_at - task.arrival
        record_engine_call(span, batch_sizes=task.batch_sizes, queue_wait_s=wait, requests=1)
        record_generations(span, final)
        record_items(span, len(out.items))
        if self.watcher is not None:
            self.watcher.generated(self.template, node.name, final)
        return list(out.items)

    def _watched_tokens(self, i: int, node: Node) -> bool:
        """Whether the watcher wants Decode i's text as it is written (a framework's model
        run that reports its tokens): the Decode then streams."""
        return (self.watcher is not None and node.kind in (Kind.DECODE, Kind.PARTIAL_DECODE) and self.plan.mapped_src[i] < 0
                and self.watcher.wants_deltas(self.template, node.name))

    async def _tapped(self, i: int, node: Node, values: dict[str, Any], span: trace.Span) -> Any:
        """A decode streamed: its one request (same admission as `submit`); every text delta
        goes to `on_item` where its text is the query's output or a part of it (`taps`), and
        to the watcher."""
        requests = list(await node.op.requests(values))
        task = EngineTask(self.query_id, node.name, self._depth(i), requests, priority=self.priority,
                          objective=node.schedule.objective)
        final = None
        async with aclosing(self.schedulers[node.engine].stream(task)) as chunks:
            async for chunk in chunks:
                if chunk.delta:
                    if i in self.taps:
                        self.output.delta(i, chunk.delta, last=chunk.finish_reason is not None)
                    if self.watcher is not None:
                        self.watcher.delta(self.template, node.name, chunk.delta)
                final = chunk.generation or final
        if final is None:
            raise EngineDied(node.engine, f"the stream of {node.name!r} ended without a final output", "check the engine's log")
        wait = None if task.dispatched_at is None else task.dispatched_at - task.arrival
        record_engine_call(span, batch_sizes=task.batch_sizes, queue_wait_s=wait, requests=1)
        record_generations(span, [final])
        if self.watcher is not None:
            self.watcher.generated(self.template, node.name, [final])
        return node.op.output(values, [final])

    async def _micro(self, i: int, node: Node, values: dict[str, Any], span: trace.Span) -> list[Any]:
        """Stage decomposition: run the batch port in slices of the schedule's `micro_batch`; each
        slice's output is emitted as an item, in slice order, as soon as it and its elders are done."""
        out = self.streams[i]
        port, size = node.batch_port, node.schedule.micro_batch
        items = list(values[port])
        slices = [items[k : k + size] for k in range(0, len(items), size)]
        done: dict[int, Any] = {}

        async def one(k: int) -> None:
            done[k] = await self._answer(i, node, {**values, port: slices[k]}, span)
            while len(out.items) in done:
                out.emit(done[len(out.items)])

        async with asyncio.TaskGroup() as group:
            for k in range(len(slices)):
                group.create_task(one(k))
        out.close()
        record_items(span, len(out.items))
        return list(out.items)

    async def _mapped(self, i: int) -> None:
        """A consumer mapped over a stream: one execution per item as items arrive; its value is
        the list of per-item outputs in item order (forwarded as a stream when it streams)."""
        node = self.template.nodes[i]
        port = node.map_port
        key = next(k for p, _, k in self.template.port_refs[i] if p == port)
        values = self._resolve(i, skip_port=port)
        source = self.streams[self.plan.mapped_src[i]]
        out = self.streams.get(i)
        done: dict[int, Any] = {}

        async def one(k: int, item: Any, at: dict[str, int]) -> None:
            with primitive_span(self.tracer, self.parent, query_id=self.query_id, node=f"{node.name}[{k}]", kind=node.kind, engine=node.engine) as span:
                done[k] = await self._compute(i, node, {**values, port: item if key is None else item[key], **at}, span)
            while out is not None and len(out.items) in done:
                out.emit(done[len(out.items)])

        count = offset = 0
        positional = getattr(node.op, "positional", False)
        scheduler = self.schedulers.get(node.engine) if node.engine else None
        async with asyncio.TaskGroup() as group:
            with scheduler.feeding() if scheduler is not None else contextlib.nullcontext():
                async for item in source:
                    group.create_task(one(count, item, {ITEM_OFFSET: offset} if positional else {}))
                    count += 1
                    offset += len(item) if positional else 0
        if out is not None:
            out.close()
        self._finish(i, [done[k] for k in range(count)])


def _passthrough(node: Node, values: dict[str, Any]) -> Any:
    """A node without an op forwards its single input (Output's "value" port by default)."""
    if "value" in values:
        return values["value"]
    if len(values) == 1:
        return next(iter(values.values()))
    return values


def _original(group_error: BaseExceptionGroup) -> BaseException:
    """The first real error inside (nested) task-group errors: the node's own exception."""
    for exc in group_error.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _original(exc)
        if not isinstance(exc, asyncio.CancelledError):
            return exc
    return group_error.exceptions[0]

