"""`accel.wrap(app)` is an instance of the app's own class for every app in tests/external/apps/
(issue 28: one drop-in mechanism), nested or not: a `RetrieverQueryEngine` wrapped alone and
one inside a wrapped router are drop-ins of the same family.

Each case builds the app as its page does (real engines, the suite's Postgres) and only wraps
it: what the drop-ins then answer is the other tests' business.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import accel
from accel.adapters.common.dropin import state_of

from .apps import (
    lc_cross_encoder_reranker,
    lc_llm_chain_migration,
    lc_message_history,
    lc_multi_query,
    lc_multi_query_custom_prompt,
    lc_pgvector,
    lc_qa_sources,
    lc_rag_builtin_chains,
    lc_rag_custom_prompt,
    lc_rag_tutorial,
    lc_vllm_openai,
    lg_lcel_nodes,
    lg_map_reduce,
    lg_rag_part1,
    lg_rag_part2,
    lg_router_memory,
    lg_self_rag,
    li_chat_engines,
    li_ingestion_pipeline,
    li_pgvector,
    li_query_engine_usage,
    li_router,
    li_sentence_transformer_rerank,
    li_simple_fusion,
    li_starter,
    li_sub_question,
    li_workflows,
)

pytestmark = [pytest.mark.engines, pytest.mark.slow]


class World:
    """What the apps' builds take, made on first use (a case builds only what it needs)."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request

    def __getattr__(self, name: str) -> Any:
        return self._request.getfixturevalue(name)

    @property
    def retriever(self) -> Any:
        return self.store.as_retriever()

    @property
    def li_llm(self) -> Any:
        return li_starter.local_llm(self.base_url, self.model_name)


@pytest.fixture(scope="module")
def li_index(base_url: str, model_name: str, minilm_path: str, pydoc_dir: Any) -> Iterator[Any]:
    """The starter tutorial's index; `Settings` configured as the pages do for the module's
    LlamaIndex cases, restored after them."""
    from llama_index.core import Settings

    saved = {name: value for name, value in vars(Settings).items() if name.startswith("_") and not name.startswith("__")}
    li_starter.configure(base_url, model_name, minilm_path)
    try:
        yield li_starter.build(str(pydoc_dir))[0]
    finally:
        for name, value in saved.items():
            setattr(Settings, name, value)


