"""A lowered chat model answers with the stock model's message, metadata included, on the real
engines: `response_metadata` (the server's `token_usage`, completion `id`, `system_fingerprint`,
`logprobs`, finish reason), `usage_metadata` with `input_token_details` (vLLM's cached prompt
tokens) and `output_token_details`, `additional_kwargs` (the SDK's `refusal`) and an id made
from the run's id; and the token-usage callbacks the LangChain docs use
(`get_usage_metadata_callback`, `get_openai_callback`) count what they count on stock, for
`invoke`, `batch` and `stream` (where stock's count is 0 unless the model streams its usage,
every chunk carries the run's id, and the stream ends as stock's: the last text with the
finish metadata, then the usage where streamed, then an empty last chunk).

Before the fix a wrapped `prompt | model` gave `response_metadata` with three keys, no token
details, no `refusal`, id None, and `get_usage_metadata_callback` counted nothing; a streamed
call counted usage stock does not report. Cached-token counts are compared as present, not by
value: the prefix cache holds what the other system's identical requests left."""

from __future__ import annotations

import functools
import operator
import re
from typing import Any

import pytest
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.prompts import ChatPromptTemplate

import accel

from .conftest import TINY

pytestmark = [pytest.mark.engines]

PROMPT = ChatPromptTemplate.from_messages([("system", "Context:\n{context}"), ("human", "{question}")])
QUESTIONS = [{"context": "The json module encodes and decodes JSON.", "question": "How do I decode JSON?"},
             {"context": "heapq keeps a list as a heap.", "question": "How do I push onto a heap?"}]
RUN_ID = re.compile(r"lc_run--[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def cached(value: Any) -> Any:
    """`value` with every cached-token count replaced by its type (see the module's note)."""
    if isinstance(value, dict):
        return {k: type(v).__name__ if k in ("cache_read", "cached_tokens") else cached(v) for k, v in value.items()}
    return value


def view(message: Any) -> tuple[Any, ...]:
    metadata = {k: v for k, v in message.response_metadata.items() if k != "id"}  # the server's completion id
    return (type(message).__name__, message.content, message.additional_kwargs, cached(metadata),
            cached(message.usage_metadata), str(message.response_metadata.get("id", ""))[:9])


def test_chain_ending_in_the_model_returns_the_stock_message(chat_model) -> None:
    chain = PROMPT | chat_model
    fast = accel.wrap(chain)
    for entry in ("invoke", "batch"):
        stock = [chain.invoke(q) for q in QUESTIONS] if entry == "invoke" else chain.batch(QUESTIONS)
        ours = [fast.invoke(q) for q in QUESTIONS] if entry == "invoke" else fast.batch(QUESTIONS)
        assert [view(m) for m in ours] == [view(m) for m in stock]
        for message in (*stock, *ours):
            assert RUN_ID.fullmatch(message.id[:-2]) and message.id.endswith("-0")
            assert message.response_metadata["token_usage"]["prompt_tokens"] == message.usage_metadata["input_tokens"] > 0
            assert "cache_read" in message.usage_metadata["input_token_details"]
        assert len({m.id for m in ours}) == len(ours)


def test_token_usage_callbacks_count_as_on_stock(chat_model) -> None:
    from langchain_community.callbacks import get_openai_callback

    chain = PROMPT | chat_model
    fast = accel.wrap(chain)
    counted = []
    for app in (chain, fast):
        with get_usage_metadata_callback() as usage, get_openai_callback() as openai_usage:
            app.invoke(QUESTIONS[0])
            app.batch(QUESTIONS)
        counted.append((cached(usage.usage_metadata), openai_usage.prompt_tokens, openai_usage.completion_tokens,
                        openai_usage.successful_requests))
    assert counted[1] == counted[0]
    assert counted[0][0][TINY]["input_tokens"] > 0 and counted[0][3] == 3


@pytest.mark.parametrize("stream_usage", [False, True])
def test_streamed_usage_counts_as_on_stock(llm_proxy, stream_usage) -> None:
    from langchain_community.callbacks import get_openai_callback
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(base_url=llm_proxy.url + "/v1", api_key="EMPTY", model=TINY, temperature=0, max_tokens=12,
                       stream_usage=stream_usage)
    chain = PROMPT | model
    fast = accel.wrap(chain)
    seen = []
    for app in (chain, fast):
        with get_usage_metadata_callback() as usage, get_openai_callback() as openai_usage:
            chunks = list(app.stream(QUESTIONS[0]))
        joined = functools.reduce(operator.add, chunks)
        assert len({c.id for c in chunks}) == 1 and RUN_ID.fullmatch(joined.id)  # the run's id on every chunk
        # how the stream ends: the last text with the finish metadata, the usage, an empty last chunk
        tail = [(bool(c.content), c.response_metadata, cached(c.usage_metadata), c.chunk_position)
                for c in chunks[-(3 if stream_usage else 2):]]
        seen.append((cached(joined.usage_metadata), joined.response_metadata, cached(usage.usage_metadata),
                     openai_usage.prompt_tokens, openai_usage.completion_tokens, tail))
    assert seen[1] == seen[0]
    assert (seen[0][0] is not None) == stream_usage == (seen[0][3] > 0)
