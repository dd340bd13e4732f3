"""`Runtime`: the engine schedulers, a worker pool and the graph scheduler behind one call.

    async with Runtime({"llm": llm, "embed": embedder}, policy="topology") as rt:
        answer = await rt.run(template, {"question": "..."})
        async for item in rt.stream(template, {"question": "..."}):  # Delta..., then Final
            ...

The runtime does not own the engines' lifecycles (the stack or the caller starts and stops
them); it owns the schedulers feeding them and every task it starts for a query.
"""

from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from opentelemetry import trace

from accel.engines.base import Engine
from accel.engines.errors import EngineUnavailable
from accel.profiles import DEFAULT_LLM_SPARE, DEFAULT_WARM_MIN_TOKENS
from accel.ir.template import Template
from accel.runtime.engine_scheduler import EngineScheduler
from accel.runtime.graph_scheduler import QueryRun
from accel.runtime.limits import EngineLimits
from accel.runtime.output_stream import StreamItem, stream_query
from accel.runtime.plan import Plan, build_plan
from accel.runtime.policies import PolicyName, get_policy
from accel.runtime.programs import Priorities, Programs
from accel.runtime.watch import QueryWatcher
from accel.tracer.spans import get_tracer, query_span
from accel.worker_threads import WorkerPool

LOCAL_WORKERS = 256
"""Threads for blocking local ops (opaque user code, sync-only components). That code mostly
waits on engines (a refine loop's LLM calls), so the pool must not hold fewer queries in
flight than the caller submits: Python's default (cpu_count + 4, 6 threads on 2 cores) capped a
batch of 16 at 6 refine loops while stock `batch` ran 16 threads. Threads start only on demand,
without the session loop waiting for them to begin (`accel.worker_threads`)."""

COMPUTE_WORKERS = max(1, os.cpu_count() or 1)
"""Threads for local ops that only compute (`CallOp(cpu_bound=True)`), as many as cores. Run
beside every query's waiting code they shared the GIL and the cores with 32 others: a batch of
32 LlamaIndex queries (the docs' starter query engine, compact synthesis) spent 3.35 s of CPU in
its synthesizers' token repacking against stock's 0.85 s for the same 202 splits of the same
text on its event loop; LlamaIndex's splitter alone on 32 threads took 2.4x the CPU of one
thread, and longer (scripts/docs_apps_twin.py, docs/benchmarks-twin.md)."""


