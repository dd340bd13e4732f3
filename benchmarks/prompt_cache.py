"""How much of each system's prompt work vLLM served from its prefix cache: the server's own
counters (`vllm:prompt_tokens_total`, `vllm:prompt_tokens_cached_total`, the sums of every
response's `usage.prompt_tokens` and `usage.prompt_tokens_details.cached_tokens`), read before
and after a system's run on the same server. Every request counts, accel's prefix warm-ups
included, so the fraction is what the engine actually computed versus reused."""

from __future__ import annotations

import re
from typing import Any

import httpx

_COUNTER = re.compile(r"^vllm:(prompt_tokens_total|prompt_tokens_cached_total)\{[^}]*\}\s+([0-9.eE+]+)", re.M)


def counts(openai_base_url: str) -> dict[str, float] | None:
    """{"prompt": tokens, "cached": tokens} so far on the server, or None without metrics."""
    url = openai_base_url.rstrip("/").removesuffix("/v1") + "/metrics"
    try:
        text = httpx.get(url, timeout=10).text
    except httpx.HTTPError:
        return None
    found = {name: float(value) for name, value in _COUNTER.findall(text)}
    if "prompt_tokens_total" not in found:
        return None
    return {"prompt": found["prompt_tokens_total"], "cached": found.get("prompt_tokens_cached_total", 0.0)}


def delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, Any] | None:
    """Prompt and cached tokens between two readings, and the cached fraction."""
    if before is None or after is None:
        return None
    prompt, cached = after["prompt"] - before["prompt"], after["cached"] - before["cached"]
    return {"prompt_tokens": int(prompt), "cached_tokens": int(cached), "cached_fraction": cached / prompt if prompt else None}
