"""A LangChain cross-encoder over a self-hosted rerank server (vLLM, TEI, Infinity).

LangChain's `CohereRerank` always sends `max_tokens_per_doc: null`, which vLLM refuses, so a
self-hosted deployment keeps `CrossEncoderReranker` and gives it this small `BaseCrossEncoder`:
one Cohere-shaped `/v2/rerank` request per query, through the `cohere` SDK.
"""

from __future__ import annotations

from typing import Any

from langchain_community.cross_encoders import BaseCrossEncoder


class ServerCrossEncoder(BaseCrossEncoder):
    """Scores (query, text) pairs on a rerank server, returned in the pairs' order."""

    def __init__(self, client: Any, model: str) -> None:
        self.client, self.model = client, model

    @classmethod
    def for_server(cls, base_url: str, model: str) -> ServerCrossEncoder:
        import cohere

        return cls(cohere.ClientV2(api_key="EMPTY", base_url=base_url.rstrip("/").removesuffix("/v1")), model)

    def score(self, text_pairs: list[tuple[str, str]]) -> list[float]:
        scores = [0.0] * len(text_pairs)
        by_query: dict[str, list[int]] = {}
        for i, (query, _) in enumerate(text_pairs):
            by_query.setdefault(query, []).append(i)
        for query, positions in by_query.items():
            answer = self.client.rerank(model=self.model, query=query, documents=[text_pairs[i][1] for i in positions])
            for result in answer.results:
                scores[positions[result.index]] = result.relevance_score
        return scores
