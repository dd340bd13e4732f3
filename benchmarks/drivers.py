"""How the harness calls an app of each framework: one query, a stock batch, the answer text,
and a timer on every LLM call (the framework's own callbacks / instrumentation events)."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from accel.engines.errors import InvalidRequest

from .call_usage import CallUsage, from_langchain, from_llamaindex, request_digest


@dataclass
class LLMTimes:
    """(start, end, usage) of each LLM call: perf_counter seconds, and what it asked of the
    engine where its response said (`call_usage`)."""

    calls: list[tuple[float, float, CallUsage | None]] = field(default_factory=list)
    _open: dict[Any, tuple[float, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, key: Any, request: str = "") -> None:
        with self._lock:
            self._open[key] = (time.perf_counter(), request)

    def end(self, key: Any, usage: Callable[[str], CallUsage | None] | None = None) -> None:
        """`usage`: reads the call's usage, given its request digest."""
        ended = time.perf_counter()
        with self._lock:
            opened = self._open.pop(key, None)
        if opened is None:
            return
        began, request = opened
        read = usage(request) if usage is not None else None
        with self._lock:
            self.calls.append((began, ended, read))

    def _in_order(self) -> list[tuple[float, float, CallUsage | None]]:
        with self._lock:
            return sorted(self.calls, key=lambda call: call[:2])

    def durations(self) -> list[float]:
        return [end - start for start, end, _ in self._in_order()]

    def spans(self) -> list[tuple[float, float]]:
        """Each call's (start, end), in the order of `durations`."""
        return [(start, end) for start, end, _ in self._in_order()]

    def usage(self) -> list[CallUsage | None]:
        """Each call's usage, in the order of `durations`."""
        return [read for _, _, read in self._in_order()]


class Driver(Protocol):
    framework: str

    def call(self, app: Any, question: str) -> str: ...

    def batch(self, app: Any, questions: Sequence[str], concurrency: int) -> list[str | BaseException]: ...

    def timing(self) -> Any: ...

    def chunks(self, documents: Sequence[dict[str, Any]]) -> list[str]: ...

    def search(self, index: Any, vector: Sequence[float], k: int) -> Any: ...

    def close(self) -> None: ...


class LangChainDriver:
    """Apps take `{"question": q}` and return a string; stock concurrency is `batch` (a thread
    pool: PGVector over a sync connection has no async API)."""

    framework = "langchain"

    def close(self) -> None:
        """Nothing to release."""

    def chunks(self, documents: Sequence[dict[str, Any]]) -> list[str]:
        """The documents cut as the examples cut them (256 characters, overlap 30)."""
        from accel.examples.langchain.models import split_documents

        return [chunk.page_content for chunk in split_documents(documents)]

    def call(self, app: Any, question: str) -> str:
        return _text(app.invoke({"question": question}))

    def search(self, index: Any, vector: Sequence[float], k: int) -> Any:
        """One vector search on the run's PGVector store (for the critical-path bound)."""
        return index.similarity_search_by_vector(list(vector), k=k)

    def batch(self, app: Any, questions: Sequence[str], concurrency: int) -> list[str | BaseException]:
        results = app.batch([{"question": q} for q in questions], config={"max_concurrency": concurrency}, return_exceptions=True)
        return [r if isinstance(r, BaseException) else _text(r) for r in results]

    @contextmanager
    def timing(self) -> Iterator[LLMTimes]:
        """Times every chat/LLM call made while the block runs, in this context (a configure
        hook, so nested runnables and retrievers are covered without passing callbacks)."""
        times = LLMTimes()
        token = _langchain_timer().set(_LangChainTimer(times))
        try:
            yield times
        finally:
            _langchain_timer().reset(token)


@functools.cache
def _langchain_timer() -> ContextVar[Any]:
    """The context variable LangChain's configure hook reads; registered once per process."""
    from langchain_core.tracers.context import register_configure_hook

    var: ContextVar[Any] = ContextVar("accel_bench_llm_timer", default=None)
    register_configure_hook(var, inheritable=True)
    return var


def _LangChainTimer(times: LLMTimes) -> Any:  # noqa: N802 - builds a handler class lazily
    from langchain_core.callbacks import BaseCallbackHandler

    class Timer(BaseCallbackHandler):
        def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, **kw: Any) -> None:
            times.start(run_id, request_digest(messages, kw.get("invocation_params")))

        def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: Any, **kw: Any) -> None:
            times.start(run_id, request_digest(prompts, kw.get("invocation_params")))

        def on_llm_end(self, response: Any, *, run_id: Any, **kw: Any) -> None:
            times.end(run_id, lambda request: from_langchain(response, request))

    return Timer()


