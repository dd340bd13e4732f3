"""`SubQuestionQueryEngine.query` with its sub-questions answered side by side.

Stock `_query` with `use_async=False` answers the generated sub-questions one after another,
although none reads another's answer. The drop-in runs `_query_subq` (the engine's own method,
with its callback events and its own failure handling) for every sub-question at once on a
small thread pool owned by the call, each in a copy of the caller's context (the wrapped run,
the active span), then synthesises from the answers in sub-question order exactly as stock.
The tools' query engines are lowered drop-ins, so the concurrent sub-queries batch on accel's
engines. With `use_async=True` the engine's own code already gathers them and is kept.

Read from llama-index-core 0.14's `SubQuestionQueryEngine._query`; the body below is that
method with the sequential list comprehension replaced.
"""

from __future__ import annotations

import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import llama_index.core.instrumentation as instrument

MAX_BRANCHES = 16


def _query(self: Any, query_bundle: Any) -> Any:
    from llama_index.core.callbacks.schema import CBEventType, EventPayload
    from llama_index.core.query_engine import SubQuestionQueryEngine
    from llama_index.core.utils import get_color_mapping, print_text

    if self._use_async:
        return SubQuestionQueryEngine._query(self, query_bundle)
    with self.callback_manager.event(CBEventType.QUERY, payload={EventPayload.QUERY_STR: query_bundle.query_str}) as query_event:
        sub_questions = self._question_gen.generate(self._metadatas, query_bundle)
        colors = get_color_mapping([str(i) for i in range(len(sub_questions))])
        if self._verbose:
            print_text(f"Generated {len(sub_questions)} sub questions.\n")
        qa_pairs_all = _side_by_side(self, sub_questions, colors)
        qa_pairs = list(filter(None, qa_pairs_all))
        nodes = [self._construct_node(pair) for pair in qa_pairs]
        source_nodes = [node for qa_pair in qa_pairs for node in qa_pair.sources]
        response = self._response_synthesizer.synthesize(query=query_bundle, nodes=nodes, additional_source_nodes=source_nodes)
        query_event.on_end(payload={EventPayload.RESPONSE: response})
    return response


def _side_by_side(engine: Any, sub_questions: list[Any], colors: dict[str, str]) -> list[Any]:
    """`engine._query_subq` for each sub-question, concurrently, results in order."""
    if len(sub_questions) < 2:
        return [engine._query_subq(q, color=colors[str(i)]) for i, q in enumerate(sub_questions)]
    with ThreadPoolExecutor(max_workers=min(len(sub_questions), MAX_BRANCHES), thread_name_prefix="accel-subq") as pool:
        futures = [pool.submit(contextvars.copy_context().run, engine._query_subq, q, color=colors[str(i)])
                   for i, q in enumerate(sub_questions)]
        return [f.result() for f in futures]


@functools.cache
def sub_question_overrides() -> dict[str, Any]:
    """The drop-in's `_query`, traced as the class's own (one dict per process: the drop-in
    class is cached by its overrides)."""
    from llama_index.core.query_engine import SubQuestionQueryEngine

    _query.__qualname__ = f"{SubQuestionQueryEngine.__name__}._query"
    return {"_query": instrument.get_dispatcher(SubQuestionQueryEngine.__module__).span(_query)}
