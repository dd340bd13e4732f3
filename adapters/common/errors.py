"""Exceptions at the adapter boundary: what the stock app would have raised.

accel's OpenAI engine reports a prompt longer than the server's context as `PromptTooLong`; a
stock app's OpenAI client gets the same HTTP 400 from the same server and raises
`openai.BadRequestError`. An unreachable or dead LLM server is `openai.APIConnectionError` to
the stock client, and so is an unreachable embedding server to a stock `OpenAIEmbeddings` /
`OpenAIEmbedding` whose retriever accel lowered. A Postgres that cannot be reached is SQLAlchemy's `OperationalError` to the
frameworks' PGVector stores (LlamaIndex's async path, on asyncpg, gets the socket's own
error: `ConnectionRefusedError`, `FileNotFoundError` for a Unix socket). Wrapped apps re-raise those (chaining accel's error, which names the
engine and the remedy), so an app's `except` clauses keep working.
"""

from __future__ import annotations

import errno
import os

from accel.engines.errors import EngineDied, EngineError, EngineUnavailable, PromptTooLong

VECTORDB = "vectordb"
_SOCKET_ERRORS = (errno.ECONNREFUSED, errno.ENOENT, errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH,
                  errno.ECONNRESET)  # the engine name Postgres errors carry (accel.engines.vectordb)


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


EMBED_SERVER = "embed-server:"
"""The prefix of an embedding server engine's name (`engines/embed_server.py`), its base URL after."""


def stock_embed_error(err: EngineError) -> Exception:
    """The OpenAI client's exception for an embedding server that cannot be reached or died,
    else accel's own typed error."""
    if not err.engine.startswith(EMBED_SERVER) or not isinstance(err, (EngineUnavailable, EngineDied)):
        return err
    import httpx
    import openai

    url = err.engine.removeprefix(EMBED_SERVER).rstrip("/") + "/embeddings"
    return openai.APIConnectionError(request=httpx.Request("POST", url))


def stock_vectordb_error(err: EngineError, *, asyncpg: bool = False) -> Exception:
    """What a PGVector store raises when Postgres cannot be reached (`asyncpg`: LlamaIndex's
    async path), else accel's own typed error."""
    if err.engine != VECTORDB or not isinstance(err, EngineUnavailable):
        return err
    if asyncpg:  # asyncpg lets the socket's own error through: refused, no such socket file, ...
        for code in _SOCKET_ERRORS:
            if os.strerror(code).lower() in err.cause.lower():
                return OSError(code, os.strerror(code))  # the errno's subclass (ConnectionRefusedError, ...)
    import psycopg
    import sqlalchemy.exc

    orig = _cause_of_type(err, psycopg.OperationalError) or psycopg.OperationalError(err.cause)
    return sqlalchemy.exc.OperationalError(None, None, orig)


def _cause_of_type(err: BaseException, kind: type[BaseException]) -> BaseException | None:
    seen: set[int] = set()
    cause = err.__cause__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, kind):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
