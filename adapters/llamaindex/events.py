"""LlamaIndex instrumentation for a wrapped query engine: the spans and events stock code
dispatches, fired from accel's node results.

A `QueryTrace` lives for one query. The query engine sets it in a contextvar, which the
session's task for that query inherits (and blocking nodes too: the runtime runs them in the
query's context), so the lowered graph's nodes find it and report as they run:

    retriever's first node   `retrieve` span, RetrievalStartEvent
    Embed request / result   `get_query_embedding` span, EmbeddingStart/EndEvent per query text
    retriever's output node  RetrievalEndEvent (its nodes, before postprocessing)
    rerank pairs / top_n     `_postprocess_nodes` span (SentenceTransformerRerank fires no events)
    Prefill / Decode         `predict` and `complete` / `chat` spans, LLMPredict* and
                             LLMCompletion* / LLMChat* events (query generation: complete only)

Synthesis spans and events are opened by the synthesis plan (a node of the query's graph) and
closed by the query engine with the response. Span
ids, parents, bound arguments and results are those the stock methods' spans would carry, on
the dispatchers of the modules defining them, so span handlers keyed on span ids (e.g.
OpenInference's) see one coherent tree. Stock code run as-is inside a node nests under the
span it would have run in (`under`). Nothing is built when no handler listens.
"""

from __future__ import annotations

import inspect
import threading
import uuid
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import llama_index.core.instrumentation as instrument
from llama_index.core.instrumentation import NullEventHandler, NullSpanHandler
from llama_index.core.instrumentation.dispatcher import active_instrument_tags
from llama_index.core.instrumentation.events.embedding import EmbeddingEndEvent, EmbeddingStartEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
    LLMPredictEndEvent,
    LLMPredictStartEvent,
)
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent, RetrievalStartEvent
from llama_index.core.instrumentation.events.span import SpanDropEvent
from llama_index.core.instrumentation.events.synthesis import (
    GetResponseEndEvent,
    GetResponseStartEvent,
    SynthesizeEndEvent,
    SynthesizeStartEvent,
)
from llama_index.core.instrumentation.span import active_span_id
from llama_index.core.schema import QueryBundle

from accel.adapters.common.classes import is_exactly
from accel.ir import DecodeOp

_ASYNC_TWINS = frozenset({"retrieve", "get_query_embedding", "synthesize", "get_response", "predict", "complete", "chat"})
_DECORATED = "__dispatcher_span_decorated__"  # a method LlamaIndex traces (DispatcherSpanMixin)
_ASYNC_VIA_SYNC = (("llama_index.embeddings.huggingface.base", "HuggingFaceEmbedding"),)  # async query embedding = the sync one in a worker thread
_current: ContextVar[QueryTrace | None] = ContextVar("accel_llamaindex_trace", default=None)


@dataclass(frozen=True)
class Span:
    """An open synthetic span: what its exit or drop must repeat to its handlers."""

    id: str
    dispatcher: Any
    bound: inspect.BoundArguments
    instance: Any


