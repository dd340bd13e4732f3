"""The LlamaIndex classes that call an engine, and which of them the engine-call floor
captures: their classes are patched by a floor plug-in (`accel.adapters.llamaindex.floor`, and
the common `openai` SDK plug-in for LLMs on OpenAI-compatible servers), so inside a wrapped run
their engine calls go through accel's shared engine schedulers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accel.adapters.common.classes import is_exactly

from .bindings import HUGGINGFACE_EMBEDDING, OPENAI_LLMS, PG_VECTOR_STORE, SBERT_RERANK

_OPENAI_SDK = ("openai-sdk:sync", "openai-sdk:async")


@dataclass(frozen=True)
class EngineClass:
    """A LlamaIndex class (defining module, name) that calls an engine: its role (for
    `explain()`) and the floor plug-ins that capture its calls."""

    path: tuple[str, str]
    role: str
    plugins: tuple[str, ...]


ENGINE_CLASSES = (
    *(EngineClass(path, "LLM", _OPENAI_SDK) for path in OPENAI_LLMS),
    EngineClass(HUGGINGFACE_EMBEDDING, "embedding", ("llamaindex:HuggingFaceEmbedding",)),
    EngineClass(PG_VECTOR_STORE, "vector store", ("llamaindex:PGVectorStore",)),
    EngineClass(SBERT_RERANK, "reranker", ("llamaindex:SentenceTransformerRerank",)),
)


def engine_class(component: Any) -> EngineClass | None:
    """The entry for `component`'s exact class (not a subclass, not a class sharing its name)."""
    return next((entry for entry in ENGINE_CLASSES if is_exactly(component, entry.path)), None)


def capturing(component: Any) -> bool:
    """Whether `component`'s engine calls are captured during a wrapped run."""
    from accel.adapters.common import floor

    entry = engine_class(component)
    return entry is not None and all(floor.is_patched(name) for name in entry.plugins)
