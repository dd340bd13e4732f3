"""LLMs accel hosts in this process: no server needed behind an app's OpenAI base URL.

    accel.host_llm("http://localhost:8000/v1", "/models/my-llama")
    chain = accel.wrap(chain)          # its ChatOpenAI(base_url=...) is served in process

Or, for `ACCEL_AUTO=1` apps, `ACCEL_HOST_LLM=http://localhost:8000/v1` (the embedded default
model) or `ACCEL_HOST_LLM=http://localhost:8000/v1=/models/my-llama`. Every request a wrapped
app (or, under `ACCEL_AUTO`, any captured client) sends to that base URL is answered by vLLM's
own OpenAI layer hosted in this process (`accel.engines.llm.hosted`), so answers equal a
`vllm serve` of the same model. Code accel does not capture (a stock fallback, a raw `httpx`
call, `GET /models`) still needs a real server there.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from accel.config import settings

__all__ = ["HostedLLM", "host_llm", "hosted_llm", "unhost_llm"]


class HostingError(ValueError):
    """A hosting request that cannot work (bad base URL, missing model directory)."""


@dataclass(frozen=True)
class HostedLLM:
    base_url: str
    model: str | None = None
    """A model directory or name vLLM accepts; None: the embedded default (`ACCEL_LLM_MODEL`,
    else the offline model of `ACCEL_LLM_SIZE`)."""
    served_model_name: str | None = None
    """The name requests must use (default: the directory's name, as `vllm serve` answers)."""
    max_model_len: int | None = None
    extra_args: tuple[str, ...] = ()
    """More `vllm serve` options, e.g. ("--max-num-seqs", "32")."""


_lock = threading.Lock()
_hosted: dict[str, HostedLLM] = {}


def _normal(base_url: str) -> str:
    url = str(base_url).strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise HostingError(f"accel.host_llm: {base_url!r} is not an http(s) base URL. Remedy: pass the base "
                           "URL the app's OpenAI client uses, e.g. 'http://localhost:8000/v1'.")
    return url


def host_llm(base_url: str, model: str | None = None, *, served_model_name: str | None = None,
             max_model_len: int | None = None, extra_args: Sequence[str] = ()) -> HostedLLM:
    """Serve `base_url` from this process from now on. Call it before the app's first wrapped
    run: apps already bound to a server keep it."""
    if model is not None:
        from accel.engines.offline.llm import resolve_llm

        model = resolve_llm(model)  # a missing directory fails here, not at the first query
    hosted = HostedLLM(_normal(base_url), model, served_model_name, max_model_len, tuple(extra_args))
    with _lock:
        _hosted[hosted.base_url] = hosted
    return hosted


def unhost_llm(base_url: str) -> None:
    """Stop hosting `base_url` for apps bound from now on (their requests go to the URL again)."""
    with _lock:
        _hosted.pop(_normal(base_url), None)


def hosted_llm(base_url: str) -> HostedLLM | None:
    """What hosts `base_url`, from `host_llm` or `ACCEL_HOST_LLM`, or None."""
    try:
        url = _normal(base_url)
    except HostingError:
        return None
    with _lock:
        found = _hosted.get(url)
    return found or _from_env(url)


def _from_env(url: str) -> HostedLLM | None:
    cfg = settings()
    if cfg.host_llm is None:
        return None
    listed, _, model = cfg.host_llm.partition("=")
    if _normal(listed) != url:
        return None
    return HostedLLM(url, model.strip() or cfg.llm_model)