class QueryTrace:
    """The synthetic spans of one query: those still open (dropped if the query fails) and
    those a later hook closes, found by key (the latest kept under a key comes first)."""

    def __init__(self, bundle: QueryBundle, asynchronous: bool, root: str | None, *, retrieval: bool = True) -> None:
        self.bundle = bundle
        self.asynchronous = asynchronous
        self.root = root
        self.retrieval = retrieval  # False: the retriever's own `retrieve` reports itself (a lowered retriever)
        self._open: dict[str, Span] = {}
        self._keyed: dict[Hashable, list[Any]] = {}
        self._lock = threading.Lock()

    def enter(self, instance: Any, method: str, args: tuple[Any, ...], parent: str | None,
              kwargs: dict[str, Any] | None = None) -> Span:
        """Open the span `instance.method(*args, **kwargs)` would open (its async twin in
        an async query)."""
        if self.asynchronous and method in _ASYNC_TWINS:
            method = f"a{method}"
        fn = getattr(instance, method)
        dispatcher = instrument.get_dispatcher(fn.__module__)
        span = Span(f"{type(instance).__name__}.{method}-{uuid.uuid4()}", dispatcher,
                    inspect.signature(fn).bind(*args, **(kwargs or {})), instance)
        self.open_span(span, parent)
        return span

    def open_span(self, span: Span, parent: str | None) -> None:
        span.dispatcher.span_enter(id_=span.id, bound_args=span.bound, instance=span.instance, parent_id=parent,
                                   tags=active_instrument_tags.get())
        with self._lock:
            self._open[span.id] = span

    def exit(self, span: Span, result: Any) -> None:
        with self._lock:
            if self._open.pop(span.id, None) is None:
                return
        span.dispatcher.span_exit(id_=span.id, bound_args=span.bound, instance=span.instance, result=result)

    def drop(self, span: Span, err: BaseException | None) -> None:
        with self._lock:
            if self._open.pop(span.id, None) is None:
                return
        if err is not None:
            span.dispatcher.event(SpanDropEvent(span_id=span.id, err_str=str(err)))
        span.dispatcher.span_drop(id_=span.id, bound_args=span.bound, instance=span.instance, err=err)

    def parent(self, *keys: Hashable) -> str | None:
        """The id of the latest span kept under the first of `keys` holding one, else the
        query's root span."""
        for key in keys:
            span = self.peek(key)
            if span is not None:
                return span.id
        return self.root

    def event(self, span: Span, event: type, **fields: Any) -> None:
        span.dispatcher.event(event(span_id=span.id, **fields))

    def keep(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._keyed.setdefault(key, []).append(value)

    def peek(self, key: Hashable) -> Any:
        with self._lock:
            found = self._keyed.get(key)
            return found[-1] if found else None

    def take(self, key: Hashable) -> Any:
        with self._lock:
            found = self._keyed.get(key)
            return found.pop() if found else None

    def close(self, err: BaseException | None) -> None:
        """Drop what is still open, innermost first (a failed or abandoned query)."""
        with self._lock:
            spans = list(self._open.values())
            self._keyed.clear()
        for span in reversed(spans):
            self.drop(span, err)


def listening() -> bool:
    """Whether any dispatcher has a handler that is not a null one."""
    return any(not isinstance(h, (NullEventHandler, NullSpanHandler))
               for d in instrument.root_manager.dispatchers.values() for h in (*d.event_handlers, *d.span_handlers))


@contextmanager
def traced(bundle: QueryBundle, *, asynchronous: bool, retrieval: bool = True) -> Iterator[None]:
    """Trace the query run inside, under the caller's active span (the engine's `_query`).
    `retrieval=False`: the top-level retriever's span and events are stock code's own."""
    if not listening():
        yield
        return
    trace = QueryTrace(bundle, asynchronous, active_span_id.get(), retrieval=retrieval)
    token = _current.set(trace)
    try:
        yield
    except BaseException as err:
        trace.close(err)
        raise
    finally:
        _current.reset(token)
    trace.close(None)


@contextmanager
def under(key: Hashable) -> Iterator[None]:
    """Stock code run as-is nests under the synthetic span `key` (e.g. an opaque embedding
    inside a lowered retriever)."""
    trace = _current.get()
    span = trace.peek(key) if trace is not None else None
    if span is None:
        yield
        return
    token = active_span_id.set(span.id)
    try:
        yield
    finally:
        active_span_id.reset(token)


# ---- retrieval -------------------------------------------------------------------------------


def retrieval_started(retriever: Any, key: Hashable = "retrieve", query: str | None = None,
                      parent: tuple[Hashable, ...] = ()) -> None:
    """`retriever.retrieve(bundle)` begins: the query's own bundle, or a fusion sub-query's."""
    trace = _current.get()
    if trace is None or (key == "retrieve" and not trace.retrieval):
        return
    bundle = trace.bundle if query is None else QueryBundle(query_str=query)
    span = trace.enter(retriever, "retrieve", (bundle,), trace.parent(*parent))
    trace.keep(key, span)
    trace.event(span, RetrievalStartEvent, str_or_query_bundle=bundle)


def retrieval_ended(nodes: list[Any], key: Hashable = "retrieve") -> list[Any]:
    trace = _current.get()
    span = trace.take(key) if trace is not None else None
    if span is not None:
        trace.event(span, RetrievalEndEvent, str_or_query_bundle=span.bound.args[0], nodes=nodes)
        trace.exit(span, nodes)
    return nodes


@dataclass(frozen=True)
class EmbedHooks:
    """`ItemsOp` hooks of a query-embedding node: each text's `get_query_embedding` span
    opens when its request is made and closes with its vector. A fusion sub-retriever's
    (`sub` = its index) first opens that query's `retrieve` span."""

    embed_model: Any
    make_request: Callable[[str], Any]
    port: str
    sub: tuple[Any, int] | None = None

    def _parent(self, text: str) -> Hashable:
        return ("sub", self.sub[1], text) if self.sub is not None else "retrieve"

    def request(self, text: str, _values: dict[str, Any]) -> Any:
        trace = _current.get()
        if trace is not None:
            if self.sub is not None:
                retrieval_started(self.sub[0], self._parent(text), text, parent=("retrieve",))
            span = trace.enter(self.embed_model, "get_query_embedding", (text,), trace.parent(self._parent(text)))
            trace.keep(("embed", self._parent(text)), span)
            trace.event(span, EmbeddingStartEvent, model_dict=self.embed_model.to_payload())
            self._open_private(trace, span, text)
        return self.make_request(text)

    def _open_private(self, trace: QueryTrace, span: Span, text: str) -> None:
        """The model's own `_get_query_embedding` span(s) inside `get_query_embedding`, where
        stock traces them (HuggingFaceEmbedding's async one runs the sync one in a thread)."""
        cls, parent = type(self.embed_model), span.id
        names = ["_aget_query_embedding"] if trace.asynchronous else []
        if not trace.asynchronous or is_exactly(cls, *_ASYNC_VIA_SYNC):
            names.append("_get_query_embedding")
        for name in names:
            if hasattr(getattr(cls, name, None), _DECORATED):
                inner = Span(f"{cls.__name__}.{name}-{uuid.uuid4()}", instrument.get_dispatcher(getattr(cls, name).__module__),
                             inspect.signature(getattr(self.embed_model, name)).bind(text), self.embed_model)
                trace.open_span(inner, parent)
                trace.keep(("embed-model", self._parent(text)), inner)
                parent = inner.id

    def result(self, values: dict[str, Any], vectors: list[Any]) -> list[Any]:
        trace = _current.get()
        if trace is not None:
            for text, vector in zip(values[self.port], vectors, strict=True):
                while (inner := trace.take(("embed-model", self._parent(text)))) is not None:  # innermost first
                    trace.exit(inner, vector)
                span = trace.take(("embed", self._parent(text)))
                if span is not None:
                    trace.event(span, EmbeddingEndEvent, chunks=[text], embeddings=[vector])
                    trace.exit(span, vector)
        return list(vectors)


def rerank_started(postprocessor: Any, nodes: list[Any]) -> None:
    trace = _current.get()
    if trace is not None:
        span = trace.enter(postprocessor, "_postprocess_nodes", (nodes,), trace.root, {"query_bundle": trace.bundle})
        trace.keep(("post", id(postprocessor)), span)


def rerank_ended(postprocessor: Any, nodes: list[Any]) -> list[Any]:
    trace = _current.get()
    span = trace.take(("post", id(postprocessor))) if trace is not None else None
    if span is not None:
        trace.exit(span, nodes)
    return nodes


# ---- synthesis -------------------------------------------------------------------------------


def synthesis_started(synthesizer: Any, bundle: QueryBundle, nodes: list[Any]) -> None:
    """`synthesize` and its `get_response` begin; the LLM calls of the graph runs that follow
    nest under the innermost `get_response`."""
    from llama_index.core.schema import MetadataMode

    trace = _current.get()
    if trace is None:
        return
    texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]
    span = trace.enter(synthesizer, "synthesize", (bundle, nodes), trace.root)
    trace.keep("synthesize", span)
    trace.event(span, SynthesizeStartEvent, query=bundle)
    _open_response(trace, synthesizer, bundle.query_str, texts)


