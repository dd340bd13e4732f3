"""The process-wide session: one background asyncio loop running one `Runtime` for every
wrapped app, so queries from sync threads and from async code on any loop batch together.

    session = get_session()
    name = session.engine(catalogue.embedder(model_path))        # an EngineSpec
    template = session.template(TemplateBuild(key, build_graph))  # the passes' context is the session's
    value = session.submit(template, {"input": x}).result()      # sync callers
    value = await session.arun(template, {"input": x})           # async callers, any loop
    for item in session.stream(template, {"input": x}): ...      # Delta..., Final (threads)
    async for item in session.astream(template, {"input": x}): ...   # the same, any loop
    value = session.call(run, EngineCall(spec, requests, "component"))   # a program's engine call
    value = await session.acall(run, call)                              # (stream_call, astream_call)

The loop thread, the runtime and each engine are created lazily on first use. Engines are
shared and deduplicated by `(kind, key)`: two chains on the same embedding model use one
embedder, so their requests batch. Templates are cached by structure key (`TemplateBuild`),
at most `accel.ir.template.TEMPLATE_CACHE_SIZE` of them. `shutdown()` (also run at exit) stops the runtime and the
engines the session created.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import itertools
import logging
import threading
from collections.abc import AsyncIterator, Hashable, Iterable, Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from accel.config import Settings, settings as current_settings
from accel.engines.base import Engine, LLMEngine
from accel.engines.errors import EngineUnavailable
from accel.engines.limits import EngineLimits
from accel.ir.template import Template, TemplateCache
# the runtime's names stay private here: the session is the adapters' door to the runtime and
# re-exports nothing of it (tests/test_layers.py)
from accel.runtime.graph_scheduler import lost_speculations as _lost_speculations
from accel.runtime.output_stream import relay_to_loop as _relay_to_loop, relay_to_thread as _relay_to_thread
from accel.runtime.policies import get_policy as _get_policy
from accel.runtime.sharing import batch_scope as _batch_scope
from accel.types import (EngineCall, EngineSpec, OnSessionLoop, PolicyName, ProgramLearner, QueryWatcher, StreamItem,
                         TemplateBuild)

if TYPE_CHECKING:
    from accel.caller import ThreadCaller
    from accel.ir.dynamic import Site
    from accel.passes import LLMInfo
    from accel.profiles import MeasuredLimits
    from accel.runtime.programs import Programs, RunRecorder, Warm
    from accel.runtime.runtime import Runtime
    from accel.scope import WrappedRun

# The one door to the runtime: adapters use the session and the public types (`accel.types`);
# the runtime's own types stay behind it.
__all__ = ["Session", "get_session", "shutdown"]

SHUTDOWN_TIMEOUT_S = 30.0
log = logging.getLogger("accel.session")


class Session:
    """One loop thread, one runtime, the engines it needs, and the cached templates."""

    def __init__(self, *, policy: PolicyName = "topology", disabled_passes: Iterable[str] = (),
                 settings: Settings | None = None) -> None:
        _get_policy(policy)  # a typo fails here, not at the first query
        self._settings = settings or current_settings()
        self.policy: PolicyName = policy
        self.disabled_passes: tuple[str, ...] = tuple(disabled_passes)
        self._lock = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runtime: Runtime | None = None
        self._names: dict[tuple[str, Hashable], str] = {}
        self._engines: dict[str, Engine] = {}
        self._limits: dict[str, EngineLimits | None] = {}
        self._ids = itertools.count()
        self._templates = TemplateCache()
        self._attaching: dict[str, asyncio.Task[None]] = {}
        self._measured: MeasuredLimits | None = None
        self._closed = False

    # ---- lifecycle ----------------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The session's loop, started on first use in a daemon thread."""
        with self._lock:
            if self._closed:
                raise EngineUnavailable("session", "the accel session was shut down", "call accel.get_session() for a new one")
            if self._loop is None:
                self._start_loop()
            return self._loop

    def _start_loop(self) -> None:
        from accel.runtime.programs import Priorities
        from accel.runtime.runtime import Runtime

        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=serve, name="accel-session", daemon=True)
        thread.start()
        ready.wait()
        runtime = Runtime({}, policy=self.policy, priorities=Priorities(self._settings.program_priority),
                          llm_spare=lambda: self._measured_limits().llm_spare,
                          warm_min_tokens=lambda: self._measured_limits().warm_min_tokens)
        asyncio.run_coroutine_threadsafe(runtime.start(), loop).result()
        self._loop, self._thread, self._runtime = loop, thread, runtime

    @property
    def started(self) -> bool:
        return self._loop is not None

    def shutdown(self) -> None:
        """Stop the runtime, the session's engines and the loop thread. Idempotent."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._closed = True
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._stop(), loop).result(SHUTDOWN_TIMEOUT_S)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(SHUTDOWN_TIMEOUT_S)
            if not thread.is_alive():
                loop.close()

    async def _stop(self) -> None:
        for task in self._attaching.values():
            task.cancel()
        await asyncio.gather(*self._attaching.values(), return_exceptions=True)
        await self._rt().stop()
        for engine in self._engines.values():
            await engine.stop()

    # ---- engines ------------------------------------------------------------------------

    def engine(self, spec: EngineSpec) -> str:
        """The runtime name of the engine for `(spec.kind, spec.key)`, made with
        `spec.factory()` the first time; `spec.limits` apply to a newly made engine only."""
        with self._lock:
            name = self._names.get((spec.kind, spec.key))
            if name is None:
                name = f"{spec.kind}{next(self._ids)}"
                self._engines[name] = spec.factory()
                self._limits[name] = spec.limits
                self._names[(spec.kind, spec.key)] = name
            return name

    def get_engine(self, name: str) -> Engine:
        return self._engines[name]

    @property
    def limits_source(self) -> str:
        """Where the engines' measured limits come from (saved profiles, or the defaults)."""
        return self._measured_limits().source

    @property
    def warmups_refused(self) -> dict[str, int]:
        """Prefix-cache warm-ups not sent because their LLM engine had no spare capacity, per
        engine, over this session's life (empty before the runtime starts)."""
        runtime = self._runtime
        return runtime.programs.refused() if runtime is not None else {}

    @property
    def warmups_too_short(self) -> dict[str, int]:
        """Prefix-cache warm-ups not sent because their prefix was too short to pay for a
        request (`MeasuredLimits.warm_min_tokens`, or one block), per engine."""
        runtime = self._runtime
        return runtime.programs.too_short() if runtime is not None else {}

    def warmup_lines(self) -> list[str]:
        """`explain()`'s lines on the warm-ups this session did not send, and why."""
        lines = []
        if refused := self.warmups_refused:
            lines.append("warm-ups not sent, the LLM having no spare capacity (session-wide): "
                         + ", ".join(f"{name} {n}" for name, n in sorted(refused.items())))
        if short := self.warmups_too_short:
            least = self._measured_limits().warm_min_tokens
            lines.append(f"warm-ups not sent, their prefix under {least} tokens or one block, too short to pay for "
                         "a request (session-wide): " + ", ".join(f"{name} {n}" for name, n in sorted(short.items())))
        return lines

    @staticmethod
    def speculation_lines() -> list[str]:
        """`explain()`'s line on speculative engine calls (work ahead of need) that failed."""
        if not _lost_speculations:
            return []
        return ["speculative engine calls that failed, their queries going on without them (process-wide): "
                + ", ".join(f"{node} {n}" for node, n in sorted(_lost_speculations.items()))]

    def _measured_limits(self) -> MeasuredLimits:
        """The engines' measured limits (`accel.profiles`), loaded once."""
        with self._lock:
            if self._measured is None:
                from accel import profiles

                self._measured = profiles.load()
            return self._measured

    def _pass_profiles(self) -> Mapping[str, int]:
        """Max efficient batch sizes per "<engine>/<input class>" for the passes: a live view,
        so engines bound while a template is built (after its PassContext) are included."""
        return _LiveProfiles(self)

    def _llm_info(self, name: str) -> LLMInfo | None:
        """What the passes may know of LLM engine `name` (its tokenizer, chat template and
        block size, read from the running engine at run time); None for any other engine."""
        from accel.passes import LLMInfo

        with self._lock:
            engine = self._engines.get(name)
        if not isinstance(engine, LLMEngine):
            return None
        return LLMInfo(engine.tokenize, engine.render_chat, block_size=lambda: engine.block_size)

    async def _prepare(self, names: Iterable[str]) -> None:
        """On the loop: make sure each engine has a running scheduler and is started. The work
        is a session-owned task per engine, shielded from the query that first needed it, so
        cancelling that query never leaves a half-started engine behind; a failed start is
        forgotten so that the next query tries again."""
        for name in names:
            task = self._attaching.get(name)
            if task is None:
                task = self._attaching[name] = asyncio.get_running_loop().create_task(self._attach(name), name=f"accel-attach-{name}")
                task.add_done_callback(_retrieve)
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                raise
            except BaseException:
                if self._attaching.get(name) is task:
                    del self._attaching[name]
                raise

    async def _attach(self, name: str) -> None:
        engine = self._engines.get(name)
        if engine is None:
            raise EngineUnavailable(name, "the template names an engine this session does not hold", "register it with session.engine(...)")
        limits = self._limits[name]
        names = await profile_names(engine) if limits is not None and not isinstance(engine, LLMEngine) else None
        await self._rt().add_engine(name, engine, self._sized(engine, limits, names))
        await engine.start()

    def _sized(self, engine: Engine, limits: EngineLimits | None, names: tuple[str, ...] | None = None) -> EngineLimits | None:
        """Limits that size calls by duration get the engine's measured cost per request; an
        engine without a profile keeps its count cap (logged). A call's fixed cost, where the
        limits hold calls for open streams, is the measured one too, and an engine on a device
        of its own (`EngineLimits.efficient_calls`) takes at most its max efficient batch a call.
        An LLM keeps more requests in flight than the default where its profile shows it still
        gaining past that many. `names`: what the engine's profile may be saved under
        (`profile_names`), first found wins."""
        if isinstance(engine, LLMEngine) and limits is not None:
            return self._llm_sized(engine, limits)
        measured = self._measured_limits()
        profiled = measured.first_profiled(names or (getattr(engine, "name", ""),))
        overhead = measured.call_overhead(profiled) if limits is not None else None
        if overhead is not None and limits.call_overhead_s:
            limits = dataclasses.replace(limits, call_overhead_s=overhead)
        efficient = measured.efficient_batch(profiled) if limits is not None and limits.efficient_calls else None
        if efficient is not None and efficient < limits.max_batch_size:
            log.info("engine %s: calls of at most %d requests (its profile's max efficient batch)",
                     getattr(engine, "name", engine), efficient)
            limits = dataclasses.replace(limits, max_batch_size=efficient)
        if limits is None or limits.max_call_s is None or limits.item_seconds is not None:
            return limits
        seconds = measured.item_seconds(profiled)
        if seconds is None:
            log.info("engine %s has no measured profile: its calls are sized by count (%d)",
                     getattr(engine, "name", engine), limits.max_batch_size)
            return limits
        return dataclasses.replace(limits, item_seconds=seconds)

    def _llm_sized(self, engine: Engine, limits: EngineLimits) -> EngineLimits:
        """The default in-flight cap (64, what every CPU measurement here ran with) stops an H100
        short: its 8B decode still gains past 64 sequences a step, and vLLM runs up to 1,024
        there. The profile's peak raises the cap; it never lowers it (a CPU's peak, 32, would
        hold back requests for an ordering no measurement here showed paying), and a cap the
        app set itself stays."""
        measured = self._measured_limits().llm_batch
        if measured is None or limits.max_inflight != EngineLimits().max_inflight or measured <= limits.max_inflight:
            return limits
        log.info("engine %s keeps up to %d requests in flight (its profile's peak throughput)",
                 getattr(engine, "name", engine), measured)
        return dataclasses.replace(limits, max_inflight=measured)

    # ---- engine calls of a run (a program) ----------------------------------------------

    def call(self, run: WrappedRun, call: EngineCall) -> object:
        """`call.shape` of the engine's results for `call.requests`, made as one task of `run`'s
        program, blocking this thread; `OnSessionLoop` on the session loop's own thread. An
        `EngineError` comes before any result (the caller may then run its own code)."""
        if self.in_loop_thread():
            raise OnSessionLoop(call.component)
        name = self.engine(call.engine)
        loop = self.loop
        programs = self._rt().programs
        site = programs.begin(run, name, call)
        future = asyncio.run_coroutine_threadsafe(self._call(run, name, call), loop)
        try:
            results = future.result()
        except BaseException:
            future.cancel()
            raise
        return self._shaped(programs, run, site, call, results)

    async def acall(self, run: WrappedRun, call: EngineCall) -> object:
        """`call` for async code on any loop; cancelling the caller withdraws the task."""
        name = self.engine(call.engine)
        loop = self.loop
        programs = self._rt().programs
        site = programs.begin(run, name, call)
        work = self._call(run, name, call)
        if asyncio.get_running_loop() is loop:
            results = await work
        else:
            results = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, loop))
        return self._shaped(programs, run, site, call, results)

    def stream_call(self, run: WrappedRun, call: EngineCall) -> Iterator[object]:
        """The chunks of `call`'s one LLM request, streamed to this thread from the first
        `next`; closing the iterator early aborts the request."""
        if self.in_loop_thread():
            raise OnSessionLoop(call.component)
        name = self.engine(call.engine)
        site = self._programs().begin(run, name, call)
        return _relay_to_thread(self.loop, lambda: self._stream_call(run, name, call, site))

    def astream_call(self, run: WrappedRun, call: EngineCall) -> AsyncIterator[object]:
        """`stream_call` for async code on any loop."""
        name = self.engine(call.engine)
        site = self._programs().begin(run, name, call)
        loop = self.loop
        if asyncio.get_running_loop() is loop:
            return self._stream_call(run, name, call, site)
        return _relay_to_loop(loop, lambda: self._stream_call(run, name, call, site))

    def learner(self, app: str, disabled_passes: Iterable[str] = ()) -> ProgramLearner | None:
        """Learned prefill for wrapped app `app` that runs its own code, or None where the app's
        options (`WrapOptions.disabled_passes`) or the session's switch the pass off."""
        from accel.passes import learned_prefill
        from accel.runtime.programs import ProgramModel

        if learned_prefill.NAME in {*self.disabled_passes, *disabled_passes}:
            return None
        return ProgramModel(app, learned_prefill, self._warm)

    def share(self, template: Template | None, counters: MutableMapping[str, int] | None = None) -> AbstractContextManager[object]:
        """A share scope for one batch call: identical deterministic engine requests of its
        queries run once (`accel.runtime.sharing`); what was shared is added to `counters`."""
        return _batch_scope(template, counters)

    def _programs(self) -> Programs:
        return self._started().programs

    def _started(self) -> Runtime:
        """The runtime, its loop started if need be."""
        self.loop
        return self._rt()

    def _rt(self) -> Runtime:
        """The runtime of a started session (on the loop, or once `loop` was read)."""
        runtime = self._runtime
        assert runtime is not None, "the session loop was not started"
        return runtime

    async def _call(self, run: WrappedRun, name: str, call: EngineCall) -> list[object]:
        await self._prepare([name])
        return await self._rt().programs.submit(run, name, call)

    @staticmethod
    def _shaped(programs: Programs, run: WrappedRun, site: Site | None, call: EngineCall, results: list[object]) -> object:
        value = call.shape(results)
        programs.end(run, site, call, results, value)
        return value

    async def _stream_call(self, run: WrappedRun, name: str, call: EngineCall, site: Site | None) -> AsyncIterator[object]:
        await self._prepare([name])
        async with contextlib.aclosing(self._rt().programs.stream(run, name, call, site)) as chunks:
            async for chunk in chunks:
                yield chunk

    def _warm(self, recorder: RunRecorder, warms: list[Warm], values: dict[str, str]) -> concurrent.futures.Future[None]:
        """Send one arrival's warm-ups of a learning run (`ProgramModel`'s warmer)."""
        return asyncio.run_coroutine_threadsafe(self._send_warms(recorder, warms, values), self.loop)

    async def _send_warms(self, recorder: RunRecorder, warms: list[Warm], values: dict[str, str]) -> None:
        await self._prepare([warms[0].engine])
        await self._rt().programs.warm(recorder, warms, values)

    # ---- templates ----------------------------------------------------------------------

    def template(self, build: TemplateBuild) -> Template:
        """The cached template for `build`: `build.graph()` gives the p-graph, the passes
        (minus the session's and the build's disabled ones) optimise it, once per structure
        key. The passes see the session's engines: measured batch sizes, and each LLM
        engine's tokenizer, chat template and block size, looked up per node."""
        from accel.passes import PassContext, optimize

        disabled = tuple(sorted({*self.disabled_passes, *build.disabled_passes}))
        context = PassContext(profiles=self._pass_profiles(), llm=self._llm_info)
        run_passes = (lambda graph: optimize(graph, disabled=disabled, context=context)) if build.passes else None
        return self._templates.get(build.key, (disabled, build.passes), build.graph, run_passes)

    # ---- running queries ----------------------------------------------------------------

    async def _run(self, template: Template, inputs: Mapping[str, object], watcher: QueryWatcher | None = None) -> object:
        runtime = self._rt()
        await self._prepare(sorted(_engines_of(template)))
        return await runtime.run(template, inputs, watcher=watcher)

    def submit(self, template: Template, inputs: Mapping[str, object], *,
               watcher: QueryWatcher | None = None) -> concurrent.futures.Future[object]:
        """Run one query on the session loop; cancelling the future cancels the query. A
        `watcher` (`accel.types.QueryWatcher`) sees its nodes finish, on the loop."""
        loop = self.loop
        return asyncio.run_coroutine_threadsafe(self._run(template, dict(inputs), watcher), loop)

    def run(self, template: Template, inputs: Mapping[str, object], *, caller: ThreadCaller | None = None,
            watcher: QueryWatcher | None = None) -> object:
        """Blocking `submit(...).result()`; refuses to block the session loop itself. With a
        `ThreadCaller` (accel.caller), this thread runs the query's user code meanwhile. An
        interrupt of the waiting thread cancels the query."""
        self._refuse_blocking("arun")
        future = self.submit(template, inputs, watcher=watcher)
        try:
            return future.result() if caller is None else caller.serve(future)
        except BaseException:
            future.cancel()
            raise

    def _refuse_blocking(self, instead: str) -> None:
        if self.in_loop_thread():
            raise RuntimeError(
                "accel session: a blocking call was made on the session loop's own thread. "
                f"Remedy: use session.{instead}(...) there instead."
            )

    async def arun(self, template: Template, inputs: Mapping[str, object], *, watcher: QueryWatcher | None = None) -> object:
        """Run one query from async code on any loop (the caller's cancellation propagates)."""
        loop = self.loop
        if asyncio.get_running_loop() is loop:
            return await self._run(template, dict(inputs), watcher)
        return await asyncio.wrap_future(self.submit(template, inputs, watcher=watcher))

    async def _stream(self, template: Template, inputs: Mapping[str, object],
                      watcher: QueryWatcher | None = None) -> AsyncIterator[StreamItem]:
        await self._prepare(sorted(_engines_of(template)))
        async with contextlib.aclosing(self._rt().stream(template, inputs, watcher=watcher)) as items:
            async for item in items:
                yield item

    def stream(self, template: Template, inputs: Mapping[str, object], *, context: contextvars.Context | None = None,
               caller: ThreadCaller | None = None, watcher: QueryWatcher | None = None) -> Iterator[StreamItem]:
        """One query's `Delta`s then its `Final` (see `Runtime.stream`), for sync callers in any
        thread but the session loop's. The query starts at the first `next`, in `context` (by
        default the caller's then); closing the iterator early cancels it and returns once its
        engine requests are aborted. A `ThreadCaller` (accel.caller) in `caller` makes the
        consuming thread also run the query's user code while it waits."""
        self._refuse_blocking("astream")
        inputs = dict(inputs)
        return _relay_to_thread(self.loop, lambda: self._stream(template, inputs, watcher), context, caller)

    async def astream(self, template: Template, inputs: Mapping[str, object], *, context: contextvars.Context | None = None,
                      watcher: QueryWatcher | None = None) -> AsyncIterator[StreamItem]:
        """`stream` for async code on any loop; closing early or cancelling the consumer
        cancels the query."""
        loop, inputs = self.loop, dict(inputs)
        if asyncio.get_running_loop() is loop and context is None:
            items = self._stream(template, inputs, watcher)
        else:
            items = _relay_to_loop(loop, lambda: self._stream(template, inputs, watcher), context)
        async with contextlib.aclosing(items):
            async for item in items:
                yield item

    def in_loop_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread


