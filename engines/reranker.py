"""Cross-encoder reranking as an accel engine.

LangChain's `HuggingFaceCrossEncoder.score` and LlamaIndex's `SentenceTransformerRerank` both
call `CrossEncoder.predict(pairs)` with its defaults: the activation the model's config names
(sigmoid for a one-label model that names none) and the tokenizer's maximum length (LlamaIndex
passes 512, which is the MiniLM tokenizers' own limit). This engine loads the model the same way
and calls `predict` the same way, so its scores are theirs; it only batches across queries and
keeps the compute in one worker thread, off the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accel.engines.base import Health
from accel.engines.errors import EmptyBatch, InvalidRequest, ModelNotFound
from accel.engines.worker import WorkerModelEngine
from accel.engines.offline.reranker import resolve_reranker

Pair = tuple[str, str]


def _check_pair(item: Any) -> Pair:
    if isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(text, str) for text in item):
        return (item[0], item[1])
    raise InvalidRequest(
        "rerank", f"cannot score {type(item).__name__} {item!r:.80}", "pass (query, passage) pairs of strings"
    )


class CrossEncoderReranker(WorkerModelEngine[Pair, float]):
    """Scores (query, passage) pairs with a sentence-transformers `CrossEncoder`.

    `model=None` uses the offline ms-marco-MiniLM-L-6-v2-shaped model (built on first start).
    `max_length=None` keeps the tokenizer's limit, as LangChain does; LlamaIndex's 512 is the
    same for MiniLM tokenizers. `threads` sets torch's intra-op threads for this engine's worker
    thread only (see `SentenceTransformerEmbedder`).
    """

    kind = "rerank"

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "cpu",
        max_batch: int = 16,
        max_length: int | None = None,
        threads: int | None = None,
        name: str | None = None,
    ) -> None:
        self._init_worker(max_batch=max_batch, threads=threads)
        self.model_spec = None if model is None else str(model)
        if self.model_spec is not None:  # fail on a missing path now, not at the first query
            self.model_spec = resolve_reranker(self.model_spec)
        self.name = name or (Path(self.model_spec).name if self.model_spec else "rerank-minilm-l6")
        self.device = device
        self.max_length = max_length

    def _load_model(self) -> Any:
        from sentence_transformers import CrossEncoder

        path = resolve_reranker(self.model_spec)
        try:
            return CrossEncoder(path, device=self.device, max_length=self.max_length, local_files_only=True)
        except OSError as err:
            raise ModelNotFound(
                self.name, f"sentence-transformers could not load cross-encoder {path!r} ({err})",
                "pass a complete cross-encoder model directory",
            ) from err

    async def run(self, batch: Sequence[Pair]) -> list[float]:
        if len(batch) == 0:
            raise EmptyBatch(self.name, "run() got an empty batch", "send at least one (query, passage) pair")
        pairs = [_check_pair(item) for item in batch]
        return await self._in_worker(self._predict, pairs)

    def _predict(self, pairs: list[Pair]) -> list[float]:
        """Forward passes of `max_batch` pairs of similar length: a call may carry several
        queries' pairs, and padding every pair to the longest in a mixed batch cost about a
        quarter of the compute here. A pair's score does not depend on its batch neighbours
        (beyond float rounding, ~3e-8), so the order is restored afterwards."""
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        scores = self._started().predict([pairs[i] for i in order], batch_size=self.max_batch, show_progress_bar=False)
        if scores.ndim > 1:  # two-label models: LangChain keeps the "relevant" column
            scores = scores[:, 1]
        restored = [0.0] * len(pairs)
        for position, i in enumerate(order):
            restored[i] = float(scores[position])
        return restored

    async def health(self) -> Health:
        began = time.perf_counter()
        try:
            [score] = await self.run([("health check", "a passage to score")])
        except Exception as err:  # health reports failures instead of raising them
            return Health(self.name, False, f"{type(err).__name__}: {err}")
        return Health(self.name, True, f"score {score:.4f} from {self.model_spec or 'offline default'}",
                      time.perf_counter() - began)