def _open_response(trace: QueryTrace, synthesizer: Any, query: str, texts: list[str]) -> Span:
    """A `get_response` span; the synthesizer's own repacking code, run by the plan, nests
    under the latest one (`under("get_response")`), as in stock."""
    span = trace.enter(synthesizer, "get_response", (query, texts), trace.parent("get_response", "synthesize"))
    trace.keep("get_response", span)
    return span


def response_started(synthesizer: Any, query: str, chunks: list[str]) -> None:
    """Refine's loop begins on `chunks`: compact's, once compacted, in its nested `get_response`
    (the `Refine` one it calls), as stock's."""
    from llama_index.core.response_synthesizers import CompactAndRefine

    trace = _current.get()
    if trace is None:
        return
    if isinstance(synthesizer, CompactAndRefine):
        span = _open_response(trace, synthesizer, query, chunks)
    else:
        span = trace.peek("get_response")
    trace.keep("response", span)
    trace.event(span, GetResponseStartEvent, query_str=query, text_chunks=chunks)


def level_started(synthesizer: Any, query: str, texts: list[str]) -> None:
    """tree_summarize summarises the summaries of a level in a nested `get_response`."""
    trace = _current.get()
    if trace is not None:
        _open_response(trace, synthesizer, query, texts)


def synthesis_ended(bundle: QueryBundle, response: Any) -> None:
    trace = _current.get()
    if trace is None:
        return
    started = trace.take("response")
    if started is not None:
        trace.event(started, GetResponseEndEvent)
    while (inner := trace.take("get_response")) is not None:
        trace.exit(inner, getattr(response, "response", response))
    span = trace.take("synthesize")
    if span is not None:
        trace.event(span, SynthesizeEndEvent, query=bundle, response=response)
        trace.exit(span, response)


