"""A lowered chat model's answer as the stock model's own code makes it.

langchain-openai's chat models build their `AIMessage` from the server's whole response
(`_create_chat_result`): `response_metadata` with the server's `token_usage`, `id`,
`system_fingerprint` and `logprobs`; `usage_metadata` with `input_token_details` (the cached
prompt tokens vLLM reports) and `output_token_details`; `additional_kwargs` with the SDK's
`refusal`; and `llm_output`, what callback handlers such as `get_openai_callback` read. A
lowered decode's text comes from a stream, so the response the stock model would have parsed is
put back together from the stream's own fields (`Generation.response`: the head every event
repeats, the final usage) and handed to that same code. A model without it, or a generation
from an engine that is no OpenAI server, gets the plain message.
"""

from __future__ import annotations

import logging
from typing import Any

from accel.adapters.common.openai_response import rebuilt_response
from accel.engines.base import Generation

log = logging.getLogger("accel.adapters.langchain.messages")


def stock_result(model: Any, generation: Generation) -> Any | None:
    """The `ChatResult` the stock model's `_generate` returns for this answer, or None when the
    model has no OpenAI response parser or the engine gave no response fields."""
    parse = getattr(model, "_create_chat_result", None)
    if parse is None or generation.response is None:
        return None
    try:
        result = parse(rebuilt_response(generation, chat=True))
    except Exception as err:  # noqa: BLE001 - a response the parser refuses: the plain message, logged
        log.warning("%s could not parse the response accel rebuilt (%s: %s); its message keeps the text and counts only",
                    type(model).__name__, type(err).__name__, err)
        return None
    return _as_generate_leaves_it(model, result)


def _as_generate_leaves_it(model: Any, result: Any) -> Any:
    """What `BaseChatModel.generate` does to `_generate`'s result before handing it out: v1
    content blocks where the model asks for them, the generation info and then the result's
    `llm_output` merged into the message's `response_metadata`."""
    from langchain_core.language_models import chat_models

    for generation in result.generations:
        if getattr(model, "output_version", None) == "v1":
            generation.message = chat_models._update_message_content_to_blocks(generation.message, "v1")
        generation.message.response_metadata = chat_models._gen_info_and_msg_metadata(generation)
    if len(result.generations) == 1 and result.llm_output is not None:
        message = result.generations[0].message
        message.response_metadata = {**result.llm_output, **message.response_metadata}
    return result


def stock_answer(model: Any, model_name: str, generation: Generation, run_id: Any = None) -> tuple[Any, dict[str, Any]]:
    """(the `ChatGeneration`, the result's `llm_output`) the stock model's `generate` gives for
    this answer, its message id made from `run_id`: the stock parser's where it has one
    (`stock_result`), else the plain message with the token counts."""
    from langchain_core.outputs import ChatGeneration

    result = stock_result(model, generation)
    if result is not None:
        answer, llm_output = result.generations[0], result.llm_output
    else:
        counts = {"prompt_tokens": generation.prompt_tokens, "completion_tokens": generation.completion_tokens,
                  "total_tokens": generation.prompt_tokens + generation.completion_tokens}
        answer = ChatGeneration(message=plain_message(model_name, generation),
                                generation_info={"finish_reason": generation.finish_reason, "logprobs": None})
        llm_output = {"token_usage": counts, "model_name": model_name}
    answer.message.id = message_id(run_id)
    return answer, llm_output


def plain_message(model_name: str, generation: Generation) -> Any:
    """The message's text, finish reason and token counts, for a model without the parser."""
    from langchain_core.messages import AIMessage

    usage = {"input_tokens": generation.prompt_tokens, "output_tokens": generation.completion_tokens,
             "total_tokens": generation.prompt_tokens + generation.completion_tokens}
    metadata = {"model_name": model_name, "finish_reason": generation.finish_reason, "model_provider": "openai"}
    return AIMessage(content=generation.text, response_metadata=metadata, usage_metadata=usage)


def streamed_metadata(message: Any, model_name: str, *, stream_usage: bool) -> dict[str, Any]:
    """The `response_metadata` a stock stream's chunks add up to: what langchain-openai's
    finishing chunk carries (the model, the finish reason, the service tier where sent), no
    usage object, id or logprobs. vLLM stamps its fingerprint on that chunk only when the
    request asked for no usage (with usage, on the usage chunk, which langchain-openai reads
    no metadata from): so where the stock model does not stream usage."""
    sent = message.response_metadata
    metadata = {"model_provider": "openai", "finish_reason": sent.get("finish_reason"),
                "model_name": sent.get("model_name", model_name)}
    keys = ("service_tier",) if stream_usage else ("system_fingerprint", "service_tier")
    metadata.update({key: sent[key] for key in keys if sent.get(key)})
    return metadata


def message_id(run_id: Any = None, *, streamed: bool = False) -> str:
    """The id `BaseChatModel` gives its answer: from its run's id, with the generation's index
    where `generate` sets it, without where `stream` sets it on every chunk (a fresh run id
    when no run is traced, as stock's untraced run has one nobody sees)."""
    from langchain_core.utils.utils import LC_ID_PREFIX
    from langchain_core.utils.uuid import uuid7

    run = f"{LC_ID_PREFIX}-{run_id or uuid7()}"
    return run if streamed else f"{run}-0"
