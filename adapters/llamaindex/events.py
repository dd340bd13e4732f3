"""LlamaIndex instrumentation for a wrapped query engine: the spans and events stock code
dispatches, fired from accel's node results, through the query's trace (`query_trace`):

    retriever's first node   `retrieve` span, RetrievalStartEvent, RETRIEVE
    Embed request / result   `get_query_embedding` span, EmbeddingStart/EndEvent, EMBEDDING per query text
    retriever's output node  RetrievalEndEvent (its nodes, before postprocessing)
    rerank pairs / top_n     `_postprocess_nodes` span, RERANKING (SentenceTransformerRerank
                             fires no instrumentation event)
    Prefill / Decode         `predict` and `complete` / `chat` spans, LLMPredict* and
                             LLMCompletion* / LLMChat* events, TEMPLATING and LLM (query
                             generation: complete only)

Synthesis spans and events are opened by the synthesis plan (a node of the query's graph) and
closed by the query engine with the response. Span ids, parents, bound arguments and results
are those the stock methods' spans would carry, so span handlers keyed on span ids (e.g.
OpenInference's) see one coherent tree; the callback events (upper case above, only where a
legacy callback handler listens: `callbacks`) carry stock's payloads, nested as stock nests
them. Nothing is built when no handler listens.
"""

from __future__ import annotations

import inspect
import uuid
from collections import ChainMap
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import llama_index.core.instrumentation as instrument
from llama_index.core.callbacks import CBEventType, EventPayload
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
from llama_index.core.instrumentation.events.synthesis import (
    GetResponseEndEvent,
    GetResponseStartEvent,
    SynthesizeEndEvent,
    SynthesizeStartEvent,
)
from llama_index.core.schema import QueryBundle

from accel.adapters.common.classes import is_exactly
from accel.ir import DecodeOp

from .query_trace import QueryTrace, Span, current_trace

_DECORATED = "__dispatcher_span_decorated__"  # a method LlamaIndex traces (DispatcherSpanMixin)
_ASYNC_VIA_SYNC = (("llama_index.embeddings.huggingface.base", "HuggingFaceEmbedding"),)  # async query embedding = the sync one in a worker thread


# ---- retrieval -------------------------------------------------------------------------------


def retrieval_started(retriever: Any, key: Hashable = "retrieve", query: str | None = None,
                      parent: tuple[Hashable, ...] = ()) -> None:
    """`retriever.retrieve(bundle)` begins: the query's own bundle, or a fusion sub-query's."""
    trace = current_trace()
    if trace is None or (key == "retrieve" and not trace.retrieval):
        return
    bundle = trace.bundle if query is None else QueryBundle(query_str=query)
    span = trace.enter(retriever, "retrieve", (bundle,), trace.parent(*parent),
                       callback=(retriever.callback_manager, CBEventType.RETRIEVE, {EventPayload.QUERY_STR: bundle.query_str}))
    trace.keep(key, span)
    trace.event(span, RetrievalStartEvent, str_or_query_bundle=bundle)


def retrieval_ended(nodes: list[Any], key: Hashable = "retrieve") -> list[Any]:
    trace = current_trace()
    span = trace.take(key) if trace is not None else None
    if span is not None:
        trace.event(span, RetrievalEndEvent, str_or_query_bundle=span.bound.args[0], nodes=nodes)
        trace.exit(span, nodes, {EventPayload.NODES: nodes})
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
        trace = current_trace()
        if trace is not None:
            if self.sub is not None:
                retrieval_started(self.sub[0], self._parent(text), text, parent=("retrieve",))
            model = self.embed_model.to_payload()
            span = trace.enter(self.embed_model, "get_query_embedding", (text,), trace.parent(self._parent(text)),
                               callback=(self.embed_model.callback_manager, CBEventType.EMBEDDING, {EventPayload.SERIALIZED: model}))
            trace.keep(("embed", self._parent(text)), span)
            trace.event(span, EmbeddingStartEvent, model_dict=model)
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
        trace = current_trace()
        if trace is not None:
            for text, vector in zip(values[self.port], vectors, strict=True):
                while (inner := trace.take(("embed-model", self._parent(text)))) is not None:  # innermost first
                    trace.exit(inner, vector)
                span = trace.take(("embed", self._parent(text)))
                if span is not None:
                    trace.event(span, EmbeddingEndEvent, chunks=[text], embeddings=[vector])
                    trace.exit(span, vector, {EventPayload.CHUNKS: [text], EventPayload.EMBEDDINGS: [vector]})
        return list(vectors)


def rerank_started(postprocessor: Any, nodes: list[Any]) -> None:
    trace = current_trace()
    if trace is not None:
        # SentenceTransformerRerank's event (the reranker accel lowers)
        callback = (postprocessor.callback_manager, CBEventType.RERANKING,
                    {EventPayload.NODES: nodes, EventPayload.MODEL_NAME: postprocessor.model,
                     EventPayload.QUERY_STR: trace.bundle.query_str, EventPayload.TOP_K: postprocessor.top_n})
        span = trace.enter(postprocessor, "_postprocess_nodes", (nodes,), trace.root, {"query_bundle": trace.bundle}, callback)
        trace.keep(("post", id(postprocessor)), span)


