"""`SentenceTransformerRerank` through the shared cross-encoder.

Stock `_postprocess_nodes` pairs the query with each node's embed-mode content, scores the
pairs with `CrossEncoder.predict` inside a RERANKING callback event, sets the scores on the
nodes and keeps the `top_n` best. The replacement is that method with the scoring sent to the
shared reranker engine (the same model, loaded and called the same way, many programs' pairs
per call) and the scores returned as the same float32 array; the callback event, the scoring
and the ordering are stock's code. Read from llama-index-core 0.14's
`SentenceTransformerRerank._postprocess_nodes`. Anything `bind_reranker` does not reproduce,
and a missing query bundle or empty node list, stays stock.
"""

from __future__ import annotations

import functools
from typing import Any

from accel.adapters.common.floor import Plugin, register, route
from accel.adapters.llamaindex.floor.spans import keep_span
from accel.engines.errors import EngineError
from accel.types import EngineCall, OnSessionLoop

COMPONENT = "SentenceTransformerRerank"


def _scores(run: Any, postprocessor: Any, pairs: list[tuple[str, str]]) -> Any:
    import numpy

    from accel.adapters.llamaindex.bindings import Unbound, bind_reranker

    binding = bind_reranker(postprocessor)
    if isinstance(binding, Unbound):
        route.note_stock(COMPONENT, binding.reason)
        return postprocessor._model.predict(pairs)
    try:
        scores = route.session_of(run).call(run, EngineCall(binding.engine, pairs, COMPONENT))
    except (EngineError, OnSessionLoop) as err:
        route.note_fallback(COMPONENT, err)
        return postprocessor._model.predict(pairs)
    route.stats.count("routed", COMPONENT)
    return numpy.asarray(scores, dtype=numpy.float32)


def _postprocess(original: Any) -> Any:
    @functools.wraps(original)
    def _postprocess_nodes(self: Any, nodes: list[Any], query_bundle: Any = None) -> list[Any]:
        run = route.active_run()
        if run is None or query_bundle is None or len(nodes) == 0:
            return original(self, nodes, query_bundle)
        from llama_index.core.callbacks import CBEventType, EventPayload
        from llama_index.core.schema import MetadataMode

        query_and_nodes = [(query_bundle.query_str, node.node.get_content(metadata_mode=MetadataMode.EMBED)) for node in nodes]
        with self.callback_manager.event(
            CBEventType.RERANKING,
            payload={EventPayload.NODES: nodes, EventPayload.MODEL_NAME: self.model,
                     EventPayload.QUERY_STR: query_bundle.query_str, EventPayload.TOP_K: self.top_n},
        ) as event:
            scores = _scores(run, self, query_and_nodes)
            assert len(scores) == len(nodes)
            for node, score in zip(nodes, scores):
                if self.keep_retrieval_score:
                    node.node.metadata["retrieval_score"] = node.score
                node.score = score
            new_nodes = sorted(nodes, key=lambda x: -x.score if x.score else 0)[: self.top_n]
            event.on_end(payload={EventPayload.NODES: new_nodes})
        return new_nodes

    return _postprocess_nodes


MODULE = "llama_index.core.postprocessor.sbert_rerank"
register(Plugin("llamaindex:" + COMPONENT, MODULE, "SentenceTransformerRerank",
                {"_postprocess_nodes": keep_span(MODULE, _postprocess)}))
