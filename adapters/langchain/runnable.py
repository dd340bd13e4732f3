"""`WrappedRunnable`: the accelerated chain, usable wherever the original Runnable was.

`invoke`/`ainvoke` run the captured template on the shared session under a callback run named
like the original (so the user's callbacks see the chain's start/end/error); `stream`/`astream`
do the same through `Runnable`'s stream machinery, yielding the final decode's tokens as the
stock chain's chunks (`streaming.Chunks`); `batch`, `abatch`, `with_config` and `|` come from
`Runnable` on top of them, and concurrent calls batch together on the session's engines.

An engine failure (an `EngineError`: unreachable server, prompt too long, ...) re-runs the
query on the original chain, so the caller gets the stock result or the stock exception type;
a stream falls back only while it has yielded nothing (after that, the error is raised).
"""

from __future__ import annotations

import itertools
from contextlib import aclosing, closing
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import patch_config

from accel.scope import WrappedRun, context_with, stock_call, wrapped_run
from accel.adapters.common.explain import explain_text
from accel.adapters.langchain.capture import Capture, Opaque, Step
from accel.adapters.langchain.streaming import Chunks, chat_result
from accel.engines.errors import EngineError


_wrap_ids = itertools.count()  # template keys: ids of dead wrappers are reused, counters are not


class WrappedRunnable(Runnable[Any, Any]):
    def __init__(self, original: Runnable, *, policy: str = "topology", disabled_passes: Iterable[str] = (), fallback: bool = True) -> None:
        from accel.session import get_session

        self.original = original
        self.name = original.get_name()
        self.fallback = fallback
        self._session = get_session(policy=policy)
        self._steps, graph, context = _capture(original, self._session)
        self._template = self._session.template(("langchain", next(_wrap_ids)), lambda: graph, context=context,
                                                disabled_passes=tuple(disabled_passes))
        self._chat_result = chat_result(self._template)

    # ---- schema: as the original --------------------------------------------------------

    @property
    def InputType(self) -> Any:  # noqa: N802 (LangChain's name)
        return self.original.InputType

    @property
    def OutputType(self) -> Any:  # noqa: N802
        return self.original.OutputType

    def get_input_schema(self, config: RunnableConfig | None = None) -> Any:
        return self.original.get_input_schema(config)

    def get_output_schema(self, config: RunnableConfig | None = None) -> Any:
        return self.original.get_output_schema(config)

    # ---- execution ----------------------------------------------------------------------

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._call_with_config(self._invoke, input, config, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self._acall_with_config(self._ainvoke, input, config, **kwargs)

    def _invoke(self, input: Any, run_manager: Any, config: RunnableConfig) -> Any:
        child = patch_config(config, callbacks=run_manager.get_child())
        try:
            with wrapped_run(self._new_run()):
                return self._session.run(self._template, {"input": input, "config": child})
        except EngineError:
            if not self.fallback:
                raise
            with stock_call():
                return self.original.invoke(input, child)

    async def _ainvoke(self, input: Any, run_manager: Any, config: RunnableConfig) -> Any:
        child = patch_config(config, callbacks=run_manager.get_child())
        try:
            with wrapped_run(self._new_run()):
                return await self._session.arun(self._template, {"input": input, "config": child})
        except EngineError:
            if not self.fallback:
                raise
            with stock_call():
                return await self.original.ainvoke(input, child)

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        # LangChain's wrapper does not close the generator it drives when it is closed itself
        # (it reports the GeneratorExit to the callbacks, which may keep its traceback and so
        # the generator alive): close ours here, so a `break` cancels the query at once.
        opened: list[Iterator[Any]] = []

        def transform(inputs: Iterator[Any], run_manager: Any, config: RunnableConfig) -> Iterator[Any]:
            opened.append(self._stream(inputs, run_manager, config))
            return opened[-1]

        try:
            yield from self._transform_stream_with_config(iter([input]), transform, config, **kwargs)
        finally:
            for generator in opened:
                generator.close()

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        async def one() -> AsyncIterator[Any]:
            yield input

        # closed explicitly: leaving early must cancel the query now, not when the GC gets to it
        async with aclosing(self._atransform_stream_with_config(one(), self._astream, config, **kwargs)) as chunks:
            async for chunk in chunks:
                yield chunk

    def _stream(self, inputs: Iterator[Any], run_manager: Any, config: RunnableConfig) -> Iterator[Any]:
        input = next(inputs)
        child = patch_config(config, callbacks=run_manager.get_child())
        chunks, started = Chunks(self._chat_result), False
        try:
            query = {"input": input, "config": child}
            with closing(self._session.stream(self._template, query, context=context_with(self._new_run()))) as items:
                for item in items:
                    for chunk in chunks.feed(item):
                        started = True
                        yield chunk
        except EngineError:
            if started or not self.fallback:
                raise
            stock = self.original.stream(input, child)
            with closing(stock):
                while (chunk := _stock_next(stock)) is not _END:
                    yield chunk

    async def _astream(self, inputs: AsyncIterator[Any], run_manager: Any, config: RunnableConfig) -> AsyncIterator[Any]:
        input = await anext(inputs)
        child = patch_config(config, callbacks=run_manager.get_child())
        chunks, started = Chunks(self._chat_result), False
        try:
            query = {"input": input, "config": child}
            async with aclosing(self._session.astream(self._template, query, context=context_with(self._new_run()))) as items:
                async for item in items:
                    for chunk in chunks.feed(item):
                        started = True
                        yield chunk
        except EngineError:
            if started or not self.fallback:
                raise
            async with aclosing(self.original.astream(input, child)) as stock:
                while (chunk := await _stock_anext(stock)) is not _END:
                    yield chunk

    def _new_run(self) -> WrappedRun:
        return WrappedRun(app=self.name, session=self._session)

    # ---- introspection ------------------------------------------------------------------

    def explain(self) -> str:
        """The components lowered or left opaque (and why), the passes and the e-graph."""
        return explain_text(f"accel.wrap({self.name}) [LangChain]", self._steps, self._template)

    @property
    def template(self) -> Any:
        return self._template

    def __repr__(self) -> str:
        return f"accel.wrap({self.original!r})"


_END = object()


def _stock_next(stream: Iterator[Any]) -> Any:
    """One step of the original chain's stream marked as a stock call (patched entry points
    inside stay stock); the mark is not held across the yield, where the consumer runs."""
    with stock_call():
        return next(stream, _END)


async def _stock_anext(stream: AsyncIterator[Any]) -> Any:
    with stock_call():
        return await anext(stream, _END)


def _capture(original: Runnable, session: Any) -> tuple[list[Step], Any, Any]:
    """Lower the chain; if lowering itself fails, the whole chain becomes one opaque node."""
    from accel.passes import PassContext

    capture = Capture(session)
    try:
        graph = capture.build(capture.lower(original, capture.input))
    except (Opaque, AttributeError, TypeError, ValueError, KeyError) as err:
        capture = Capture(session)
        graph = capture.build(capture.opaque(original, capture.input, f"capture failed ({type(err).__name__}: {err})"))
    context = PassContext()
    if len(capture.llm_engines) == 1:
        engine = session.get_engine(next(iter(capture.llm_engines)))
        context = PassContext(tokenize=engine.tokenize, render_chat=engine.render_chat, block_size=engine.block_size)
    return capture.report, graph, context
