"""The one engine protocol: batch in, results out, explicit lifecycle, measurable.

Every backend (vLLM, sentence-transformers, pgvector, BM25) implements `Engine`. The runtime's
engine schedulers only ever call `run(batch)` (and `stream`/`abort` on LLMs), so a scheduler can
batch requests from many queries without knowing which backend serves them.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeVar

from .errors import EmptyBatch, EngineDied

Req = TypeVar("Req")
Res = TypeVar("Res")

EngineKind = Literal["llm", "embed", "rerank", "vectordb", "search"]


@dataclass(frozen=True)
class Health:
    engine: str
    ok: bool
    detail: str
    latency_s: float | None = None


class Engine(abc.ABC, Generic[Req, Res]):
    """A locally hosted engine. `run` takes a non-empty batch and returns one result per item,
    in order. Model compute never runs on the event loop: backends use worker threads or the
    engine's own process."""

    kind: ClassVar[EngineKind]
    name: str

    async def start(self) -> None:
        """Load weights / open pools. Idempotent."""

    async def stop(self) -> None:
        """Release everything `start` acquired. Idempotent."""

    @abc.abstractmethod
    async def run(self, batch: Sequence[Req]) -> list[Res]: ...

    @abc.abstractmethod
    async def health(self) -> Health:
        """Check the engine with one real request."""

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


# ---- request and result types shared by the backends ---------------------------------------


@dataclass(frozen=True)
class SamplingParams:
    """The sampling parameters accel forwards unchanged (fidelity: same requests as stock)."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class GenerationRequest:
    """One LLM call: a raw `prompt` (completions), chat `messages`, or `prompt_token_ids`
    (used for prefix-cache warm-ups cut at a token-block boundary)."""

    prompt: str | None = None
    messages: list[dict[str, str]] | None = None
    prompt_token_ids: list[int] | None = None
    params: SamplingParams = field(default_factory=SamplingParams)
    priority: int = 0
    request_id: str | None = None

    def __post_init__(self) -> None:
        given = [x is not None for x in (self.prompt, self.messages, self.prompt_token_ids)]
        if sum(given) != 1:
            raise ValueError("GenerationRequest needs exactly one of prompt, messages, prompt_token_ids")


@dataclass
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    finish_reason: str | None = None
    request_id: str | None = None
    response: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """An OpenAI server's response fields besides the choices (`id`, `created`, `model`,
    `system_fingerprint`, `usage` as sent), what a framework's own response parser reads to
    build its message's metadata; None from engines that are no OpenAI server."""


@dataclass
class GenerationChunk:
    """A streamed piece of a generation; the last chunk has `finished=True` and the usage."""

    delta: str
    finished: bool = False
    generation: Generation | None = None
    finish_reason: str | None = None
    """Set on the text that came with the finish reason (vLLM sends the last text with it)."""


class LLMEngine(Engine[GenerationRequest, Generation]):
    kind = "llm"
    model: str
    max_model_len: int

    async def run(self, batch: Sequence[GenerationRequest]) -> list[Generation]:
        """All requests in flight at once (the engine batches them); results in order."""
        if not batch:
            raise EmptyBatch(self.name, "run() got an empty batch", "send at least one request")
        return list(await asyncio.gather(*(self.generate(r) for r in batch)))

    async def generate(self, request: GenerationRequest) -> Generation:
        """One request, streamed to the end; the final chunk carries the usage."""
        final: Generation | None = None
        async for chunk in self.stream(request):
            final = chunk.generation or final
        if final is None:
            raise EngineDied(self.name, "the output stream ended without a final output", "check the engine's log")
        return final

    @abc.abstractmethod
    def stream(self, request: GenerationRequest) -> AsyncIterator[GenerationChunk]: ...

    @abc.abstractmethod
    async def abort(self, request_id: str) -> None:
        """Stop a running request; its `run`/`stream` then raises `asyncio.CancelledError`."""

    @abc.abstractmethod
    async def tokenize(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Token ids exactly as the engine would see `text` as a prompt."""

    async def render_chat(self, messages: list[dict[str, str]]) -> str:
        """The prompt text the engine builds from chat messages (its chat template)."""
        raise NotImplementedError

    block_size: int = 16  # prefix caching reuses whole blocks of this many tokens


@dataclass(frozen=True)
class SearchHit:
    id: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TableScope:
    """Rows of a shared table that belong to one named group: those whose `foreign_key` equals
    the `key` of the row of `table` whose `name_column` is `value`."""

    table: str
    key: str
    foreign_key: str
    name_column: str
    value: str


@dataclass(frozen=True)
class TableLayout:
    """A vector table another library wrote, described by the adapter that knows the library
    (the engines know none): where its rows live, which columns hold the id, text and metadata,
    the group of rows it is (`scope`), and how metadata filters compile (`filter_dialect`:
    "jsonpath", Mongo-style operators on a JSONB column; "text_compare", `->>` values compared
    as numbers when the filter value is one, as text otherwise). The embedding column is
    `embedding`."""

    name: str
    """How errors and `explain()` name it (e.g. "langchain:docs")."""
    schema: str
    table: str
    id_column: str
    text_column: str
    metadata_column: str
    filter_dialect: Literal["jsonpath", "text_compare"] = "jsonpath"
    scope: TableScope | None = None

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class VectorQuery:
    """Nearest neighbours of one vector in one collection: an own table (its name) or a
    framework's table (its `TableLayout`)."""

    vector: Sequence[float]
    k: int
    collection: str | TableLayout
    metric: Literal["cosine", "l2", "ip"] = "cosine"
    filter: dict[str, Any] | None = None


@dataclass(frozen=True)
class TextQuery:
    """A keyword query for a search engine (BM25 locally; a web search API elsewhere)."""

    query: str
    k: int = 5