def rerank_ended(postprocessor: Any, nodes: list[Any]) -> list[Any]:
    trace = current_trace()
    span = trace.take(("post", id(postprocessor))) if trace is not None else None
    if span is not None:
        trace.exit(span, nodes, {EventPayload.NODES: nodes})
    return nodes


# ---- synthesis -------------------------------------------------------------------------------


def synthesis_started(synthesizer: Any, bundle: QueryBundle, nodes: list[Any]) -> None:
    """`synthesize` and its `get_response` begin; the LLM calls of the graph runs that follow
    nest under the innermost `get_response`."""
    from llama_index.core.schema import MetadataMode

    trace = current_trace()
    if trace is None:
        return
    texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]
    span = trace.enter(synthesizer, "synthesize", (bundle, nodes), trace.root,
                       callback=(synthesizer.callback_manager, CBEventType.SYNTHESIZE, {EventPayload.QUERY_STR: bundle.query_str}))
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

    trace = current_trace()
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
    trace = current_trace()
    if trace is not None:
        _open_response(trace, synthesizer, query, texts)


def synthesis_ended(bundle: QueryBundle, response: Any) -> None:
    trace = current_trace()
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
        trace.exit(span, response, {EventPayload.RESPONSE: response})


def synthesis_abandoned(err: BaseException) -> None:
    """The plan did not fit the query: stock synthesis answers it, with its own spans."""
    trace = current_trace()
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

    trace = current_trace()
    if trace is None:
        return
    parent_id = trace.parent(parent)
    predict = None
    if template is not None:
        predict = trace.enter(llm, "predict", (template,), parent_id, template_args)
        trace.event(predict, LLMPredictStartEvent, template=template, template_args=template_args)
        trace.leaf(predict, (llm.callback_manager, CBEventType.TEMPLATING, _template_data(llm, template, template_args or {})))
        parent_id = predict.id
    model = llm.to_payload()
    if isinstance(prompt, str) or template is None:
        text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
        kwargs = {"formatted": True} if template is not None else {}
        # OpenAILike.complete consumes `formatted` before OpenAI's, which reports the call
        reported = {} if is_exactly(llm, ("llama_index.llms.openai_like.base", "OpenAILike")) else kwargs
        call = trace.enter(llm, "complete", (text,), parent_id, kwargs,
                           (llm.callback_manager, CBEventType.LLM, {EventPayload.PROMPT: text, EventPayload.ADDITIONAL_KWARGS: reported,
                                                                    EventPayload.SERIALIZED: model}))
        trace.event(call, LLMCompletionStartEvent, prompt=text, additional_kwargs=reported, model_dict=model)
        trace.keep(("llm", _key(prompt)), (predict, call, text))
    else:
        messages = [ChatMessage(role=m["role"], content=m["content"]) for m in prompt]
        call = trace.enter(llm, "chat", (messages,), parent_id,
                           callback=(llm.callback_manager, CBEventType.LLM, {EventPayload.MESSAGES: messages, EventPayload.ADDITIONAL_KWARGS: {},
                                                                             EventPayload.SERIALIZED: model}))
        trace.event(call, LLMChatStartEvent, messages=messages, additional_kwargs={}, model_dict=model)
        trace.keep(("llm", _key(prompt)), (predict, call, messages))


def llm_ended(prompt: Any, text: str, generation: Any = None) -> None:
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse

    trace = current_trace()
    found = trace.take(("llm", _key(prompt))) if trace is not None else None
    if found is None:
        return
    predict, call, sent = found
    chat = not isinstance(sent, str)
    raw, counts = _raw_response(call.instance, generation, chat)
    if not chat:
        response: Any = CompletionResponse(text=text, raw=raw, additional_kwargs=counts)
        trace.event(call, LLMCompletionEndEvent, prompt=sent, response=response)
        ended = {EventPayload.PROMPT: sent, EventPayload.COMPLETION: response}
    else:
        response = ChatResponse(message=ChatMessage(role="assistant", content=text), raw=raw, additional_kwargs=counts)
        trace.event(call, LLMChatEndEvent, messages=sent, response=response)
        ended = {EventPayload.MESSAGES: sent, EventPayload.RESPONSE: response}
    trace.exit(call, response, ended)
    if predict is not None:
        trace.event(predict, LLMPredictEndEvent, output=text)
        trace.exit(predict, text)


def _template_data(llm: Any, template: Any, template_args: dict[str, Any]) -> dict[str, Any]:
    """The TEMPLATING payload of `llm.predict(template, **template_args)` (`LLM._log_template_data`)."""
    variables = {k: v for k, v in ChainMap(template.kwargs, template_args).items() if k in template.template_vars}
    return {EventPayload.TEMPLATE: template.get_template(llm=llm), EventPayload.TEMPLATE_VARS: variables,
            EventPayload.SYSTEM_PROMPT: llm.system_prompt, EventPayload.QUERY_WRAPPER_PROMPT: llm.query_wrapper_prompt}


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
