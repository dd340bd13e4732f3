"""Measured batching profiles of engines: how throughput grows with batch size.

The runtime's stage decomposition and batch limits need each engine's *max efficient batch*:
past it a bigger batch only adds latency. It depends on the engine, the machine and the input
length (short queries batch far better than 256-token chunks on a CPU), so it is measured, not
configured, and saved as JSON under `<ACCEL_HOME>/profiles/` for the runtime to read.

`python -m accel.engines.profile` profiles the default embedder and reranker.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import json
import logging
import math
import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accel.config import settings
from accel.engines import machine_load
from accel.engines.base import Engine
from accel.engines.errors import InvalidRequest
from accel.engines.machine_load import MachineLoad

if TYPE_CHECKING:
    from rich.progress import Progress

DEFAULT_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
DEFAULT_TOLERANCE = 0.10

log = logging.getLogger("accel.engines.profile")


@dataclass(frozen=True)
class ProfilePoint:
    """One batch size: items per second and the wall time of one `run(batch)`."""

    batch_size: int
    throughput: float
    latency_s: float


@dataclass(frozen=True)
class PrefillCost:
    """What a lone prompt costs an LLM server by its length: prompt-only requests (`max_tokens`
    1, every prompt new to the prefix cache) at two lengths, the fastest of the repeats of each.
    The line through them splits a request's latency into what any request costs
    (`request_s`: HTTP, scheduling, one step's floor) and what each prompt token adds
    (`token_s`). Speculative prefills read it: a warm-up pays only when the prefill it takes
    off a request's path outweighs a request's own cost (`warm_min_tokens`)."""

    short_tokens: int
    short_s: float
    long_tokens: int
    long_s: float

    @property
    def token_s(self) -> float:
        """Seconds one more prompt token adds to a lone request (never below 0)."""
        return max(0.0, (self.long_s - self.short_s) / (self.long_tokens - self.short_tokens))

    @property
    def request_s(self) -> float:
        """Seconds a lone request costs whatever its prompt (the line's value at 0 tokens)."""
        return max(0.0, self.short_s - self.token_s * self.short_tokens)

    @property
    def warm_min_tokens(self) -> int:
        """The fewest prompt tokens whose prefill takes as long as a request costs: a warm-up
        of fewer saves the real request less than the warm-up's own request spends."""
        if self.token_s <= 0:
            return self.long_tokens  # prefill too cheap to measure: nothing shorter pays
        return math.ceil(self.request_s / self.token_s)


@dataclass(frozen=True)
class EngineProfile:
    engine: str
    label: str
    points: list[ProfilePoint]
    max_efficient_batch: int
    measured_at: str | None = None
    """When the sweep ran (UTC, ISO 8601); None in profiles saved before it was recorded."""
    busy_cores: float | None = None
    """The most CPU other processes used just before and just after the sweep, in cores
    (`machine_load`); None: not measured."""
    prefill: PrefillCost | None = None
    """LLM profiles: a lone prompt's cost by its length; None: not measured (other engines,
    profiles saved before it was)."""

    @property
    def busy(self) -> bool:
        """Measured while other work took the machine's cores: its figures read slow."""
        return self.busy_cores is not None and self.busy_cores > machine_load.QUIET_BUSY_CORES

    @property
    def speedup(self) -> float:
        """Throughput at the max efficient batch over throughput at batch size 1."""
        by_size = {point.batch_size: point.throughput for point in self.points}
        if 1 not in by_size:
            raise InvalidRequest("profile", f"{self.engine}/{self.label} has no batch-size-1 point",
                                 "include 1 in batch_sizes")
        return by_size[self.max_efficient_batch] / by_size[1]

    @property
    def max_efficient_batch_size(self) -> int:
        """Alias read by `accel.runtime.limits.EngineLimits.from_profile`."""
        return self.max_efficient_batch

    @staticmethod
    def default_path(engine: str, label: str) -> Path:
        safe = "--".join(part for part in engine.split("/") if part)
        return settings().profiles_dir / f"{safe}-{label}.json"

    def save(self, path: Path | None = None) -> Path:
        """Write atomically (temporary file, then rename) so readers never see half a profile."""
        path = Path(path) if path is not None else self.default_path(self.engine, self.label)
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        staging.write_text(json.dumps(asdict(self), indent=2))
        os.replace(staging, path)
        return path

    @classmethod
    def load(cls, path: Path) -> EngineProfile:
        try:
            data = json.loads(Path(path).read_text())
            points = [ProfilePoint(**point) for point in data["points"]]
            busy = data.get("busy_cores")
            prefill = data.get("prefill")
            return cls(data["engine"], data["label"], points, int(data["max_efficient_batch"]),
                       data.get("measured_at"), None if busy is None else float(busy),
                       None if prefill is None else PrefillCost(**prefill))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise InvalidRequest(
                "profile", f"{path} is not a readable engine profile ({type(err).__name__}: {err})",
                "delete it and run `python -m accel.engines.profile` again",
            ) from err


def choose_max_efficient_batch(points: Sequence[ProfilePoint], tolerance: float = DEFAULT_TOLERANCE) -> int:
    """The smallest batch size whose throughput is within `tolerance` (10%) of the best measured.

    Past that size throughput has stopped growing (within measurement noise), so a larger
    batch only makes its items wait longer.
    """
    if not points:
        raise InvalidRequest("profile", "no profile points to choose from", "measure at least one batch size")
    best = max(point.throughput for point in points)
    return min(point.batch_size for point in points if point.throughput >= (1.0 - tolerance) * best)


async def profile_engine(
    engine: Engine[Any, Any],
    make_batch: Callable[[int], Sequence[Any]],
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    *,
    label: str,
    repeats: int = 3,
    warmup: int = 1,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: Progress | None = None,
    fresh: bool = False,
    until_flat: bool = False,
    load_probe: Callable[[], Awaitable[MachineLoad | None]] | None = machine_load.measure,
) -> EngineProfile:
    """Time `engine.run(make_batch(n))` for each batch size: `warmup` untimed calls, then the
    fastest of `repeats` timed calls (as `timeit` does: other processes on the machine only
    ever add time, so the minimum is the least disturbed estimate of the engine's own cost).
    Sizes are measured in increasing order; `until_flat` stops after the first size that gains
    less than `tolerance` over the one before, so one sweep reaches a GPU's large batches
    without spending minutes on a CPU's (whose throughput flattens by batch 32).

    `load_probe` measures the other processes' CPU while the engine is idle, before and after
    the sweep; the profile records the larger, and a busy machine is logged (None: skip)."""
    sizes = sorted(set(batch_sizes))
    if not sizes or sizes[0] < 1 or repeats < 1 or warmup < 0:
        raise InvalidRequest("profile", f"batch_sizes={batch_sizes}, repeats={repeats}, warmup={warmup}",
                             "pass positive batch sizes, repeats >= 1 and warmup >= 0")
    task = None
    if progress is not None:
        task = progress.add_task(f"{engine.name}/{label}", total=len(sizes) * (warmup + repeats))
    await engine.start()
    measured_at = datetime.now(UTC).isoformat(timespec="seconds")
    loads = [await load_probe()] if load_probe is not None else []
    points = []
    for size in sizes:
        batch = make_batch(size)
        if len(batch) != size:
            raise InvalidRequest("profile", f"make_batch({size}) returned {len(batch)} items",
                                 "return exactly the requested number of items")
        timings = []
        for attempt in range(warmup + repeats):
            if fresh and attempt:  # a new batch per run: repeats must not hit a cache (vLLM prefixes)
                batch = make_batch(size)
            began = time.perf_counter()
            await engine.run(batch)
            if attempt >= warmup:
                timings.append(time.perf_counter() - began)
            if progress is not None and task is not None:
                progress.advance(task)
        latency = min(timings)
        points.append(ProfilePoint(size, size / latency, latency))
        if until_flat and len(points) > 1 and points[-1].throughput < (1.0 + tolerance) * points[-2].throughput:
            break
    if task is not None and progress is not None:
        progress.update(task, completed=len(sizes) * (warmup + repeats))
    if load_probe is not None:
        loads.append(await load_probe())
    measured = [load for load in loads if load is not None]
    busiest = max(measured, key=lambda load: load.busy_cores) if measured else None
    if busiest is not None and not busiest.quiet:
        log.warning("%s/%s was profiled while %s: its figures read slower than the engine is, and accel "
                    "sizes its calls from them; run `accel profile` again on a quiet machine",
                    engine.name, label, busiest.describe())
    return EngineProfile(engine.name, label, points, choose_max_efficient_batch(points, tolerance), measured_at,
                         None if busiest is None else round(busiest.busy_cores, 2))


def load_max_batches(directory: Path | None = None) -> dict[str, int]:
    """Batch limits from saved profiles, for the runtime's engine schedulers.

    Keys are `"<engine>/<label>"` for each profile, and `"<engine>"` with the smallest limit
    over its labels (past it, at least one measured workload stops gaining). No profiles: {}.
    """
    directory = Path(directory) if directory is not None else settings().profiles_dir
    limits: dict[str, int] = {}
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        profile = EngineProfile.load(path)
        limits[f"{profile.engine}/{profile.label}"] = profile.max_efficient_batch
        limits[profile.engine] = min(limits.get(profile.engine, profile.max_efficient_batch),
                                     profile.max_efficient_batch)
    return limits


# ---- the standard input sets, cut from the pydoc corpus ----------------------------------

_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z])")
_PLAIN_WORD = re.compile(r"[A-Za-z][a-z]*[,.;:]?")
CHUNK_TOKENS = 256


