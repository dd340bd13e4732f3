"""What each timed LLM call asked of the engine: its prompt tokens, how many the prefix cache
served, its answer tokens (the response's own `usage`), and an identity of its request, so
that equal requests (which accel may send once) are counted once. The batch bound's step floor
on engine twins is computed from these (`step_floor.py`).

Read from the frameworks' own end-of-call objects: LangChain's `LLMResult` (the message's
`usage_metadata`, else `llm_output["token_usage"]`) and LlamaIndex's responses (`raw.usage`).
A call whose response carries no usage (a stream without `include_usage`) gives None.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CallUsage:
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    request: str = ""
    """A digest of the call's input and parameters ("" where it was not seen)."""

    @property
    def computed_tokens(self) -> int:
        """Prompt tokens the engine computed (at least one: the last is always computed)."""
        return max(1, self.prompt_tokens - self.cached_tokens)


def request_digest(*parts: Any) -> str:
    """A stable digest of a call's input (messages or prompts) and its invocation parameters."""
    text = json.dumps(parts, sort_keys=True, default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _plain(value: Any) -> Any:
    for attr in ("model_dump", "dict"):
        dump = getattr(value, attr, None)
        if callable(dump):
            try:
                return dump()
            except Exception:  # an object that cannot dump itself is described by its text
                break
    return repr(value)


def from_counts(prompt: Any, cached: Any, completion: Any, request: str) -> CallUsage | None:
    if not all(isinstance(n, int) for n in (prompt, completion)):
        return None
    return CallUsage(prompt, cached if isinstance(cached, int) else 0, completion, request)


def from_langchain(response: Any, request: str) -> CallUsage | None:
    """Usage of a LangChain `LLMResult` (one generation per call, as the apps make them)."""
    for generations in getattr(response, "generations", None) or []:
        for generation in generations:
            meta = getattr(getattr(generation, "message", None), "usage_metadata", None)
            if meta:
                cached = (meta.get("input_token_details") or {}).get("cache_read")
                return from_counts(meta.get("input_tokens"), cached, meta.get("output_tokens"), request)
    usage = (getattr(response, "llm_output", None) or {}).get("token_usage") or {}
    return _from_openai(usage, request)


def from_llamaindex(response: Any, request: str) -> CallUsage | None:
    """Usage of a LlamaIndex `ChatResponse` / `CompletionResponse` (its `raw` OpenAI response)."""
    raw = getattr(response, "raw", None)
    usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
    return _from_openai(usage, request)


def _from_openai(usage: Any, request: str) -> CallUsage | None:
    """An OpenAI-shaped `usage` (a dict or the SDK's object)."""
    if usage is None:
        return None

    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)

    details = get(usage, "prompt_tokens_details")
    cached = get(details, "cached_tokens") if details is not None else None
    return from_counts(get(usage, "prompt_tokens"), cached, get(usage, "completion_tokens"), request)
