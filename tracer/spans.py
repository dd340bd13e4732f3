"""OpenTelemetry spans for queries and primitives, through the standard API only.

Each query is one span; each primitive execution is a child span carrying what explains its
latency: the engine, the batch it rode in, how long it queued, and token counts for LLM calls.
Any exporter configured on the tracer provider (OTLP, console, in-memory) receives them; with no
SDK configured the API hands out non-recording spans and the attribute work is skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

TRACER_NAME = "accel"

QUERY_ID = "accel.query_id"
NODE = "accel.node"
KIND = "accel.kind"
ENGINE = "accel.engine"
BATCH_SIZE = "accel.batch_size"
BATCHES = "accel.batches"
QUEUE_WAIT_S = "accel.queue_wait_s"
REQUESTS = "accel.requests"
TOKENS = "accel.tokens"
PROMPT_TOKENS = "accel.prompt_tokens"
COMPLETION_TOKENS = "accel.completion_tokens"
CACHED_TOKENS = "accel.cached_tokens"
ITEMS = "accel.items"


_provider: dict[str, trace.TracerProvider | None] = {"default": None}


def use_tracer_provider(provider: trace.TracerProvider | None) -> None:
    """The provider accel's spans go to when a runtime names none (an instrumentor's
    `tracer_provider`); None means OpenTelemetry's global provider."""
    _provider["default"] = provider


def current_tracer_provider() -> trace.TracerProvider | None:
    """The provider `use_tracer_provider` set (None: OpenTelemetry's global one), so a caller
    that sets its own for a while can put this one back."""
    return _provider["default"]


def get_tracer(provider: trace.TracerProvider | None = None) -> trace.Tracer:
    """The "accel" tracer from `provider`, else from `use_tracer_provider`'s, else from the
    global provider."""
    provider = provider if provider is not None else _provider["default"]
    if provider is not None:
        return provider.get_tracer(TRACER_NAME)
    return trace.get_tracer(TRACER_NAME)


@contextmanager
def query_span(tracer: trace.Tracer, query_id: str, **attributes: Any) -> Iterator[otel_context.Context]:
    """A span for one query; yields the context its primitive spans must be parented to
    (node tasks start from other nodes' tasks, so the parent is passed explicitly)."""
    attrs = {QUERY_ID: query_id, **{f"accel.{k}": v for k, v in attributes.items() if v is not None}}
    with tracer.start_as_current_span("accel.query", attributes=attrs) as span:
        yield trace.set_span_in_context(span)


@contextmanager
def primitive_span(
    tracer: trace.Tracer | None,
    parent: otel_context.Context | None,
    *,
    query_id: str,
    node: str,
    kind: str,
    engine: str | None,
) -> Iterator[trace.Span]:
    """A span for one primitive execution (the node, from ready to value). `tracer=None`
    means the query span is not recorded (no SDK, or sampled out): then nothing is created."""
    if tracer is None:
        yield trace.INVALID_SPAN
        return
    attrs = {QUERY_ID: query_id, NODE: node, KIND: kind}
    if engine is not None:
        attrs[ENGINE] = engine
    with tracer.start_as_current_span(f"accel.{kind}", context=parent, attributes=attrs) as span:
        yield span


def record_engine_call(span: trace.Span, *, batch_sizes: Iterable[int], queue_wait_s: float | None, requests: int) -> None:
    """Batching facts from the engine scheduler: the largest batch the node's requests rode in
    (a node may be split across batches), how many batches, and the wait before the first."""
    if not span.is_recording():
        return
    sizes = list(batch_sizes)
    span.set_attribute(REQUESTS, requests)
    if sizes:
        span.set_attribute(BATCH_SIZE, max(sizes))
        span.set_attribute(BATCHES, len(sizes))
    if queue_wait_s is not None:
        span.set_attribute(QUEUE_WAIT_S, max(0.0, queue_wait_s))


def record_generations(span: trace.Span, results: Iterable[Any]) -> None:
    """Token counts summed over LLM results (anything with prompt/completion/cached tokens)."""
    if not span.is_recording():
        return
    prompt = completion = cached = 0
    seen = False
    for result in results:
        if result is None or not hasattr(result, "prompt_tokens"):
            continue
        seen = True
        prompt += result.prompt_tokens
        completion += result.completion_tokens
        cached += getattr(result, "cached_tokens", 0) or 0
    if seen:
        span.set_attribute(PROMPT_TOKENS, prompt)
        span.set_attribute(COMPLETION_TOKENS, completion)
        span.set_attribute(TOKENS, prompt + completion)
        span.set_attribute(CACHED_TOKENS, cached)


def record_items(span: trace.Span, count: int) -> None:
    """How many stream items a streaming primitive produced."""
    if span.is_recording():
        span.set_attribute(ITEMS, count)
