"""LLM engines: vLLM in this process, a vLLM OpenAI-compatible server (client + launcher), or
vLLM's OpenAI layer hosted in this process (`HostedServerEngine`, for `accel.host_llm`).

Names are imported lazily: importing vLLM takes seconds, and the server client needs none of it.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "VLLMEngine": "accel.engines.llm.inprocess",
    "EngineLoad": "accel.engines.llm.load",
    "HostedServerEngine": "accel.engines.llm.hosted",
    "OpenAIServerEngine": "accel.engines.llm.openai_client",
    "ServerHandle": "accel.engines.llm.server",
    "launch_server": "accel.engines.llm.server",
    "launch_server_sync": "accel.engines.llm.server",
    "stop_pid": "accel.engines.llm.server",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
