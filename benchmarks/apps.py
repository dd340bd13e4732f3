"""The examples the harness knows: which module builds each framework's app, how its index is
built, and the shape of its critical path (for the lower bound)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accel.engines.errors import InvalidRequest


def sequential(n_calls: int) -> list[int]:
    """Every LLM call depends on the one before (expansion, then refine steps)."""
    return [1] * n_calls


@dataclass(frozen=True)
class ExampleSpec:
    name: str
    modules: dict[str, str]  # framework -> module exposing build_index / build_app
    description: str
    # sizes of the groups of mutually independent LLM calls, in call order
    llm_levels: Callable[[int], list[int]] = sequential
    embed_batch: int = 0  # queries embedded together on the critical path
    rerank_pairs: int = 0  # fewest (query, chunk) pairs cross-encoded together on the critical path

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
    ),
}


def example(name: str) -> ExampleSpec:
    if name not in EXAMPLES:
        raise InvalidRequest("bench", f"unknown example {name!r}", f"use one of {sorted(EXAMPLES)}")
    return EXAMPLES[name]