class _LiveProfiles(Mapping[str, int]):
    """`Session._pass_profiles`: read when a pass looks, over the engines held then."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def _now(self) -> dict[str, int]:
        with self._session._lock:
            engines = [(name, getattr(engine, "name", name)) for name, engine in self._session._engines.items()]
        return self._session._measured_limits().for_engines(engines)

    def __getitem__(self, key: str) -> int:
        return self._now()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark an attach task's failure as seen: the queries awaiting it re-raise it themselves."""
    if not task.cancelled():
        task.exception()


async def profile_names(engine: Engine) -> tuple[str, ...]:
    """What the engine's saved profile may be named (an encoder server's served model, then its
    own name: `EmbeddingServerEngine.profile_names`); its own name for other engines."""
    names = getattr(engine, "profile_names", None)
    return tuple(await names()) if callable(names) else (getattr(engine, "name", ""),)


def _engines_of(template: Template) -> set[str]:
    from accel.ir.expand import engines_of

    return engines_of(template.nodes)


# ---- the process-wide sessions -------------------------------------------------------------

_sessions: dict[tuple[str, tuple[str, ...]], Session] = {}
_sessions_lock = threading.Lock()


def get_session(*, policy: PolicyName = "topology", disabled_passes: Iterable[str] = ()) -> Session:
    """The shared session for these options (one per policy and disabled-pass set; the
    default options share one session for the whole process)."""
    key = (policy, tuple(sorted(disabled_passes)))
    with _sessions_lock:
        session = _sessions.get(key)
        if session is None or session._closed:
            session = _sessions[key] = Session(policy=policy, disabled_passes=key[1])
        return session


def shutdown() -> None:
    """Shut down every session of this process (also registered to run at exit)."""
    with _sessions_lock:
        sessions = list(_sessions.values())
        _sessions.clear()
    for session in sessions:
        session.shutdown()


atexit.register(shutdown)