class Runtime:
    """Runs templates on shared engine schedulers; many concurrent `run` calls batch together."""

    def __init__(
        self,
        engines: Mapping[str, Engine],
        *,
        policy: PolicyName = "topology",
        profiles: Mapping[str, EngineLimits | Any] | None = None,
        max_workers: int = LOCAL_WORKERS,
        tracer_provider: trace.TracerProvider | None = None,
        priorities: Priorities | None = None,
        llm_spare: Callable[[], int] = lambda: DEFAULT_LLM_SPARE,
        warm_min_tokens: Callable[[], int] = lambda: DEFAULT_WARM_MIN_TOKENS,
    ) -> None:
        get_policy(policy)  # fail on a typo now, not at the first query
        profiles = profiles or {}
        self.policy = policy
        self.engines = dict(engines)
        self.schedulers = {
            name: EngineScheduler(name, engine, policy=policy, limits=EngineLimits.from_profile(profiles.get(name, EngineLimits())))
            for name, engine in self.engines.items()
        }
        self._max_workers = max_workers
        self._executor: WorkerPool | None = None
        self._compute: WorkerPool | None = None
        self._tracer_provider = tracer_provider
        self._plans: weakref.WeakKeyDictionary[Template, Plan] = weakref.WeakKeyDictionary()
        self._ids = itertools.count()
        self.programs = Programs(self.schedulers, self.engines, priorities=priorities or Priorities(), llm_spare=llm_spare,
                                 warm_min_tokens=warm_min_tokens)
        """The engine calls of wrapped runs that run their own code (`accel.runtime.programs`)."""

    async def start(self) -> None:
        """Start the engine schedulers and the worker pools for blocking and compute-only local code."""
        if self._executor is None:
            self._executor = WorkerPool(self._max_workers, thread_name_prefix="accel-local")
            self._compute = WorkerPool(min(COMPUTE_WORKERS, self._max_workers), thread_name_prefix="accel-compute")
        for scheduler in self.schedulers.values():
            await scheduler.start()

    async def add_engine(self, name: str, engine: Engine, limits: EngineLimits | None = None) -> EngineScheduler:
        """Serve `engine` under `name` from now on (a started scheduler; idempotent per name).
        Engines join a running runtime this way as the apps that need them are wrapped."""
        scheduler = self.schedulers.get(name)
        if scheduler is None:
            scheduler = EngineScheduler(name, engine, policy=self.policy, limits=limits or EngineLimits())
            await scheduler.start()
            self.engines[name] = engine
            self.schedulers[name] = scheduler
        return scheduler

    async def stop(self) -> None:
        """Stop the schedulers (failing what is still queued) and release the worker pools."""
        for scheduler in self.schedulers.values():
            await scheduler.stop()
        pools, self._executor, self._compute = (self._executor, self._compute), None, None
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def plan(self, template: Template) -> Plan:
        """The run plan of `template`, built on first use and cached with the template."""
        plan = self._plans.get(template)
        if plan is None:
            plan = build_plan(template)
            missing = sorted(plan.engines - self.schedulers.keys())
            if missing:
                raise EngineUnavailable(
                    missing[0], f"the template needs engine(s) {missing} but the runtime has {sorted(self.schedulers)}",
                    "pass every engine the template names in Runtime(engines={...})",
                )
            self._plans[template] = plan
        return plan

    async def run(self, template: Template, inputs: Mapping[str, Any], *, query_id: str | None = None, priority: int = 0,
                  watcher: QueryWatcher | None = None) -> Any:
        """Run one query and return its Output value. Cancelling the caller cancels the query
        and its engine requests; a failing node raises its own exception here. `watcher` sees
        its nodes finish (`accel.runtime.watch`)."""
        return await self._execute(template, inputs, query_id, priority, None, watcher)

    def stream(
        self, template: Template, inputs: Mapping[str, Any], *, query_id: str | None = None, priority: int = 0,
        watcher: QueryWatcher | None = None,
    ) -> AsyncIterator[StreamItem]:
        """Run one query, yielding the text `Delta`s of the Decode whose text is its output (if
        the output is one, see `Plan.text_source`) as they are generated, or an output dict's
        `Part`s as each is known (`Plan.parts_at`), then `Final(value)`.
        Leaving early cancels the query and aborts its engine requests before returning; a
        failing node raises its own exception from the iterator."""
        return stream_query(lambda on_item: self._execute(template, inputs, query_id, priority, on_item, watcher))

    async def _execute(
        self,
        template: Template,
        inputs: Mapping[str, Any],
        query_id: str | None,
        priority: int,
        on_item: Callable[[StreamItem], None] | None,
        watcher: QueryWatcher | None = None,
    ) -> Any:
        if self._executor is None:
            raise EngineUnavailable("runtime", "the runtime is not started", "use `async with Runtime(...)` or await start()")
        plan = self.plan(template)
        query_id = query_id or f"q{next(self._ids)}"
        instance = template.instantiate(inputs, query_id)
        tracer = get_tracer(self._tracer_provider)
        with query_span(tracer, query_id, policy=self.policy, nodes=len(template)) as parent:
            # Unrecorded query (no SDK, sampled out): skip primitive spans, they cost µs each.
            node_tracer = tracer if trace.get_current_span().is_recording() else None
            query = QueryRun(plan, instance, self.schedulers, self._executor, node_tracer, parent, priority, on_item, self.plan,
                             watcher=watcher, warm_gate=self.programs.gate, compute=self._compute)
            return await query.run()
