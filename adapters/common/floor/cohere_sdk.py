"""The floor's rerank plug-in: the `cohere` SDK's `ClientV2.rerank` on a self-hosted server.

LangChain's `CohereRerank` and LlamaIndex's `CohereRerank` both call `ClientV2.rerank(model,
query, documents, top_n)`; pointed at a vLLM pooling server (`base_url`), it posts Cohere's
`/v2/rerank`, one query per request, which vLLM serves with the same model and pooler as
`/score`. During a wrapped run the (query, document) pairs go to the server's shared rerank
engine instead, which scores many programs' pairs in one `/score` request, and the answer is
rebuilt as vLLM builds it: results by descending score (ties in document order), cut to
`top_n`, each with its index, score and document text. Scores equal stock's to float32
rounding (vLLM-CPU's scores move in the 8th digit with what shares a forward pass, stock's own
requests too); `id` is accel's and `usage` is left out (a merged request's tokens are not one
caller's). Options it does not map (`max_tokens_per_doc`, `priority`, request options), and
Cohere's own hosted API, stay stock; so does an option passed as None, which the SDK sends as
null: LangChain's `CohereRerank` always passes `max_tokens_per_doc=None`, and vLLM answers that
with 400, so stock fails there and the wrapped app fails the same way. A call whose every pair the
query's score sheet holds (`accel.adapters.common.rerank_ahead`) is answered from it.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from accel.adapters.common import rerank_ahead
from accel.adapters.common.floor import route
from accel.adapters.common.floor.plugins import Plugin, register, routed
from accel.adapters.common.server_encoders import rerank_server
from accel.types import EngineCall, EngineSpec

COMPONENT = "cohere:ClientV2.rerank"
_HOSTED = ("api.cohere.com", "api.cohere.ai")


def _omitted(value: Any) -> bool:
    """Not passed at all (the SDK's OMIT): None is sent, as null."""
    return value is Ellipsis


def server_engine(client: Any, model: str) -> EngineSpec | str:
    """The shared rerank engine of a `ClientV2` on a self-hosted server, or why not."""
    base_url = str(client._client_wrapper.get_base_url()).rstrip("/")
    if any(host in base_url for host in _HOSTED):
        return "Cohere's hosted API"
    auth = client._client_wrapper.get_headers().get("Authorization", "")
    return rerank_server(base_url, model, auth.removeprefix("Bearer ") or "EMPTY")


def _rerank(client: Any, *, model: str, query: str, documents: Any, top_n: Any = Ellipsis,
            max_tokens_per_doc: Any = Ellipsis, priority: Any = Ellipsis, request_options: Any = None) -> EngineCall | str:
    engine = server_engine(client, model)
    if isinstance(engine, str):
        return engine
    if not (_omitted(max_tokens_per_doc) and _omitted(priority) and request_options is None):
        return "max_tokens_per_doc / priority / request_options"
    docs = list(documents)
    if not docs or not isinstance(query, str) or not all(isinstance(d, str) for d in docs):
        return "no documents, or documents that are not strings"
    if not _omitted(top_n) and (not isinstance(top_n, int) or top_n < 0):
        return f"top_n={top_n!r}"
    limit = None if _omitted(top_n) or top_n == 0 else int(top_n)
    return EngineCall(engine, [(query, d) for d in docs], COMPONENT, shape=lambda scores: _response(model, docs, scores, limit))


def _sheet_first(original: Any) -> Any:
    """`rerank` answered from the query's score sheet when it holds every pair, scored on the
    server and model the call names (no engine call and no wrapped run needed: it runs on the
    session loop); otherwise routed as any call."""
    routed_rerank = routed(COMPONENT, _rerank)(original)

    @functools.wraps(original)
    def rerank(self: Any, *args: Any, **kwargs: Any) -> Any:
        sheet = rerank_ahead.current()
        if sheet is not None:
            try:
                call = _rerank(self, *args, **kwargs)
            except Exception:  # bad input: the routed path lets stock raise its own error
                call = None
            if isinstance(call, EngineCall) and sheet.answers(call.engine, call.requests):
                route.stats.count("routed", f"{COMPONENT} (from the score sheet)")
                return call.shape(sheet.lookup(call.requests))
        return routed_rerank(self, *args, **kwargs)

    return rerank


def _response(model: str, docs: list[str], scores: list[float], top_n: int | None) -> Any:
    from cohere.v2.types.v2rerank_response import V2RerankResponse
    from cohere.v2.types.v2rerank_response_results_item import V2RerankResponseResultsItem

    order = sorted(range(len(docs)), key=lambda i: scores[i], reverse=True)[:top_n]
    results = [V2RerankResponseResultsItem(index=i, relevance_score=scores[i],
                                           document={"text": docs[i], "multi_modal": None}) for i in order]
    return V2RerankResponse(id=f"accel-{uuid.uuid4().hex}", results=results, meta=None, model=model)


register(Plugin(COMPONENT, "cohere.v2.client", "V2Client", {"rerank": _sheet_first}))
