"""Which fields of an OpenAI completions / chat request accel's OpenAI engine sends as the stock
client does, shared by the LangChain and LlamaIndex bindings so both lower the same requests.

A lowered LLM call sends the stock client's body: its sampling fields as `SamplingParams`, any
other body field unchanged (`SamplingParams.extra`: presence_penalty, logit_bias, user, vLLM's
own options from `extra_body`, ...). Only what accel cannot reproduce keeps the LLM on the floor:
fields that change the response's shape (the bindings return text), several choices per
request, and the openai SDK's per-call options that are not body fields (headers, query string,
timeout).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SHAPE_CHANGING = ("tools", "functions", "tool_choice", "function_call", "response_format", "parallel_tool_calls",
                  "logprobs", "top_logprobs", "best_of", "echo", "suffix")
"""Request fields whose use changes what the response holds (tool calls, log-probabilities,
structured output, the prompt echoed): a binding that returns text cannot reproduce them."""

CLIENT_OPTIONS = ("extra_headers", "extra_query", "timeout")
"""The openai SDK's `create()` options that are not request body fields."""


def refused(body: Mapping[str, Any]) -> str | None:
    """Why a stock request with these fields cannot be lowered, or None."""
    used = [k for k in SHAPE_CHANGING if body.get(k) not in (None, False, [], 1 if k == "best_of" else None)]
    if used:
        return f"request uses {used}, which change the response shape"
    if body.get("n") not in (None, 1):
        return "n > 1 completions per request"
    options = [k for k in CLIENT_OPTIONS if body.get(k) is not None]
    if options:
        return f"the openai client's {options} are not request fields accel's engine sends"
    return None
