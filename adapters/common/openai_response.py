"""The OpenAI response a stock client would have parsed, rebuilt from a lowered generation.

Both frameworks' OpenAI clients build their answers' metadata from the SDK's response object:
langchain-openai's message (`_create_chat_result`: token usage, id, fingerprint), LlamaIndex's
`ChatResponse.raw` / `CompletionResponse.raw` (what observability handlers read token counts
from). A lowered decode's text often comes from a stream, so the response is put back together
from the fields the server sent with it (`Generation.response`) and built as the SDK builds the
stock call's (`construct_type`, no validation), one choice holding the text.
"""

from __future__ import annotations

from typing import Any

from accel.engines.base import Generation


def rebuilt_response(generation: Generation, *, chat: bool) -> Any | None:
    """The SDK's `ChatCompletion` (`chat`) or `Completion` for `generation`; None when the engine
    gave no response fields (an engine that is no OpenAI server)."""
    if generation.response is None:
        return None
    import openai
    from openai._models import construct_type

    finish = {"index": 0, "finish_reason": generation.finish_reason, "logprobs": None}
    if chat:
        body = {**generation.response, "object": "chat.completion",
                "choices": [{**finish, "message": {"role": "assistant", "content": generation.text}}]}
        return construct_type(type_=openai.types.chat.ChatCompletion, value=body)
    body = {**generation.response, "object": "text_completion", "choices": [{**finish, "text": generation.text}]}
    return construct_type(type_=openai.types.Completion, value=body)