def synthesis_abandoned(err: BaseException) -> None:
    """The plan did not fit the query: stock synthesis answers it, with its own spans."""
    trace = _current.get()
    if trace is not None:
        trace.take("response")
        for key in ("get_response", "synthesize"):
            while (span := trace.take(key)) is not None:
                trace.drop(span, err)


def _key(prompt: Any) -> Hashable:
    return prompt if isinstance(prompt, str) else tuple((m["role"], m["content"]) for m in prompt)


def llm_started(llm: Any, prompt: Any, *, template: Any = None, template_args: dict[str, Any] | None = None,
                parent: Hashable = "get_response") -> None:
    """An LLM call's request is ready: `llm.predict(template, **template_args)` (synthesis) or
    `llm.complete(prompt)` (query generation, no template) with the rendered `prompt`."""
    from llama_index.core.base.llms.types import ChatMessage

    trace = _current.get()
    if trace is None:
        return
    parent_id = trace.parent(parent)
    predict = None
    if template is not None:
        predict = trace.enter(llm, "predict", (template,), parent_id, template_args)
        trace.event(predict, LLMPredictStartEvent, template=template, template_args=template_args)
        parent_id = predict.id
    model = llm.to_payload()
    if isinstance(prompt, str) or template is None:
        text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
        kwargs = {"formatted": True} if template is not None else {}
        call = trace.enter(llm, "complete", (text,), parent_id, kwargs)
        # OpenAILike.complete consumes `formatted` before OpenAI's, which reports the call
        reported = {} if is_exactly(llm, ("llama_index.llms.openai_like.base", "OpenAILike")) else kwargs
        trace.event(call, LLMCompletionStartEvent, prompt=text, additional_kwargs=reported, model_dict=model)
        trace.keep(("llm", _key(prompt)), (predict, call, text))
    else:
        messages = [ChatMessage(role=m["role"], content=m["content"]) for m in prompt]
        call = trace.enter(llm, "chat", (messages,), parent_id)
        trace.event(call, LLMChatStartEvent, messages=messages, additional_kwargs={}, model_dict=model)
        trace.keep(("llm", _key(prompt)), (predict, call, messages))


def llm_ended(prompt: Any, text: str, generation: Any = None) -> None:
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse

    trace = _current.get()
    found = trace.take(("llm", _key(prompt))) if trace is not None else None
    if found is None:
        return
    predict, call, sent = found
    chat = not isinstance(sent, str)
    raw, counts = _raw_response(call.instance, generation, chat)
    if not chat:
        response: Any = CompletionResponse(text=text, raw=raw, additional_kwargs=counts)
        trace.event(call, LLMCompletionEndEvent, prompt=sent, response=response)
    else:
        response = ChatResponse(message=ChatMessage(role="assistant", content=text), raw=raw, additional_kwargs=counts)
        trace.event(call, LLMChatEndEvent, messages=sent, response=response)
    trace.exit(call, response)
    if predict is not None:
        trace.event(predict, LLMPredictEndEvent, output=text)
        trace.exit(predict, text)


def _raw_response(llm: Any, generation: Any, chat: bool) -> tuple[Any, dict[str, Any]]:
    """(`raw`, `additional_kwargs`) of the LLM's response as its OpenAI client makes them: the
    SDK's response object (rebuilt from the server's fields) and the token counts it reports
    (`_get_response_token_counts`), what handlers such as OpenInference's read token usage from."""
    from accel.adapters.common.openai_response import rebuilt_response

    if generation is None or getattr(generation, "response", None) is None:
        return None, {}
    raw = rebuilt_response(generation, chat=chat)
    count = getattr(llm, "_get_response_token_counts", None)
    return raw, (count(raw) if count is not None else {})


@dataclass(frozen=True)
class PredictDecodeOp(DecodeOp):
    """A synthesis Decode: stock's decode, whose finished text also closes its LLM call's
    spans and events (opened by its Prefill)."""

    def output(self, values: dict[str, Any], results: list[Any]) -> Any:
        text = super().output(values, results)
        llm_ended(values[self.port], text, results[0])
        return text
