"""Chat models and LLMs that talk to a vLLM OpenAI-compatible server, bound to the session's
`OpenAIServerEngine` with the request fields the stock client would send.

The fields come from the model's own payload code (`ChatOpenAI._get_request_payload`,
`BaseOpenAI._invocation_params`), so bound kwargs (`stop`, ...) and model settings map exactly.
Anything that changes the response shape (tools, n > 1, logprobs, structured output) keeps
the model opaque.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from accel.adapters.common.bindings import EngineSpec, openai_server
from accel.adapters.common.openai_fields import refused
from accel.adapters.langchain.ops import sampling_params
from accel.engines.base import SamplingParams


@dataclass(frozen=True)
class ModelBinding:
    """A lowered model: its engine, whether it takes messages, and its request fields."""

    model: Any
    kwargs: dict[str, Any]
    engine: EngineSpec
    chat: bool
    params: SamplingParams
    model_name: str

    def messages(self, value: Any) -> list[dict[str, Any]]:
        """The messages the stock chat model sends for input `value` (its own conversion)."""
        return self.model._get_request_payload(value, **self.kwargs)["messages"]

    @property
    def streams_usage(self) -> bool:
        """Whether the stock chat model's `stream` ends with a usage chunk."""
        return bool(self.model._should_stream_usage(**self.kwargs))

    def streams(self, *, called_by_stream: bool) -> bool:
        """Whether the stock model streams its answer (reporting each token to its run) when
        reached through `stream` (`called_by_stream`) or through `invoke`: chat models decide
        it in `_should_stream` (`disable_streaming`, `streaming=...`), completion models
        stream in `stream`, and in `invoke` only with `streaming=True`."""
        model = self.model
        if self.chat:
            kwargs = {**self.kwargs, "stream": True} if called_by_stream else self.kwargs
            return bool(model._should_stream(async_api=False, **kwargs))
        from langchain_core.language_models import BaseLLM

        if type(model)._stream is BaseLLM._stream:
            return False
        return called_by_stream or getattr(model, "streaming", False) is True

    def stock_error(self, err: Exception) -> Exception:
        """The exception the stock model raises for the OpenAI client error `err`: chat models
        of langchain-openai classify client errors (`OpenAIInvalidRequestError`, ...)."""
        import openai

        handlers = sys.modules.get("langchain_openai.chat_models.base")
        if not self.chat or handlers is None or not isinstance(err, openai.APIError):
            return err
        try:
            try:
                raise err
            except openai.BadRequestError as bad:
                handlers._handle_openai_bad_request(bad)
            except openai.APIError as api:
                handlers._handle_openai_api_error(api)
        except Exception as converted:  # noqa: BLE001 - the handlers raise what stock raises
            return converted
        return err

    def prompt_text(self, value: Any) -> str:
        """The prompt text the stock LLM sends for input `value`."""
        return self.model._convert_input(value).to_string()


def bind_model(model: Any, kwargs: dict[str, Any]) -> tuple[ModelBinding | None, str]:
    """The binding of a model with bound `kwargs`, or (None, reason it stays opaque)."""
    chat_cls = _class("langchain_openai.chat_models.base", "BaseChatOpenAI")
    llm_cls = _class("langchain_openai.llms.base", "BaseOpenAI") or _class("langchain_community.llms.openai", "BaseOpenAI")
    llm_classes = tuple(c for c in (llm_cls, _class("langchain_community.llms.openai", "BaseOpenAI")) if c is not None)
    if chat_cls is not None and isinstance(model, chat_cls):
        return _bind_chat(model, kwargs)
    if llm_classes and isinstance(model, llm_classes):
        return _bind_completion(model, kwargs)
    return None, f"{type(model).__name__} is not an OpenAI-compatible client (ChatOpenAI, OpenAI, VLLMOpenAI)"


def _class(module: str, name: str) -> type | None:
    found = sys.modules.get(module)
    return getattr(found, name, None) if found is not None else None


def _api_key(model: Any) -> str:
    key = getattr(model, "openai_api_key", None)
    return key.get_secret_value() if hasattr(key, "get_secret_value") else str(key or "EMPTY")


def _bind_chat(model: Any, kwargs: dict[str, Any]) -> tuple[ModelBinding | None, str]:
    if not model.openai_api_base:
        return None, "no base_url: the model is a hosted API, not a local engine"
    from langchain_core.messages import HumanMessage

    try:
        payload = model._get_request_payload([HumanMessage("x")], **kwargs)
    except (TypeError, ValueError) as err:
        return None, f"its request could not be built ahead of time ({err})"
    reason = refused(payload)
    if reason is not None:
        return None, reason
    spec = openai_server(model.openai_api_base, payload["model"], _api_key(model))
    return ModelBinding(model, dict(kwargs), spec, True, sampling_params(payload), payload["model"]), ""


def _bind_completion(model: Any, kwargs: dict[str, Any]) -> tuple[ModelBinding | None, str]:
    if not model.openai_api_base:
        return None, "no base_url: the model is a hosted API, not a local engine"
    payload = {**model._invocation_params, **kwargs}
    if payload.get("max_tokens") == -1:
        return None, "max_tokens=-1 is resolved per prompt by the client"
    reason = refused(payload)
    if reason is not None:
        return None, reason
    spec = openai_server(model.openai_api_base, payload["model"], _api_key(model))
    return ModelBinding(model, dict(kwargs), spec, False, sampling_params(payload), payload["model"]), ""
