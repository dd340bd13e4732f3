"""Lowered components as drop-ins of their own class, alone or inside bigger LlamaIndex objects.

A chat engine, a router or a sub-question engine calls its components through their own
methods (`retriever.retrieve`, `query_engine.query`, and for condense-question the stock
engine checks `isinstance(query_engine, RetrieverQueryEngine)` to switch streaming on). So the
lowered parts keep their class and their public methods (callbacks, instrumentation events and
spans are stock code's own) and replace only the step that does the engine work:

- a retriever (dense `VectorIndexRetriever`, `QueryFusionRetriever` over them) replaces
  `_retrieve` / `_aretrieve`: Embed -> Search (-> fusion) on accel's runtime, the graph of
  `retrieval.py`, so concurrent conversations' embeddings and searches batch together;
- a `RetrieverQueryEngine` replaces `_query` / `_aquery` with its `LoweredQuery` (retrieval,
  postprocessors and synthesis as primitives).

Inputs accel does not lower (a bundle carrying its own embedding) take the class's own code.
"""

from __future__ import annotations

from typing import Any

import llama_index.core.instrumentation as instrument

from accel.adapters.common.dropin import DropInState, state_of
from accel.registry import TemplateCompiler
from accel.types import Identity, TemplateBuild

from . import callbacks, query_trace
from .dropin import make_dropin
from .retrieval import plan_retrieval


def _span(cls: type, name: str, fn: Any) -> Any:
    """`fn` as the class's own `name` would be traced: a span on its module's dispatcher."""
    fn.__name__ = name
    fn.__qualname__ = f"{cls.__name__}.{name}"
    return instrument.get_dispatcher(cls.__module__).span(fn)


def _lowerable(bundle: Any) -> bool:
    # an empty query has no embedding strings: stock then searches with no vector (and fails its own way)
    return bundle.embedding is None and bundle.custom_embedding_strs is None and bool(bundle.query_str)


def _reported(component: Any) -> bool:
    """Whether a legacy callback handler listens to `component` or the parts it calls
    (`callbacks`): the lowered stages then fire stock's events, counted."""
    return callbacks.reports_to(type(component).__name__, callbacks.listeners(callbacks.components(component)))


# ---- retrievers ---------------------------------------------------------------------------------


def _retriever_overrides(cls: type) -> dict[str, Any]:
    own_sync, own_async = cls._retrieve, cls._aretrieve

    def _retrieve(self: Any, query_bundle: Any) -> Any:
        found = state_of(self)
        if not _lowerable(query_bundle):
            return own_sync(self, query_bundle)
        with query_trace.traced(query_bundle, asynchronous=False, retrieval=False, reported=_reported(self)):
            return found.session.run(found.helper, {"query": query_bundle.query_str})

    async def _aretrieve(self: Any, query_bundle: Any) -> Any:
        found = state_of(self)
        if not _lowerable(query_bundle):
            return await own_async(self, query_bundle)
        with query_trace.traced(query_bundle, asynchronous=True, retrieval=False, reported=_reported(self)):
            return await found.session.arun(found.helper, {"query": query_bundle.query_str})

    return {"_retrieve": _span(cls, "_retrieve", _retrieve), "_aretrieve": _span(cls, "_aretrieve", _aretrieve)}


_retriever_classes: dict[type, dict[str, Any]] = {}
_plans: dict[Any, tuple[list[str], list[Any]]] = {}  # template key -> what its build lowered / left opaque


def _structure_key(retriever: Any) -> tuple[Any, ...]:
    """Retrievers that search the same store with the same embedding model, docstore and k
    share one template (apps build a retriever per chat session: `as_chat_engine` does). The
    graph reports no event on the retriever instance itself (its `retrieve` span and events
    are the drop-in's own stock code), so sharing changes nothing an app sees. Other
    retrievers get a template of their own."""
    from llama_index.core.indices.vector_store.retrievers.retriever import VectorIndexRetriever

    r = retriever
    if type(r) is not VectorIndexRetriever:
        return ("instance", Identity(r))
    mode = str(getattr(r._vector_store_query_mode, "value", r._vector_store_query_mode))
    if r._filters is not None or r._kwargs or mode != "default":
        return ("instance", Identity(r))
    # an in-memory index's retrievers carry the index's node ids (`as_retriever` passes them)
    return ("vector", Identity(r._vector_store), Identity(r._embed_model), Identity(r._docstore), r._similarity_top_k,
            r._sparse_top_k, r._hybrid_top_k, r._alpha, tuple(r._node_ids or ()), tuple(r._doc_ids or ()))


def lower_retriever(retriever: Any, session: TemplateCompiler, disabled_passes: tuple[str, ...] = ()) -> Any | None:
    """A drop-in of `retriever` whose retrieval runs on accel's engines (its template optimised
    without `disabled_passes`), or None when no part of it would be lowered (it then stays the
    original)."""
    from accel.ir import GraphBuilder

    plan = plan_retrieval(retriever, [])
    key = ("llamaindex-retriever", *_structure_key(retriever))

    def build() -> Any:
        plan.lowered.clear()
        plan.opaque.clear()
        b = GraphBuilder()
        b.output(plan.build(b, session))
        _plans[key] = (list(plan.lowered), list(plan.opaque))
        return b.build()

    template = session.template(TemplateBuild(key, build, disabled_passes))
    plan.lowered[:], plan.opaque[:] = _plans[key]
    if not plan.lowered:
        return None
    cls = type(retriever)
    overrides = _retriever_classes.setdefault(cls, _retriever_overrides(cls))
    kind = DropInState(cls.__name__, session, lowered=list(plan.lowered),
                      as_is=[f"{u.component}: {u.reason}" for u in plan.opaque], helper=template)
    return make_dropin(retriever, kind, overrides=overrides)


# ---- retriever query engines --------------------------------------------------------------------


def _query_engine_overrides(cls: type) -> dict[str, Any]:
    def _query(self: Any, query_bundle: Any) -> Any:
        return state_of(self).helper.answer(query_bundle)

    async def _aquery(self: Any, query_bundle: Any) -> Any:
        return await state_of(self).helper.aanswer(query_bundle)

    def update_prompts(self: Any, prompts_dict: dict[str, Any]) -> None:
        # the lowered query's templates hold the prompts it was planned with
        raise NotImplementedError("accel.wrap: update the prompts on the original query engine, then wrap it again")

    def explain(self: Any) -> str:
        return state_of(self).helper.explain()

    return {"_query": _span(cls, "_query", _query), "_aquery": _span(cls, "_aquery", _aquery),
            "update_prompts": update_prompts, "explain": explain}


_query_engine_classes: dict[type, dict[str, Any]] = {}


def lower_query_engine(engine: Any, *, policy: str, disabled_passes: tuple[str, ...]) -> Any:
    """A `RetrieverQueryEngine` drop-in answering through its `LoweredQuery` (at the top level
    and nested in a router, sub-question or chat engine alike)."""
    from .query_engine import LoweredQuery

    helper = LoweredQuery(engine, policy=policy, disabled_passes=disabled_passes)
    cls = type(engine)
    overrides = _query_engine_classes.setdefault(cls, _query_engine_overrides(cls))
    kind = DropInState(cls.__name__, helper._session, lowered=["retrieval, postprocessors and synthesis as primitives"],
                      parts=[helper], helper=helper)  # explained by the helper (`LoweredQuery.explain`)
    return make_dropin(engine, kind, overrides=overrides)