CASES: dict[str, Any] = {
    # LangChain: LCEL sequences and bindings, retrievers, RunnableWithMessageHistory, a legacy Chain
    "lc_cross_encoder_reranker": lambda w: lc_cross_encoder_reranker.build(w.retriever, w.reranker_dir),
    "lc_llm_chain_migration.legacy": lambda w: lc_llm_chain_migration.legacy(w.base_url, w.model_name),
    "lc_llm_chain_migration.lcel": lambda w: lc_llm_chain_migration.lcel(w.base_url, w.model_name),
    "lc_llm_chain_migration.lcel_outer": lambda w: lc_llm_chain_migration.lcel_outer(w.base_url, w.model_name),
    "lc_message_history": lambda w: lc_message_history.build(w.chat),
    "lc_multi_query": lambda w: lc_multi_query.build(w.store, w.base_url, w.model_name),
    "lc_multi_query_custom_prompt": lambda w: lc_multi_query_custom_prompt.build(w.store, w.base_url, w.model_name),
    "lc_pgvector.filtered_retriever": lambda w: lc_pgvector.filtered_retriever(w.store, sorted(lc_pgvector.FILTERS)[0]),
    "lc_pgvector.mmr_retriever": lambda w: lc_pgvector.mmr_retriever(w.store),
    "lc_qa_sources": lambda w: lc_qa_sources.build(w.retriever, w.chat),
    "lc_rag_builtin_chains": lambda w: lc_rag_builtin_chains.build(w.retriever, w.chat),
    "lc_rag_custom_prompt": lambda w: lc_rag_custom_prompt.build(w.retriever, w.chat),
    "lc_rag_tutorial": lambda w: lc_rag_tutorial.build(w.store, w.chat),
    "lc_vllm_openai": lambda w: lc_vllm_openai.llm_chain(lc_vllm_openai.completion_llm(w.base_url, w.model_name)),
    # LangGraph graphs
    "lg_lcel_nodes": lambda w: lg_lcel_nodes.build(w.store, w.chat),
    "lg_map_reduce": lambda w: lg_map_reduce.build(w.chat),
    "lg_rag_part1": lambda w: lg_rag_part1.build(w.store, w.chat),
    "lg_rag_part1.with_query_analysis": lambda w: lg_rag_part1.build_with_query_analysis(w.store, w.chat),
    "lg_rag_part2": lambda w: lg_rag_part2.build(w.store, w.chat),
    "lg_router_memory": lambda w: lg_router_memory.build(w.chat, w.store),
    "lg_self_rag": lambda w: lg_self_rag.build(w.store, w.chat),
    # LlamaIndex: query / chat / router / sub-question engines, fusion retrievers, workflows,
    # agents, ingestion
    **{f"li_chat_engines.{mode}": (lambda w, mode=mode: li_chat_engines.chat_engine(mode, w.li_index, w.li_llm))
       for mode in li_chat_engines.MODES},
    "li_ingestion_pipeline": lambda w: li_ingestion_pipeline.pipeline(w.minilm_path),
    "li_pgvector": lambda w: li_pgvector.create_index(str(w.pydoc_dir), w.pg_dsn, f"ident_{uuid.uuid4().hex[:8]}"),
    **{f"li_query_engine_usage.{name}": (lambda w, name=name: getattr(li_query_engine_usage, name)(w.li_index))
       for name in ("high_level", "low_level", "streaming", "custom")},
    "li_router": lambda w: li_router.build(str(w.pydoc_dir)),
    "li_sentence_transformer_rerank": lambda w: li_sentence_transformer_rerank.build(
        str(w.pydoc_dir), w.base_url, w.model_name, w.minilm_path, w.reranker_dir)[0],
    "li_simple_fusion": lambda w: li_simple_fusion.build(w.pydoc_files[:2], w.pydoc_files[2:]),
    "li_starter": lambda w: li_starter.build(str(w.pydoc_dir))[1],
    "li_sub_question": lambda w: li_sub_question.build(w.pydoc_files, fixed_questions=True),
    "li_workflows.joke_flow": lambda w: li_workflows.joke_flow(w.li_llm),
    "li_workflows.agent": lambda w: li_workflows.agent(w.li_llm),
}


@pytest.mark.parametrize("build", list(CASES.values()), ids=list(CASES))
def test_wrapped_app_is_an_instance_of_its_class(build: Callable[[World], Any], request: pytest.FixtureRequest) -> None:
    if request.node.callspec.id.startswith("li_"):
        request.getfixturevalue("li_index")  # the pages' `Settings`
    app = build(World(request))
    fast = accel.wrap(app)
    assert isinstance(fast, type(app)), f"accel.wrap gave a {type(fast).__qualname__}, not a {type(app).__qualname__}"
    assert type(fast) is not type(app) and state_of(fast) is not None  # accel's drop-in, not the app itself
    assert accel.wrap(fast) is fast


def test_wrapped_index_class_is_a_subclass_of_it(li_index: Any) -> None:
    """`accel.wrap(VectorStoreIndex)`, the starter tutorial's indexing class, is one of it."""
    from llama_index.core import VectorStoreIndex

    fast = accel.wrap(VectorStoreIndex)
    assert isinstance(fast, type) and issubclass(fast, VectorStoreIndex) and fast is not VectorStoreIndex
    assert state_of(fast) is not None


def test_retriever_query_engine_alone_and_in_a_router_is_the_same_drop_in(li_index: Any, pydoc_dir: Any) -> None:
    from llama_index.core.query_engine import RetrieverQueryEngine

    alone = accel.wrap(li_index.as_query_engine())
    router = accel.wrap(li_router.build(str(pydoc_dir)))
    nested = [e for e in router._query_engines if isinstance(e, RetrieverQueryEngine)]
    assert nested, "the router's vector tool answers through a RetrieverQueryEngine"
    for engine in (alone, *nested):
        assert type(engine).__mro__[1] is RetrieverQueryEngine and type(engine).__name__ == "RetrieverQueryEngine"
        state = state_of(engine)
        assert state is not None and type(state.helper) is type(state_of(alone).helper)
