"""`LoweredChain`: how a wrapped chain runs, the helper its drop-in's entry points call.

`accel.wrap(runnable)` returns a drop-in of the chain's own class (`accel.adapters.langchain.dropin`):
a shallow copy whose entry points call the wrap's `LoweredChain` (held on the drop-in class's
`DropInState`, never on the instance), passing the drop-in itself so LangChain's own
`Runnable` machinery (`_call_with_config`, `batch`, ...) opens the call's runs on it.

Two ways to run, decided once at wrap time:

- **Lowered** (the chain has engine work accel understands): `invoke` / `ainvoke` / `stream` /
  `astream` run the captured template on the shared session under a callback run named like
  the original. The code accel does not lower runs where stock runs it, on the caller's thread
  or loop (`accel.caller`), so thread-locals, loop-bound clients and callbacks see what stock
  shows them. `batch` / `abatch` are `Runnable`'s on top of them, so concurrent queries
  batch together on the session's engines. A call whose listeners only stock serves as
  stock (a streaming handler; an async one in an async call: `streaming.stock_listener`)
  runs the stock chain with its engine calls captured.
- **Stock** (nothing to lower): every entry point is the original's own, on the caller's thread
  or task, with its own run tree; accel adds only the `WrappedRun` scope, so the framework
  components inside can still send their engine calls through accel's engine schedulers.

Either way each call is a `WrappedRun` (`accel.scope`). An engine failure is answered by the
stock chain only while no opaque user code has started (it may have side effects, and user
code never runs twice for one call); after that the error is raised as the stock client would
raise it (`common.errors`). Every fallback is logged on `accel.adapters.langchain` and counted
in `explain()`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import aclosing, closing, contextmanager
from functools import partial
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ensure_config, get_callback_manager_for_config, patch_config

from accel.adapters.common.errors import stock_embed_error, stock_llm_error, stock_vectordb_error
from accel.adapters.common.explain import draw, explain_text, rerank_miss_lines
from accel.adapters.langchain.capture import Capture, Step
from accel.adapters.langchain.runs import RunTree
from accel.adapters.langchain.stock_runs import END, StockRuns, stock_anext, stock_next
from accel.adapters.langchain.structure import peel_root, python_only
from accel.adapters.langchain.streaming import Chunks, stock_listener, stream_shapes
from accel.caller import LoopCaller, ThreadCaller
from accel.engines.errors import EngineError
from accel.ir.expand import has_engine_work
from accel.ir.graph import Graph
from accel.registry import TemplateCompiler
from accel.scope import context_with, stock_call, wrapped_run
from accel.types import Identity, Template, TemplateBuild

log = logging.getLogger("accel.adapters.langchain")


class LoweredChain(StockRuns):
    """One wrap of `original`: its capture, template and counters, and the lowered entry points
    (each takes the drop-in it runs for as `runnable`). With `lowered` False the drop-in runs
    the original's own entry points (`stock_runs.delegate`) and none of these is called."""

    def __init__(self, original: Runnable, *, policy: str = "topology", disabled_passes: Iterable[str] = (), fallback: bool = True) -> None:
        from accel.session import get_session

        self.original = original
        self.name = original.get_name()
        self.fallback = fallback
        self.counters: Counter[str] = Counter()
        self._session = get_session(policy=policy)
        root, self._layers = peel_root(original)
        self._root = root  # what runs once the outer bindings are applied (`_bind`)
        self._disabled_passes = tuple(disabled_passes)
        self._template: Template | None = None
        if python_only(root):  # nothing to lower, known without a capture (explain() makes one)
            self.lowered, self._steps = False, None
            self._run_as_is()
            return
        capture, graph = _capture(root, self._session, self._disabled_passes)
        self._runs, self._scope, self._leaf_root = capture.runs, capture.scope, capture.leaf_root
        self.lowered = has_engine_work(graph)
        self._steps: list[Step] = capture.report if self.lowered else capture.inside(root) or capture.report
        self._kwargs_route = capture.kwargs_route()
        self._unsupported = capture.unsupported_entries
        self._own_batch = capture.own_batch
        streaming = sorted({label for label, parent in capture.own_stream if self._runs.reached_by_stream(parent, self._scope)})
        self._own_stream = f"{', '.join(streaming)} stream(s) on their own" if streaming else None
        """Why `stream` runs the stock chain (its engine calls captured): opaque parts a stock
        `stream` reaches yield chunks their `invoke` does not (`has_own_stream`)."""
        self._models = capture.models  # their stock clients' exception types (`_stock_error`)
        self._llm_names = {self._session.get_engine(name).name for name in capture.llm_engines}
        if self.lowered:
            # keyed by the wrapper: the template's ops carry this capture's run scopes
            self._template = self._session.template(TemplateBuild(("langchain", Identity(self)), lambda: graph, self._disabled_passes))
            self._runs.bind(self._scope, self._template)
            self._shapes = stream_shapes(self._template, self._runs, self._scope)
        else:
            self._run_as_is()

    def _run_as_is(self) -> None:
        log.info("accel.wrap(%s): no engine work accel can lower; the chain runs as-is", self.name)

    @property
    def session(self) -> Any:
        return self._session

    @property
    def template(self) -> Template | None:
        return self._template

    # ---- execution (lowered) ------------------------------------------------------------

    def _bind(self, config: RunnableConfig | None, kwargs: dict[str, Any]) -> tuple[RunnableConfig | None, dict[str, Any]]:
        """Apply the chain's outer bindings, as `RunnableBinding.invoke` would."""
        if not self._layers:
            return config, kwargs
        bound: dict[str, Any] = {}
        for layer in self._layers:
            config = layer._merge_configs(config)
        for layer in reversed(self._layers):
            bound = {**bound, **layer.kwargs}
        return config, {**bound, **kwargs}

    def _stock_only(self, kwargs: dict[str, Any], entry: str) -> str | None:
        """Why only the stock chain may answer this call (`entry`: "sync" or "async"), or None."""
        if kwargs and self._kwargs_route == "stock":
            return "kwargs for a lowered first step"
        return self._unsupported.get(entry)

    def invoke(self, runnable: Runnable, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        config, kwargs = self._bind(config, kwargs)
        if why := self._stock_only(kwargs, "sync"):
            return self._stock(why, "invoke", input, config, **kwargs)
        if why := stock_listener(config, asynchronous=False):
            return self._stock(why, "invoke", input, config, captured=True, **kwargs)
        return self._under_root_run(partial(Runnable._call_with_config, runnable), self._invoke, input, config, **kwargs)

    async def ainvoke(self, runnable: Runnable, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        config, kwargs = self._bind(config, kwargs)
        if why := self._stock_only(kwargs, "async"):
            return await self._astock(why, "ainvoke", input, config, **kwargs)
        if why := stock_listener(config, asynchronous=True):
            return await self._astock(why, "ainvoke", input, config, captured=True, **kwargs)
        return await self._under_root_run(partial(Runnable._acall_with_config, runnable), self._ainvoke, input, config, **kwargs)

    def _under_root_run(self, with_config: Callable[..., Any], fn: Callable[..., Any], input: Any, config: RunnableConfig | None,
                        **kwargs: Any) -> Any:
        """`fn(input, run_manager, config, **kwargs)` under the wrapped call's chain run, opened
        by LangChain's `with_config` helper; a model or retriever wrapped alone opens its own
        llm / retriever run instead (`runs.RunTree`), so there is no chain run around it."""
        if self._leaf_root:
            config = ensure_config(config)
            return fn(input, _CallRun(config), config, **kwargs)
        return with_config(fn, input, config, **kwargs)

    def batch(self, runnable: Runnable, inputs: list[Any], config: Any = None, *, return_exceptions: bool = False,
              **kwargs: Any) -> list[Any]:
        """`Runnable.batch` over the drop-in's `invoke`, one share scope (a sequence's own batch
        would batch step by step)."""
        if self._own_batch:
            why = f"{', '.join(self._own_batch)} batch(es) on their own"
            return self._stock(why, "batch", inputs, config, return_exceptions=return_exceptions, target=self.original, **kwargs)
        with self._session.share(self._template, self.counters):  # issue 13: the batch's identical requests run once
            return Runnable.batch(runnable, inputs, config, return_exceptions=return_exceptions, **kwargs)

    async def abatch(self, runnable: Runnable, inputs: list[Any], config: Any = None, *, return_exceptions: bool = False,
                     **kwargs: Any) -> list[Any]:
        if self._own_batch:
            why = f"{', '.join(self._own_batch)} batch(es) on their own"
            return await self._astock(why, "abatch", inputs, config, return_exceptions=return_exceptions, target=self.original, **kwargs)
        with self._session.share(self._template, self.counters):  # issue 13: the batch's identical requests run once
            return await Runnable.abatch(runnable, inputs, config, return_exceptions=return_exceptions, **kwargs)

    def _query(self, input: Any, run_manager: Any, config: RunnableConfig, caller: Any, kwargs: dict[str, Any], *,
               called_by_stream: bool = False) -> dict[str, Any]:
        """The graph inputs of one call; "runs" rebuilds the lowered components' callback runs
        when a handler listens (none: nothing is recorded)."""
        runs = RunTree(self._runs, self._scope, config, run_manager, leaf_root=self._leaf_root,
                       called_by_stream=called_by_stream) if run_manager.handlers else None
        return {"input": input, "config": config, "run": run_manager, "runs": runs, "caller": caller,
                "kwargs": kwargs if self._kwargs_route == "first" else {}}

    def _invoke(self, input: Any, run_manager: Any, config: RunnableConfig, **kwargs: Any) -> Any:
        caller = ThreadCaller()
        query = self._query(input, run_manager, config, caller, kwargs)
        try:
            with wrapped_run(self._new_run()), _runs_closed(query["runs"], self.counters):
                return self._session.run(self._template, query, caller=caller, watcher=query["runs"])
        except EngineError as err:
            self._may_fall_back(err, caller)
            with stock_call():
                return self._root.invoke(input, _child(query), **kwargs)

    async def _ainvoke(self, input: Any, run_manager: Any, config: RunnableConfig, **kwargs: Any) -> Any:
        caller = LoopCaller(asyncio.get_running_loop())
        query = self._query(input, run_manager, config, caller, kwargs)
        try:
            with wrapped_run(self._new_run()), _runs_closed(query["runs"], self.counters):
                return await self._session.arun(self._template, query, watcher=query["runs"])
        except EngineError as err:
            self._may_fall_back(err, caller)
            with stock_call():
                return await self._root.ainvoke(input, _child(query), **kwargs)

    def _may_fall_back(self, err: EngineError, caller: Any) -> None:
        """Return if the stock chain may answer instead; else raise the stock error."""
        if not self.fallback or caller.started:
            why = "fallback disabled" if not self.fallback else "opaque user code already ran"
            log.warning("accel.wrap(%s): %s; no stock re-run (%s)", self.name, err, why)
            self.counters["engine errors raised"] += 1
            stock = stock_llm_error(err, self._llm_names)
            if stock is not err and self._models:
                stock = self._models[0].stock_error(stock)
            if stock is err:
                stock = stock_vectordb_error(err)
            if stock is err:
                stock = stock_embed_error(err)
            if stock is err:
                raise err
            raise stock from err
        log.warning("accel.wrap(%s): %s; answering with the stock chain (no user code had run)", self.name, err)
        self.counters["stock fallbacks"] += 1
        _fallback_event(self.name, err)

    def stream(self, runnable: Runnable, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        config, kwargs = self._bind(config, kwargs)
        if why := self._stock_only(kwargs, "sync"):
            yield from self._stock_stream(why, input, config, **kwargs)
            return
        if why := stock_listener(config, asynchronous=False) or self._own_stream:
            yield from self._stock_stream(why, input, config, captured=True, **kwargs)
            return
        # LangChain's wrapper does not close the generator it drives when it is closed itself
        # (it reports the GeneratorExit to the callbacks, which may keep its traceback and so
        # the generator alive): close ours here, so a `break` cancels the query at once.
        opened: list[Iterator[Any]] = []

        def transform(inputs: Iterator[Any], run_manager: Any, config: RunnableConfig) -> Iterator[Any]:
            opened.append(self._stream(inputs, run_manager, config, kwargs))
            return opened[-1]

        try:
            yield from self._under_root_run(lambda fn, inputs, cfg: Runnable._transform_stream_with_config(runnable, inputs, fn, cfg),
                                            transform, iter([input]), config)
        finally:
            for generator in opened:
                generator.close()

    async def astream(self, runnable: Runnable, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        config, kwargs = self._bind(config, kwargs)
        why, captured = self._stock_only(kwargs, "async"), False
        if why is None:
            why = stock_listener(config, asynchronous=True) or self._own_stream
            captured = why is not None
        if why:
            async with aclosing(self._astock_stream(why, input, config, captured=captured, **kwargs)) as chunks:
                async for chunk in chunks:
                    yield chunk
            return

        async def one() -> AsyncIterator[Any]:
            yield input

        def transform(inputs: AsyncIterator[Any], run_manager: Any, config: RunnableConfig) -> AsyncIterator[Any]:
            return self._astream(inputs, run_manager, config, kwargs)

        # closed explicitly: leaving early must cancel the query now, not when the GC gets to it
        chunks_of = self._under_root_run(lambda fn, inputs, cfg: Runnable._atransform_stream_with_config(runnable, inputs, fn, cfg),
                                         transform, one(), config)
        async with aclosing(chunks_of) as chunks:
            async for chunk in chunks:
                yield chunk

    def _stream(self, inputs: Iterator[Any], run_manager: Any, config: RunnableConfig, kwargs: dict[str, Any]) -> Iterator[Any]:
        input = next(inputs)
        caller = ThreadCaller()
        query = self._query(input, run_manager, config, caller, kwargs, called_by_stream=True)
        chunks, started = Chunks(self._shapes), False
        try:
            items = self._session.stream(self._template, query, context=context_with(self._new_run()), caller=caller, watcher=query["runs"])
            with closing(items), _runs_closed(query["runs"], self.counters):
                for item in items:
                    for chunk in chunks.feed(item):
                        started = True
                        yield chunk
        except EngineError as err:
            if started:
                raise
            self._may_fall_back(err, caller)
            stock = self._root.stream(input, _child(query), **kwargs)
            with closing(stock):
                while (chunk := stock_next(stock)) is not END:
                    yield chunk

    async def _astream(self, inputs: AsyncIterator[Any], run_manager: Any, config: RunnableConfig, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        input = await anext(inputs)
        caller = LoopCaller(asyncio.get_running_loop())
        query = self._query(input, run_manager, config, caller, kwargs, called_by_stream=True)
        chunks, started = Chunks(self._shapes), False
        try:
            stream = self._session.astream(self._template, query, context=context_with(self._new_run()), watcher=query["runs"])
            async with aclosing(stream) as items:
                with _runs_closed(query["runs"], self.counters):
                    async for item in items:
                        for chunk in chunks.feed(item):
                            started = True
                            yield chunk
        except EngineError as err:
            if started:
                raise
            self._may_fall_back(err, caller)
            async with aclosing(self._root.astream(input, _child(query), **kwargs)) as stock:
                while (chunk := await stock_anext(stock)) is not END:
                    yield chunk

    # ---- introspection ------------------------------------------------------------------

    def explain(self, picture: Any = None) -> str:
        """The components lowered or left opaque (and why), the passes and the e-graph. With
        `picture` (a path: .png, .svg, .mmd, ...), also draw the p-graph beside the e-graph."""
        if picture is not None and self.lowered:
            draw(self._template, picture)
        title = f"accel.wrap({self.name}) [LangChain]"
        counters = [f"  {name}: {n}" for name, n in sorted(self.counters.items())]
        if not self.lowered:
            if self._steps is None:
                capture = _capture(self._root, self._session, self._disabled_passes)[0]
                self._steps = capture.inside(self._root) or capture.report
            lines = [title, "", "runs as-is: no engine work accel can lower (engine calls inside are still captured)", "",
                     "components:"] + [f"  [opaque ] {s.component}: {s.detail}" for s in self._steps]
            return "\n".join(lines + (["", "counters:", *counters] if counters else []))
        text = explain_text(title, self._steps, self._template) + f"\n\nengine limits: {self._session.limits_source}"
        if self._own_stream:
            text += f"\nstream / astream: the stock chain, its engine calls captured ({self._own_stream})"
        text += "".join(f"\n{line}" for line in [*self._session.warmup_lines(), *self._session.speculation_lines(), *rerank_miss_lines()])
        return text + ("\n\ncounters:\n" + "\n".join(counters) if counters else "")


class _CallRun:
    """Stands for the wrapped call's run where the root component opens its own (a model or
    retriever wrapped alone): its children take the call's own callbacks."""

    def __init__(self, config: RunnableConfig) -> None:
        self._callbacks = get_callback_manager_for_config(config)
        self.handlers = self._callbacks.handlers

    def get_child(self, tag: str | None = None) -> Any:
        return self._callbacks


@contextmanager
def _runs_closed(runs: RunTree | None, counters: Counter[str]) -> Iterator[None]:
    """End the query's rebuilt runs with it: closed when it answers, errored when it fails or
    its consumer leaves. A run whose output never showed is closed anyway and counted."""
    if runs is None:
        yield
        return
    try:
        yield
    except BaseException as err:
        runs.fail(err)
        raise
    runs.finish()
    if runs.unclosed:
        counters["callback runs closed without their output"] += runs.unclosed


def _child(query: dict[str, Any]) -> RunnableConfig:
    """The config for the stock chain answering instead: a child of the wrapped call's run."""
    return patch_config(query["config"], callbacks=query["run"].get_child())


def _fallback_event(app: str, err: EngineError) -> None:
    """An `accel.fallback` event on the current OpenTelemetry span."""
    from opentelemetry import trace

    trace.get_current_span().add_event("accel.fallback", {"accel.app": app, "accel.engine": err.engine, "accel.cause": err.cause})


def _capture(original: Runnable, session: TemplateCompiler, disabled_passes: tuple[str, ...]) -> tuple[Capture, Graph]:
    """Lower the chain: the capture (report, kwargs route) and its p-graph.
    Components are lowered or opaque (`Opaque`, reported); any other exception is a capture
    bug and surfaces."""
    capture = Capture(session, disabled_passes=disabled_passes)
    graph = capture.build(capture.lower_root(original))
    return capture, graph
