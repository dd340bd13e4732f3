"""The examples the harness knows: which module builds each framework's app, how its index is
built, and the shape of its critical path (for the lower bound)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accel.engines.errors import InvalidRequest


def sequential(n_calls: int) -> list[int]:
    """Every LLM call depends on the one before (expansion, then refine steps)."""
    return [1] * n_calls


def fan_in(n_calls: int) -> list[int]:
    """Independent calls, then one that combines them (map-reduce, tree summarize)."""
    return [n_calls - 1, 1] if n_calls > 1 else [n_calls]


def plan_fan_out_fan_in(n_calls: int) -> list[int]:
    """A planner, independent experts, an aggregator (Halo)."""
    return [1, n_calls - 2, 1] if n_calls > 2 else [1] * n_calls


def _zipf(queries: int, **options: Any) -> Any:
    from .workload import build_zipf_workload

    return build_zipf_workload(queries, **options)


@dataclass(frozen=True)
class ExampleSpec:
    name: str
    modules: dict[str, str]  # framework -> module exposing build_index / build_app
    description: str
    # sizes of the groups of mutually independent LLM calls, in call order
    llm_levels: Callable[[int], list[int]] = sequential
    embed_batch: int = 0  # queries embedded together on the critical path
    rerank_pairs: int = 0  # fewest (query, chunk) pairs cross-encoded together on the critical path
    search_k: int = 0  # chunks one vector search on the critical path returns (0: no search timed)
    app_options: dict[str, Any] = field(default_factory=dict)  # extra build_app keywords
    workload: Callable[..., Any] | None = None  # (queries, max_chars=, seed=) -> Workload; None: the default

    def module(self, framework: str) -> Any:
        if framework not in self.modules:
            raise InvalidRequest("bench", f"{self.name} has no {framework} app", f"use one of {sorted(self.modules)}")
        return importlib.import_module(self.modules[framework])


EXAMPLES: dict[str, ExampleSpec] = {
    "advanced-rag": ExampleSpec(
        "advanced-rag",
        {"langchain": "accel.examples.langchain.advanced_rag", "llamaindex": "accel.examples.llamaindex.advanced_rag"},
        "query expansion into 3 queries, 16 chunks each, rerank to top 3, refine synthesis",
        embed_batch=3,
        rerank_pairs=16,  # the union of the 3 result lists holds at least 16 distinct chunks
        search_k=16,
    ),
    "naive-rag": ExampleSpec(
        "naive-rag",
        {"langchain": "accel.examples.langchain.naive_rag", "llamaindex": "accel.examples.llamaindex.naive_rag"},
        "chunk 256 / overlap 30, embed, ingest into pgvector, top-3, one call (LangChain) / tree summarize (LlamaIndex)",
        llm_levels=fan_in, embed_batch=1, search_k=3,
    ),
    "chat": ExampleSpec(
        "chat", {"llamaindex": "accel.examples.llamaindex.chat"},
        "condense-plus-context chat engine, conversations of 3 turns (condense, top-3, answer with history)",
        llm_levels=sequential, embed_batch=1,
    ),
    "search-generation": ExampleSpec(
        "search-generation", {"langchain": "accel.examples.langchain.search_generation"},
        "proxy LLM drafts, judge LLM decides whether to search, core LLM answers with the results",
        embed_batch=1,
    ),
    "contextual-retrieval": ExampleSpec(
        "contextual-retrieval", {"langchain": "accel.examples.langchain.contextual_retrieval"},
        "chunks contextualised by a small LLM before indexing; retrieve 32, rerank to 3, one call",
        embed_batch=1, rerank_pairs=32, search_k=32,
    ),
    "map-reduce-summary": ExampleSpec(
        "map-reduce-summary", {"langchain": "accel.examples.langchain.summaries"},
        "Parrot: 8 chunk summaries, then one combining call", llm_levels=fan_in, embed_batch=1,
        app_options={"style": "map-reduce"},
    ),
    "map-reduce-lcel": ExampleSpec(
        "map-reduce-lcel", {"langchain": "accel.examples.langchain.summaries"},
        "Parrot: 8 chunk summaries with LCEL's .map(), then one combining call", llm_levels=fan_in, embed_batch=1,
        app_options={"style": "map-reduce-lcel"},
    ),
    "chain-summary": ExampleSpec(
        "chain-summary", {"langchain": "accel.examples.langchain.summaries"},
        "Parrot: one running summary refined chunk by chunk", embed_batch=1, app_options={"style": "chain"},
    ),
    "research-graph": ExampleSpec(
        "research-graph", {"langchain": "accel.examples.langgraph.research_graph"},
        "LangGraph: retrieval beside a planner, two experts side by side, a writer (4 LLM calls)",
        llm_levels=plan_fan_out_fan_in, embed_batch=1,
    ),
    "self-rag": ExampleSpec(
        "self-rag", {"langchain": "accel.examples.langgraph.self_rag"},
        "LangGraph's Self-RAG tutorial: retrieve 4, grade each in turn, generate, grade the answer twice (7 LLM calls)",
        llm_levels=sequential, embed_batch=1,
    ),
    "multi-agent": ExampleSpec(
        "multi-agent", {"langchain": "accel.examples.langchain.multi_agent"},
        "Halo: planner, three expert agents side by side, aggregator", llm_levels=plan_fan_out_fan_in,
    ),
    "role-agents": ExampleSpec(
        "role-agents", {"langchain": "accel.examples.langchain.role_agents"},
        "Parrot: architect, three coders side by side, reviewer; every prompt opens with one long team charter",
        llm_levels=plan_fan_out_fan_in,
    ),
    "rag-repeats": ExampleSpec(
        "rag-repeats", {"langchain": "accel.examples.langchain.advanced_rag"},
        "advanced RAG over 20 documents; questions drawn Zipf (s=1.1, seeded) from 60 distinct ones",
        embed_batch=3, rerank_pairs=16, search_k=16, workload=_zipf,
    ),
}


def example(name: str) -> ExampleSpec:
    if name not in EXAMPLES:
        raise InvalidRequest("bench", f"unknown example {name!r}", f"use one of {sorted(EXAMPLES)}")
    return EXAMPLES[name]
