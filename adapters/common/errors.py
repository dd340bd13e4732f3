"""Exceptions at the adapter boundary: what the stock app would have raised.

accel's OpenAI engine reports a prompt longer than the server's context as `PromptTooLong`; a
stock app's OpenAI client gets the same HTTP 400 from the same server and raises
`openai.BadRequestError`. An unreachable or dead LLM server is `openai.APIConnectionError` to
the stock client. Wrapped apps re-raise those (chaining accel's error, which names the engine
and the remedy), so an app's `except` clauses keep working.
"""

from __future__ import annotations

from accel.engines.errors import EngineDied, EngineError, EngineUnavailable, PromptTooLong


def stock_error(err: PromptTooLong) -> Exception:
    """`openai.BadRequestError` as the OpenAI client builds it from the server's 400 reply."""
    import httpx
    import openai

    body = {"error": {"message": err.cause, "type": "BadRequestError", "param": None, "code": 400}}
    request = httpx.Request("POST", "http://accel/v1/completions")
    response = httpx.Response(400, request=request, json=body)
    return openai.BadRequestError(f"Error code: 400 - {body}", response=response, body=body["error"])


def stock_llm_error(err: EngineError, llm_engines: set[str]) -> Exception:
    """The OpenAI client's exception for an error of one of the `llm_engines` (engine names as
    errors report them), else accel's own typed error."""
    if err.engine not in llm_engines:
        return err
    if isinstance(err, PromptTooLong):
        return stock_error(err)
    if isinstance(err, (EngineUnavailable, EngineDied)):
        import httpx
        import openai

        return openai.APIConnectionError(request=httpx.Request("POST", "http://accel/v1/chat/completions"))
    return err
