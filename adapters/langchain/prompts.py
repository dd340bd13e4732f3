"""Prompt templates as prompt parts: static text and `Slot`s, so the prefill-split pass can
prefill the ready prefix early.

The parts come from the template itself, not from re-parsing it: the prompt is rendered once
with a unique sentinel per variable and the text is cut at the sentinels. A second rendering
with awkward probe values must equal the parts filled with the same values, otherwise the
template's format does something a plain slot cannot (escaping, format specs) and the prompt
is rendered by its own code at run time instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from accel.ir.ops import PromptPart, Slot, render_parts

_SENTINEL = "\x00accel-var-{}\x00"
_SPLIT = re.compile("(\x00accel-var-\\d+\x00)")


@dataclass(frozen=True)
class PromptShape:
    """Text prompt (`parts`) or chat prompt (`messages`: (role, parts)); slots read ports named
    after the template's variables."""

    variables: tuple[str, ...]
    parts: tuple[PromptPart, ...] = ()
    messages: tuple[tuple[str, tuple[PromptPart, ...]], ...] = ()

    def render(self, values: dict[str, Any]) -> Any:
        if self.messages:
            return [{"role": role, "content": render_parts(parts, values)} for role, parts in self.messages]
        return render_parts(self.parts, values)


def _fmt(value: Any) -> str:
    return format(value, "")  # what str.format does for a bare "{name}" field


def prompt_shape(prompt: Any, *, chat: bool) -> tuple[PromptShape | None, str]:
    """The prompt's parts for a chat model (`chat=True`: OpenAI message dicts) or a completion
    model (text), or (None, reason) when it must be rendered by its own code."""
    if getattr(prompt, "template_format", "f-string") != "f-string" or _message_formats(prompt) - {"f-string"}:
        return None, "only f-string templates are split into parts (others render as-is)"
    variables = (*prompt.input_variables, *getattr(prompt, "partial_variables", {}))
    sentinels = {v: _SENTINEL.format(i) for i, v in enumerate(variables)}
    ports = {s: v for v, s in sentinels.items()}
    try:
        shape = _shape(prompt, sentinels, ports, variables, chat)
    except (KeyError, ValueError, TypeError, AttributeError) as err:
        return None, f"could not render with placeholders ({type(err).__name__}: {err})"
    if shape is None:
        return None, "messages other than plain role/content (placeholders, names, multimodal)"
    probes = {v: f"<&'\"{{{v}}}\n{i}>" for i, v in enumerate(variables)}
    if _render_stock(prompt, probes, chat) != shape.render(probes):
        return None, "the template transforms variable values (escaping or format specs)"
    return shape, ""


def _message_formats(prompt: Any) -> set[str]:
    formats = set()
    for message in getattr(prompt, "messages", ()):
        inner = getattr(message, "prompt", None)
        for template in inner if isinstance(inner, list) else [inner]:
            if template is not None:
                formats.add(getattr(template, "template_format", "f-string"))
    return formats


def _cut(text: str, ports: dict[str, str]) -> tuple[PromptPart, ...]:
    parts: list[PromptPart] = []
    for piece in _SPLIT.split(text):
        if piece in ports:
            parts.append(Slot(ports[piece], _fmt))
        elif piece:
            parts.append(piece)
    return tuple(parts)


def _shape(prompt: Any, sentinels: dict[str, str], ports: dict[str, str], variables: tuple[str, ...], chat: bool) -> PromptShape | None:
    value = prompt.format_prompt(**sentinels)
    if not chat:
        return PromptShape(variables, parts=_cut(value.to_string(), ports))
    messages = []
    for message in value.to_messages():
        as_dict = openai_message(message)
        if set(as_dict) != {"role", "content"} or not isinstance(as_dict["content"], str):
            return None
        messages.append((as_dict["role"], _cut(as_dict["content"], ports)))
    return PromptShape(variables, messages=tuple(messages))


def _render_stock(prompt: Any, values: dict[str, Any], chat: bool) -> Any:
    value = prompt.format_prompt(**values)
    if not chat:
        return value.to_string()
    return [openai_message(m) for m in value.to_messages()]


def openai_message(message: Any) -> dict[str, Any]:
    """The dict langchain-openai sends for a message (its own converter)."""
    from langchain_openai.chat_models.base import _convert_message_to_dict

    return _convert_message_to_dict(message)


def prompt_variables(prompt: Any, value: Any) -> dict[str, Any]:
    """The variables the stock prompt formats with: its own input validation (same errors for
    a wrong input type or a missing key) and its partial variables."""
    return prompt._merge_partial_and_user_variables(**prompt._validate_input(value))
