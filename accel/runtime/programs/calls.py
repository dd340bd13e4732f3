"""A program's engine calls: what the floor reports (`accel.types.EngineCall`) becomes one
`EngineTask` of its program.

Each call of a wrapped run is one task with `query_id = "program<N>"`, so the topology policy
batches it with every other program's waiting requests for the same engine. LLM calls carry
the program's priority (`Priorities`) and add their service time to the program. Where the
run learns (`run.recorder`, learned prefill), its LLM calls and searches are told to the
recorder, and its warm-ups are sent from here, through the engine's `SpareGate`.

`Session.call` / `acall` / `stream_call` / `astream_call` drive this: `begin` and `end` on the
calling thread (where the calling code's context, and so the call's site, is), `submit`,
`stream` and `warm` on the runtime's loop.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING

from accel.ir.ops import WarmupOp
from accel.runtime.programs.learned import RunRecorder, Warm
from accel.runtime.programs.priority import Priorities
from accel.runtime.programs.spare import SpareGate
from accel.runtime.task import EngineTask

if TYPE_CHECKING:
    from accel.engines.base import Engine, GenerationRequest
    from accel.ir.dynamic import Site
    from accel.runtime.engine_scheduler import EngineScheduler
    from accel.scope import WrappedRun
    from accel.types import EngineCall

TEXT_RESULTS = frozenset({"vectordb", "search"})
"""Engine kinds whose results carry passages (a hit's `text`) a later prompt may quote."""


class Programs:
    """The program calls of one runtime (its engine schedulers and engines, by name)."""

    def __init__(self, schedulers: Mapping[str, EngineScheduler], engines: Mapping[str, Engine], *,
                 priorities: Priorities, llm_spare: Callable[[], int],
                 warm_min_tokens: Callable[[], int] = lambda: 0) -> None:
        self._schedulers = schedulers
        self._engines = engines
        self.priorities = priorities
        self._llm_spare = llm_spare
        self._warm_min_tokens = warm_min_tokens
        self._gates: dict[str, SpareGate] = {}
        self._ids = itertools.count()

    # ---- on the calling thread --------------------------------------------------------------

    def begin(self, run: WrappedRun, name: str, call: EngineCall) -> Site | None:
        """The call's site where the run learns from it (an LLM call: its prompt is told to
        the recorder now; a search: its passages once it returns), else None."""
        recorder = run.recorder
        if not isinstance(recorder, RunRecorder):
            return None
        kind = call.engine.kind
        if kind == "llm":
            site = recorder.site("llm")
            recorder.llm_request(site, call.prompt, name)
            return site
        if kind in TEXT_RESULTS:
            return recorder.site(kind)
        return None

    def end(self, run: WrappedRun, site: Site | None, call: EngineCall, results: list[object], value: object) -> None:
        """What a call at `site` returned (`results`, shaped into `value`), told to the recorder."""
        recorder = run.recorder
        if site is None or not isinstance(recorder, RunRecorder):
            return
        if site.kind == "llm":
            if call.answer is not None:
                recorder.llm_response(site, *call.answer(results[0]))
            return
        texts = [getattr(hit, "text", None) for hits in results for hit in (hits if isinstance(hits, list) else [])]
        shown = call.shown(value) if call.shown is not None else []
        recorder.results(site, [t for t in texts if isinstance(t, str)], shown)

    # ---- on the runtime's loop --------------------------------------------------------------

    async def submit(self, run: WrappedRun, name: str, call: EngineCall) -> list[object]:
        """The engine's results for the call's requests, in order; cancelling withdraws them."""
        llm = call.engine.kind == "llm"
        task = self._task(run, call, list(call.requests), llm)
        try:
            return await self._schedulers[name].submit(task)
        finally:
            if llm and task.dispatched_at is not None:
                run.add_service(time.perf_counter() - task.dispatched_at)

    async def stream(self, run: WrappedRun, name: str, call: EngineCall, site: Site | None) -> AsyncIterator[object]:
        """One LLM request's chunks; leaving early aborts it. A stream read to its end is told
        to the recorder at `site` (`call.answer` of every chunk)."""
        task = self._task(run, call, list(call.requests), True)
        chunks: list[object] = []
        try:
            async for chunk in self._schedulers[name].stream(task):
                if site is not None:
                    chunks.append(chunk)
                yield chunk
        finally:
            if task.dispatched_at is not None:
                run.add_service(time.perf_counter() - task.dispatched_at)
        recorder = run.recorder
        if site is not None and call.answer is not None and isinstance(recorder, RunRecorder):
            recorder.llm_response(site, *call.answer(chunks))

    def gate(self, name: str) -> SpareGate:
        """The spare-capacity gate of LLM engine `name`, one per engine for every warm-up the
        runtime sends (programs' and compiled graphs'), made on first use."""
        gate = self._gates.get(name)
        if gate is None:
            scheduler = self._schedulers[name]
            gate = self._gates[name] = SpareGate(lambda: scheduler.load, self._llm_spare, self._warm_min_tokens)
        return gate

    def refused(self) -> dict[str, int]:
        """Warm-ups not sent for want of spare capacity so far, per LLM engine (lost
        optimisations, counted for `explain()`)."""
        return {name: gate.refused for name, gate in self._gates.items() if gate.refused}

    def too_short(self) -> dict[str, int]:
        """Warm-ups not sent so far because their prefix was too short to pay for a request
        (under `warm_min_tokens` or one block), per LLM engine."""
        return {name: gate.short for name, gate in self._gates.items() if gate.short}

    async def warm(self, recorder: RunRecorder, warms: list[Warm], values: dict[str, str]) -> None:
        """Send one arrival's warm-ups of a run, if their LLM engine has spare capacity. The
        group counts against the gate while it tokenizes; once built, its requests count in
        the engine's load themselves."""
        try:
            gate = self.gate(warms[0].engine)
            if not gate.try_enter():
                # speculative work only where the engine has room: with a full batch, a warm-up's
                # prefill takes time from the requests running now and gains nothing overall
                for warm in warms:
                    recorder.model.count(warm.site, "busy")
                return
            try:
                built = await asyncio.gather(*(self._build(recorder, warm, values, gate) for warm in warms))
            finally:
                gate.leave()
            priority = self.priorities.of(recorder.run)
            await asyncio.gather(*(self._send(recorder, warm, op, requests, values, priority)
                                   for warm, (op, requests) in zip(warms, built) if requests))
        finally:
            recorder.warming_done(warms)

    async def _build(self, recorder: RunRecorder, warm: Warm, values: dict[str, str],
                     gate: SpareGate) -> tuple[WarmupOp, list[GenerationRequest]]:
        """One warm-up's op and requests: none where the call came first or the prefix is too
        short (counted)."""
        engine = self._engines[warm.engine]
        op = WarmupOp(prefix=warm.learned.flat_parts[:warm.parts], tokenize=engine.tokenize,  # type: ignore[attr-defined]
                      block_size=lambda: engine.block_size, messages=warm.learned.messages,  # type: ignore[attr-defined]
                      render_chat=engine.render_chat)  # type: ignore[attr-defined]
        if recorder.called(warm.site):
            return op, []
        requests = await gate.requests(op, values)
        if not requests:
            recorder.model.count(warm.site, "short")
        return op, requests

    async def _send(self, recorder: RunRecorder, warm: Warm, op: WarmupOp, requests: list[GenerationRequest],
                    values: dict[str, str], priority: int) -> None:
        if recorder.called(warm.site):
            return  # the call came first
        task = EngineTask(query_id=f"program{recorder.run.program}", node=f"warm:{warm.site}", depth=0,
                          requests=list(requests), priority=priority)
        tokens = op.output(values, await self._schedulers[warm.engine].submit(task))
        recorder.warmed(warm.site, tokens)

    def _task(self, run: WrappedRun, call: EngineCall, requests: list[object], llm: bool) -> EngineTask:
        return EngineTask(query_id=f"program{run.program}", node=f"{call.component}#{next(self._ids)}", depth=0,
                          requests=requests, priority=self.priorities.of(run) if llm else 0)
