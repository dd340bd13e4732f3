"""Prefill ops that render a prompt exactly as `llm.predict(template, **kwargs)` would.

Rendering goes through LlamaIndex's own `_get_prompt` / `_get_messages`, so the text sent to
the engine is the stock text by construction; it also opens the call's LlamaIndex spans and
events (`events.llm_started`), which its Decode closes. Separately, `prompt_parts` splits the
selected template into static text and slots; the prefill-split pass uses those parts only to
warm the prefix cache, so a part that does not match the real render costs a useless warm-up,
never a different answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from accel.engines.errors import EngineError
from accel.ir import Slot

from . import events

QUERY_PORT = "query"
_FIELD = re.compile(r"\{([^{}]+)\}")  # LlamaIndex's SafeFormatter pattern


class PlanMismatch(EngineError):
    """A query needs a different synthesis plan than the one built (e.g. a refine chunk that
    no longer fits once the previous answer is known); the query is answered by stock code."""


def render(llm: Any, template: Any, chat: bool, kwargs: dict[str, Any]) -> str | list[dict[str, str]]:
    """The prompt (or chat messages) `llm.predict(template, **kwargs)` would send."""
    if chat:
        return [{"role": m.role.value, "content": m.content or ""} for m in llm._get_messages(template, **kwargs)]
    return llm._get_prompt(template, **kwargs)


@dataclass(frozen=True)
class LlamaPromptOp:
    """Prefill: `template` partially formatted with the query, then `kwargs` from the ports
    (every port except the query is a template variable)."""

    llm: Any
    template: Any
    chat: bool
    blocking: bool = False

    def compute(self, values: dict[str, Any]) -> str | list[dict[str, str]]:
        template = self.template.partial_format(query_str=values[QUERY_PORT])
        kwargs = {port: value for port, value in values.items() if port != QUERY_PORT}
        prompt = render(self.llm, template, self.chat, kwargs)
        events.llm_started(self.llm, prompt, template=template, template_args=kwargs)
        return prompt


@dataclass(frozen=True)
class RefinePromptOp:
    """Prefill of a refine step: the refine template with the query and the existing answer,
    the chunk repacked against it as `Refine` does. A chunk that no longer fits in one prompt
    raises `PlanMismatch` (stock refine would split it into more calls)."""

    llm: Any
    template: Any
    prompt_helper: Any
    chat: bool
    blocking: bool = False

    def compute(self, values: dict[str, Any]) -> str | list[dict[str, str]]:
        template = self.template.partial_format(query_str=values[QUERY_PORT], existing_answer=values["existing_answer"])
        repacked = self.prompt_helper.repack(template, [values["context_msg"]], llm=self.llm)
        if len(repacked) != 1:
            raise PlanMismatch("llamaindex", f"a refine chunk repacks into {len(repacked)} prompts", "answered by stock code")
        kwargs = {"context_msg": repacked[0]}
        prompt = render(self.llm, template, self.chat, kwargs)
        events.llm_started(self.llm, prompt, template=template, template_args=kwargs)
        return prompt


def prompt_parts(llm: Any, template: Any, chat: bool) -> list[Any] | None:
    """Static text and `Slot`s of the prompt `template` renders to on `llm`, or None when the
    render is not a plain substitution (mappings, wrappers, system prompts, chat)."""
    from llama_index.core.prompts.base import PromptTemplate, SelectorPromptTemplate

    if isinstance(template, SelectorPromptTemplate):
        template = template.select(llm)
    if chat or not isinstance(template, PromptTemplate):
        return None
    if template.template_var_mappings or template.function_mappings or template.output_parser:
        return None
    if getattr(llm, "system_prompt", None) or getattr(llm, "query_wrapper_prompt", None):
        return None
    known = set(template.template_vars)
    parts: list[Any] = []
    last = 0
    for match in _FIELD.finditer(template.template):
        name = match.group(1)
        if name not in known:
            continue
        parts.append(template.template[last : match.start()])
        if name in template.kwargs:
            parts.append(str(template.kwargs[name]))
        else:
            parts.append(Slot(QUERY_PORT if name == "query_str" else name))
        last = match.end()
    parts.append(template.template[last:])
    return [p for p in parts if p != ""]
