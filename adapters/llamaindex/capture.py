"""Which LlamaIndex components the engine-call floor captures (for `explain()`): their
classes are patched by a floor plug-in (`accel.adapters.llamaindex.floor`, and the common
`openai` SDK plug-in for LLMs on OpenAI-compatible servers), so inside a wrapped run their
engine calls go through accel's shared engine schedulers."""

from __future__ import annotations

from typing import Any

_PLUGINS = {
    "HuggingFaceEmbedding": ("llamaindex:HuggingFaceEmbedding",),
    "PGVectorStore": ("llamaindex:PGVectorStore",),
    "SentenceTransformerRerank": ("llamaindex:SentenceTransformerRerank",),
    "OpenAILike": ("openai-sdk:sync", "openai-sdk:async"),
    "OpenAI": ("openai-sdk:sync", "openai-sdk:async"),
}


def capturing(component: Any) -> bool:
    """Whether `component`'s engine calls are captured during a wrapped run."""
    from accel.adapters.common import floor

    names = _PLUGINS.get(type(component).__name__, ())
    return bool(names) and all(floor.is_patched(name) for name in names)
