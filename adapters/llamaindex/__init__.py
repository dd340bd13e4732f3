"""LlamaIndex adapter: `accel.wrap(obj)` for every LlamaIndex object with a query, chat,
retrieve or run entry point (query engines, chat engines, retrievers, routers, sub-question
engines, workflows and agents; see `components.py`), and `accel.wrap(IngestionPipeline(...))` /
`accel.wrap(VectorStoreIndex).from_documents(...)` for ingestion.

Importing this package registers the adapter with `accel.wrap`; the dispatcher imports it
lazily once the app has imported `llama_index.core`.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.common.dropin import state_of
from accel.options import WrapOptions
from accel.wrap import register_adapter

from .components import wrap_object
from .dropin import has_entry_point
from .indexing import wrap_index_class, wrap_pipeline
from .lowered import lower_query_engine

__all__ = [
    "wrap_llamaindex",
    "wrap_query_engine",
]


def _is_index_class(obj: Any) -> bool:
    from llama_index.core import VectorStoreIndex

    return isinstance(obj, type) and issubclass(obj, VectorStoreIndex)


SUPPORTED = ("query engines (RetrieverQueryEngine lowered; RouterQueryEngine, SubQuestionQueryEngine and others), "
             "chat engines (simple, context, condense_question, condense_plus_context), retrievers, "
             "Workflow / AgentWorkflow / FunctionAgent and any LlamaIndex object with a query, chat, retrieve or run "
             "entry point, IngestionPipeline, the VectorStoreIndex class")


def _is_llamaindex(obj: Any) -> bool:
    """An object of a LlamaIndex class (the app's own subclasses included)."""
    return any(c.__module__.startswith(("llama_index.", "workflows.")) for c in type(obj).__mro__)


def _matches(obj: Any) -> bool:
    from llama_index.core.ingestion import IngestionPipeline

    if isinstance(obj, IngestionPipeline) or state_of(obj) is not None or _is_index_class(obj):
        return True
    return _is_llamaindex(obj) and has_entry_point(obj)


def wrap_llamaindex(obj: Any, options: WrapOptions | None = None) -> Any:
    """The drop-in for a query engine, an `IngestionPipeline` or the `VectorStoreIndex` class."""
    from llama_index.core.ingestion import IngestionPipeline

    from accel.adapters.common import floor

    floor.install()  # engine-call capture inside its runs (idempotent; inert outside them)
    options = options or WrapOptions()
    policy, disabled_passes = options.policy, options.disabled_passes

    if state_of(obj) is not None:
        return obj  # already accel's
    if isinstance(obj, IngestionPipeline):
        return wrap_pipeline(obj, policy=policy, disabled_passes=tuple(disabled_passes))
    if _is_index_class(obj):
        return wrap_index_class(obj, policy=policy, disabled_passes=tuple(disabled_passes))
    return wrap_query_engine(obj, policy=policy, disabled_passes=disabled_passes)


def wrap_query_engine(engine: Any, *, policy: str = "topology", disabled_passes: tuple[str, ...] = ()) -> Any:
    """A drop-in replacement for `engine`: a `RetrieverQueryEngine` drop-in whose query is
    lowered to primitives (as when it is nested in a router or a chat engine); anything else
    becomes a drop-in of its own class (`components.wrap_object`), lowering the parts it can
    and running the rest as-is, with `explain()` saying which."""
    from llama_index.core.query_engine import RetrieverQueryEngine

    if type(engine) is RetrieverQueryEngine:
        return lower_query_engine(engine, policy=policy, disabled_passes=tuple(disabled_passes))
    return wrap_object(engine, policy=policy, disabled_passes=tuple(disabled_passes))


register_adapter(_matches, wrap_llamaindex, name=f"llamaindex ({SUPPORTED})", honours=("policy", "disabled_passes"))