@functools.cache
def _corpus() -> tuple[str, ...]:
    from accel.engines.offline.corpus import stdlib_docs

    return tuple(doc.text for doc in stdlib_docs())


@functools.cache
def _sentences() -> tuple[tuple[str, ...], ...]:
    """Distinct docstring sentences of at least 8 words, nearly all plain English words."""
    found: dict[tuple[str, ...], None] = {}  # insertion-ordered set: inherited docstrings repeat
    for text in _corpus():
        for sentence in _SENTENCE_END.split(" ".join(text.split())):
            words = tuple(sentence.split())
            plain = sum(1 for word in words if _PLAIN_WORD.fullmatch(word))
            if len(words) >= 8 and plain >= 0.9 * len(words):
                found.setdefault(words)
    return tuple(found)


def query_texts(n: int) -> list[str]:
    """`n` query-length texts: the first 8 to 16 words of docstring sentences, in corpus order,
    the same on every call."""
    sentences = _sentences()
    return [" ".join(sentences[i % len(sentences)][:8 + (i * 5) % 9]) for i in range(n)]


@functools.cache
def _chunks() -> tuple[str, ...]:
    from tokenizers import Tokenizer

    from accel.engines.embeddings import packaged_minilm_path

    tokenizer = Tokenizer.from_file(str(packaged_minilm_path() / "tokenizer.json"))
    tokenizer.no_truncation()  # the packaged file truncates at 128 tokens; pages are cut here
    tokenizer.no_padding()
    budget = CHUNK_TOKENS - 2  # [CLS] and [SEP]
    chunks = []
    for text in _corpus():
        encoding = tokenizer.encode(text, add_special_tokens=False)
        word_starts = [i for i, token in enumerate(encoding.tokens) if not token.startswith("##")]
        begin = 0
        while begin + budget < len(encoding.tokens):  # the short tail of a page is dropped
            cut = word_starts[bisect.bisect_right(word_starts, begin + budget) - 1]
            cut = cut if cut > begin else begin + budget  # one word longer than the budget
            piece = text[encoding.offsets[begin][0]:encoding.offsets[cut - 1][1]]
            chunks.append(" ".join(piece.split()))
            begin = cut
    return tuple(chunks)


