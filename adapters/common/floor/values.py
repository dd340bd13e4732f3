"""Reading what a run produced and sent, for learned prefill (`learned`): the text leaves of a
run's input, the documents a component made of search results, and the prompt and generated
text of an OpenAI request and response as the server sees them."""

from __future__ import annotations

import json
from typing import Any

from accel.ir.dynamic import Prompt
from accel.passes import learned_prefill as lp

MAX_INPUT_VALUES = 64
TEMPLATE_FIELDS = frozenset({
    "tools", "functions", "chat_template", "chat_template_kwargs", "documents", "continue_final_message",
    "add_generation_prompt", "mm_processor_kwargs",
})
"""Chat request fields that change what the server's chat template renders: not learned."""


def of_input(value: Any, name: str = "input") -> dict[str, str]:
    """The text leaves of a run's input (strings, message and document texts in dicts, lists
    and tuples), named by their path; at most `MAX_INPUT_VALUES`."""
    out: dict[str, str] = {}

    def walk(item: Any, path: str, depth: int) -> None:
        if len(out) >= MAX_INPUT_VALUES or depth > 5:
            return
        if isinstance(item, str):
            if len(item) >= lp.MIN_VALUE_CHARS:
                out[path] = item
            return
        if isinstance(item, dict):
            for key, sub in item.items():
                walk(sub, f"{path}.{key}", depth + 1)
            return
        if isinstance(item, (list, tuple)):
            for i, sub in enumerate(item):
                walk(sub, f"{path}[{i}]", depth + 1)
            return
        for attr in ("content", "page_content", "text"):
            text = getattr(item, attr, None)
            if isinstance(text, str):
                walk(text, f"{path}.{attr}", depth + 1)
                return

    walk(value, name, 0)
    return out


def documents(made: Any) -> list[Any]:
    """Objects with a `page_content` in a component's return value (a list of documents, or of
    (document, score) pairs)."""
    items = made if isinstance(made, list) else []
    found = []
    for item in items:
        doc = item[0] if isinstance(item, tuple) and item else item
        if isinstance(getattr(doc, "page_content", None), str):
            found.append(doc)
    return found


def shown(made: Any) -> list[str]:
    """How the documents in a component's return value print (`repr`, as `str` of a list of
    LangChain documents writes each one): what a later prompt built from state may show."""
    return [repr(doc) for doc in documents(made)]


def request_prompt(body: bytes) -> Prompt | None:
    """The prompt of an OpenAI generation request body, where it is plain text or plain chat
    messages the server renders with its own template and nothing else; None otherwise."""
    try:
        payload = json.loads(body) if body else None
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    if "messages" in payload:
        messages = payload["messages"]
        if TEMPLATE_FIELDS & payload.keys() or not isinstance(messages, list) or not messages:
            return None
        out = []
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("content"), str) or set(message) - {"role", "content"}:
                return None
            out.append({"role": str(message.get("role")), "content": message["content"]})
        return out
    prompt = payload.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    return prompt if isinstance(prompt, str) else None


def response_text(content: bytes) -> tuple[str | None, int | None]:
    """(generated text, cached prompt tokens) of a whole OpenAI response body."""
    try:
        payload = json.loads(content)
    except ValueError:
        return None, None
    if not isinstance(payload, dict):
        return None, None
    choices = payload.get("choices") or []
    text = None
    if len(choices) == 1 and isinstance(choices[0], dict):
        choice = choices[0]
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else choice.get("text")
    return (text if isinstance(text, str) else None), _cached(payload)


def stream_text(data: bytes) -> tuple[str | None, int | None]:
    """(generated text, cached prompt tokens) of a whole server-sent-events response body."""
    pieces: list[str] = []
    cached = None
    for line in data.decode(errors="replace").splitlines():
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        try:
            event = json.loads(line[5:])
        except ValueError:
            return None, None
        for choice in event.get("choices") or []:
            if choice.get("index", 0) != 0:
                return None, None
            delta = choice.get("delta")
            piece = delta.get("content") if isinstance(delta, dict) else choice.get("text")
            if isinstance(piece, str):
                pieces.append(piece)
        cached = _cached(event) if event.get("usage") else cached
    return "".join(pieces), cached


def _cached(payload: dict[str, Any]) -> int | None:
    details = (payload.get("usage") or {}).get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    return cached if isinstance(cached, int) else None


