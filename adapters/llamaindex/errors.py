"""Exceptions at the adapter boundary: what the stock LlamaIndex app would have raised.

accel's OpenAI engine reports a prompt longer than the server's context as `PromptTooLong`;
the stock app's `OpenAI` / `OpenAILike` LLM gets the same HTTP 400 from the same server and
raises `openai.BadRequestError`. A wrapped query engine re-raises the latter (chaining
accel's error, which names the component and the remedy), so an app's `except` clauses keep
working.
"""

from __future__ import annotations

from accel.engines.errors import PromptTooLong


def stock_error(err: PromptTooLong) -> Exception:
    """`openai.BadRequestError` as the OpenAI client builds it from the server's 400 reply."""
    import httpx
    import openai

    body = {"error": {"message": err.cause, "type": "BadRequestError", "param": None, "code": 400}}
    request = httpx.Request("POST", "http://accel/v1/completions")
    response = httpx.Response(400, request=request, json=body)
    return openai.BadRequestError(f"Error code: 400 - {body}", response=response, body=body["error"])