def chunk_texts(n: int) -> list[str]:
    """`n` chunk-length texts (about 256 MiniLM tokens, [CLS]/[SEP] included), the same on every
    call; consecutive pieces of the pydoc pages, cut at word boundaries."""
    chunks = _chunks()
    return [chunks[i % len(chunks)] for i in range(n)]


# ---- measuring the default engines --------------------------------------------------------


async def profile_default_engines(
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    *,
    threads: int | None = None,
    save: bool = True,
    progress: Progress | None = None,
) -> list[EngineProfile]:
    """Profile the packaged MiniLM embedder (query- and chunk-length texts) and the offline
    reranker ((query, chunk) pairs); save each profile to its default path unless told not to."""
    from accel.engines.profile_sweeps import profile_embedder, profile_reranker

    profiles = await profile_embedder(batch_sizes, threads=threads, progress=progress)
    profiles.append(await profile_reranker(batch_sizes, threads=threads, progress=progress))
    if save:
        for profile in profiles:
            profile.save()
    return profiles


async def profile_server_encoders(
    embed_url: str | None,
    rerank_url: str | None,
    rerank_model: str | None,
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    *,
    repeats: int = 3,
    save: bool = True,
    progress: Progress | None = None,
) -> list[EngineProfile]:
    """Profile encoder servers (`accel up --encoders server`, or those named by URL) as the
    in-process encoders are profiled: the embedding server on query- and chunk-length texts,
    the rerank server on (query, chunk) pairs, each batch one request. The profiles carry the
    names the session looks them up by to size the servers' calls: the served model's, for the
    embedding server (`EmbeddingServerEngine.profile_names`), and the rerank engine's, which
    already names its model."""
    from accel.engines.embed_server import EmbeddingServerEngine, ServerEmbedRequest, model_profile_name
    from accel.engines.rerank_server import RerankServerEngine

    profiles = []
    if embed_url:
        async with EmbeddingServerEngine(embed_url) as embedder:
            model = await embedder.served_model()
            params = (("encoding_format", "float"), ("model", model))
            embedder.name = model_profile_name(model)  # the profile outlives the server's port

            def texts(make: Callable[[int], list[str]]) -> Callable[[int], list[ServerEmbedRequest]]:
                return lambda n: [ServerEmbedRequest(text, params) for text in make(n)]

            for label, make in (("query", query_texts), ("chunk", chunk_texts)):
                profiles.append(await profile_engine(embedder, texts(make), batch_sizes, label=label,
                                                     repeats=repeats, progress=progress))
    if rerank_url and rerank_model:
        async with RerankServerEngine(rerank_url, rerank_model) as reranker:
            def pairs(n: int) -> list[tuple[str, str]]:
                return list(zip(query_texts(n), chunk_texts(n), strict=True))

            profiles.append(await profile_engine(reranker, pairs, batch_sizes, label="pairs", repeats=repeats,
                                                 progress=progress))
    if save:
        for profile in profiles:
            profile.save()
    return profiles


def _main() -> None:
    import argparse

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    parser = argparse.ArgumentParser(prog="python -m accel.engines.profile", description=__doc__)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(DEFAULT_BATCH_SIZES))
    parser.add_argument("--threads", type=int, default=None, help="torch threads per engine worker")
    parser.add_argument("--no-save", action="store_true", help="print the profiles only")
    args = parser.parse_args()
    with Progress() as progress:
        profiles = asyncio.run(profile_default_engines(
            args.batch_sizes, threads=args.threads, save=not args.no_save, progress=progress))
    table = Table("engine", "input", "batch", "items/s", "latency s", "max efficient", "speedup")
    for profile in profiles:
        for point in profile.points:
            mark = "*" if point.batch_size == profile.max_efficient_batch else ""
            table.add_row(profile.engine, profile.label, str(point.batch_size), f"{point.throughput:.1f}",
                          f"{point.latency_s:.3f}", mark, f"{profile.speedup:.1f}x" if mark else "")
    Console(width=120).print(table)


if __name__ == "__main__":
    _main()