class LlamaIndexDriver:
    """Apps are query engines, or chat engines (one query = one conversation of several turns);
    stock concurrency is `asyncio.gather` over `aquery` / the conversations' `achat`s, always on
    this driver's one loop (PGVectorStore's async engine is bound to the loop it first ran on)."""

    framework = "llamaindex"

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self.loop_busy_s: float | None = None
        """Wall seconds the driver's loop was not waiting for I/O during the last `batch`
        (its code, and the GIL it waited for): every conversation's own code (prompt packing,
        token counting, the SDK's request building where accel does not take it over) runs on
        this one thread, so that batch took at least this long."""

    def close(self) -> None:
        self._loop.close()

    def chunks(self, documents: Sequence[dict[str, Any]]) -> list[str]:
        """The documents cut as the examples cut them (256 tokens, overlap 30)."""
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.core.schema import Document

        from accel.examples.llamaindex.models import CHUNK_OVERLAP, CHUNK_SIZE

        splitter = SentenceSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
        return [node.get_content() for node in splitter.get_nodes_from_documents([Document(text=d["text"]) for d in documents])]

    def search(self, index: Any, vector: Sequence[float], k: int) -> Any:
        """One vector search on the run's PGVectorStore (for the critical-path bound)."""
        from llama_index.core.vector_stores.types import VectorStoreQuery

        return index.vector_store.query(VectorStoreQuery(query_embedding=list(vector), similarity_top_k=k))

    def call(self, app: Any, question: str) -> str:
        if _is_chat_engine(app):
            return _conversation(app, question)
        return _text(app.query(question))

    def batch(self, app: Any, questions: Sequence[str], concurrency: int) -> list[str | BaseException]:
        async def run_all() -> list[Any]:
            gate = asyncio.Semaphore(concurrency)

            async def one(q: str) -> Any:
                async with gate:
                    if _is_chat_engine(app):
                        return await _aconversation(app, q)
                    return await app.aquery(q)

            return await asyncio.gather(*(one(q) for q in questions), return_exceptions=True)

        with _waiting(self._loop) as waited:
            began = time.perf_counter()
            results = self._loop.run_until_complete(run_all())
            self.loop_busy_s = time.perf_counter() - began - waited()
        return [r if isinstance(r, BaseException) else _text(r) for r in results]

    @contextmanager
    def timing(self) -> Iterator[LLMTimes]:
        """Times LLM completion/chat calls through the root instrumentation dispatcher."""
        import llama_index.core.instrumentation as instrument
        from llama_index.core.instrumentation.event_handlers import BaseEventHandler
        from llama_index.core.instrumentation.events.llm import (
            LLMChatEndEvent, LLMChatStartEvent, LLMCompletionEndEvent, LLMCompletionStartEvent,
        )

        times = LLMTimes()

        class Timer(BaseEventHandler):
            @classmethod
            def class_name(cls) -> str:
                return "AccelBenchLLMTimer"

            def handle(self, event: Any, **kwargs: Any) -> None:
                if isinstance(event, LLMChatStartEvent):
                    times.start(event.span_id, request_digest(event.messages, event.additional_kwargs, event.model_dict))
                elif isinstance(event, LLMCompletionStartEvent):
                    times.start(event.span_id, request_digest(event.prompt, event.additional_kwargs, event.model_dict))
                elif isinstance(event, (LLMCompletionEndEvent, LLMChatEndEvent)):
                    times.end(event.span_id, lambda request: from_llamaindex(event.response, request))

        dispatcher = instrument.get_dispatcher()
        handler = Timer()
        dispatcher.add_event_handler(handler)
        try:
            yield times
        finally:
            dispatcher.event_handlers.remove(handler)


@contextmanager
def _waiting(loop: asyncio.AbstractEventLoop, clock: Callable[[], float] = time.perf_counter) -> Iterator[Callable[[], float]]:
    """Seconds `loop` spends in its selector (waiting for I/O or a timer) while the block runs;
    yields a reader. A loop without a selector (not a selector loop) reads 0. `clock` is
    injectable, so a test can drive a fake selector on a virtual clock."""
    selector = getattr(loop, "_selector", None)
    waited = [0.0]
    if selector is None:
        yield lambda: 0.0
        return
    select = selector.select

    def timed(timeout: float | None = None) -> Any:
        began = clock()
        try:
            return select(timeout)
        finally:
            waited[0] += clock() - began

    selector.select = timed
    try:
        yield lambda: waited[0]
    finally:
        del selector.select  # the instance attribute goes; the class's method is back


def _is_chat_engine(app: Any) -> bool:
    from llama_index.core.chat_engine.types import BaseChatEngine

    return isinstance(app, BaseChatEngine)


def _conversation(app: Any, question: str) -> str:
    """A chat app's query is one conversation on an engine of its own: the question, then the
    example's follow-ups, turn after turn (`accel.examples.llamaindex.chat`)."""
    from accel.examples.llamaindex.chat import new_conversation, turns

    engine = new_conversation(app)
    return "\n".join(engine.chat(message).response for message in turns(question))


async def _aconversation(app: Any, question: str) -> str:
    from accel.examples.llamaindex.chat import new_conversation, turns

    engine = new_conversation(app)
    return "\n".join([(await engine.achat(message)).response for message in turns(question)])


def _text(result: Any) -> str:
    """The answer as text: a string, a message's content, a LlamaIndex Response, or a graph's
    `{"answer": ...}` (or, as LangGraph's RAG tutorials name it, `{"generation": ...}`) state."""
    if isinstance(result, str):
        return result
    for key in ("answer", "generation"):
        if isinstance(result, dict) and isinstance(result.get(key), str):
            return result[key]
    for attr in ("response", "content"):
        value = getattr(result, attr, None)
        if isinstance(value, str):
            return value
    return str(result)


DRIVERS: dict[str, Callable[[], Driver]] = {"langchain": LangChainDriver, "llamaindex": LlamaIndexDriver}


def driver_for(framework: str) -> Driver:
    if framework not in DRIVERS:
        raise InvalidRequest("bench", f"unknown framework {framework!r}", f"use one of {sorted(DRIVERS)}")
    return DRIVERS[framework]()
