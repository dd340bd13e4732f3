"""Measured engine limits for the passes: saved `accel profile` results, or documented defaults.

Stage decomposition needs each engine's max efficient batch size per input-length class (a
query embeds in batches of 8 on two cores where a 256-token chunk gains nothing past 2). The
session loads the profiles saved on this machine once; without any, the defaults below (measured
on the project's reference machine, docs/profile.md) apply and `explain()` says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("accel.profiles")

CLASSES = ("query", "chunk", "pairs", "search")
"""Input-length classes: query-length texts, chunk-length texts, (query, chunk) pairs, and
vector searches."""

DEFAULTS: dict[str, dict[str, int]] = {
    "all-MiniLM-L6-v2": {"query": 8, "chunk": 2},
    "rerank-minilm-l6": {"pairs": 2},
    "pgvector": {"search": 16},
}
"""Max efficient batch per class on the reference machine (2 cores; docs/profile.md)."""

DEFAULT_SECONDS: dict[str, dict[str, float]] = {
    "all-MiniLM-L6-v2": {"query": 1 / 299.3, "chunk": 1 / 21.6},
    "rerank-minilm-l6": {"pairs": 1 / 20.5},
    "pgvector": {"search": 1 / 374.1},
}
"""Seconds per item at the max efficient batch on the reference machine (docs/profile.md)."""

DEFAULT_LLM_SPARE = 2
"""LLM requests in flight below which the engine still has spare capacity: the largest batch
whose requests take under `SPARE_SLOWDOWN` times a lone request's latency. 2 for both offline
models on the reference machine (docs/profile.md: 0.157 -> 0.189 s tiny, 0.574 -> 0.779 s bench
at batch 2; 1.6x and 2.2x at batch 4). A GPU's decode step barely slows up to batch 32-64
(GPU-FACTS), so a profile measured there gives a much larger figure."""
SPARE_SLOWDOWN = 1.5

DEFAULT_WARM_MIN_TOKENS = 0
"""Prompt tokens a prefix warm-up must carry to pay for its request when the LLM's prefill was
not profiled: 0, so any prefix of a full block is warmed (the behaviour before prefill was
measured; `accel profile` measures it, `engines.profile.PrefillCost`)."""

QUERY_CHARS, CHUNK_CHARS = 65, 700
"""Mean characters of the profiler's query-length and chunk-length texts (`engines/profile.py`)."""


@dataclass(frozen=True)
class MeasuredLimits:
    by_engine: Mapping[str, Mapping[str, int]]
    """Engine name (as engines report it) -> input class -> max efficient batch size."""
    source: str
    """Where they come from, for `explain()`."""
    seconds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Engine name -> input class -> seconds per item at the max efficient batch."""
    llm_spare: int = DEFAULT_LLM_SPARE
    """LLM requests in flight below which speculative work (learned prefill's warm-ups) costs
    the running requests little (`DEFAULT_LLM_SPARE`)."""
    overheads: Mapping[str, float] = field(default_factory=dict)
    """Engine name -> seconds one call costs whatever it carries (`call_overhead`), for the
    engines whose profiles measured batch size 1."""
    llm_batch: int | None = None
    """The batch at which the LLM server's measured throughput peaked (the sweep stops once a
    doubling gains under 10%); None: not profiled. Not the 10% knee the encoders use: a
    continuous-batching server admits a waiting request as soon as another ends, so requests
    held back below its peak only wait, without a batch of their own to shorten."""
    busy: tuple[str, ...] = ()
    """The saved profiles measured while other processes took the machine's cores, each as
    "<engine>/<label> (<cores> cores busy)": their figures read slow (`engines/machine_load`)."""
    warm_min_tokens: int = DEFAULT_WARM_MIN_TOKENS
    """The fewest prompt tokens a prefix warm-up must carry: below it, prefilling them takes
    the real request less time than the warm-up's own request costs (the LLM profile's
    `PrefillCost.warm_min_tokens`: a request's cost over a prompt token's)."""

    def for_engines(self, engines: Iterable[tuple[str, str]]) -> dict[str, int]:
        """Pass-context profiles for `(runtime name, engine name)` pairs: keys
        "<runtime name>/<class>" (what `stage_decompose` looks up)."""
        found: dict[str, int] = {}
        for runtime_name, engine_name in engines:
            for cls, size in self.by_engine.get(engine_name, {}).items():
                found[f"{runtime_name}/{cls}"] = size
        return found

    def item_seconds(self, engine_name: str) -> Callable[[Any], float] | None:
        """Expected seconds of one request to this engine, for duration-sized calls: a text
        costs between the query and the chunk class by its length, a pair what a measured
        pair costs, anything else the engine's slowest class. None when nothing was measured."""
        measured = dict(self.seconds.get(engine_name, {}))
        if not measured:
            return None
        slowest = max(measured.values())
        query, chunk = measured.get("query"), measured.get("chunk")

        def text(chars: int) -> float:
            if query is None or chunk is None:
                return slowest
            share = (chars - QUERY_CHARS) / (CHUNK_CHARS - QUERY_CHARS)
            return max(query, query + (chunk - query) * share)

        def seconds(request: Any) -> float:
            request = getattr(request, "input", request)  # an embedding server's one input
            if isinstance(request, str):
                return text(len(request))
            if isinstance(request, (tuple, list)) and "pairs" in measured:
                return measured["pairs"]
            return slowest

        return seconds

    def first_profiled(self, names: Iterable[str]) -> str:
        """The first of `names` with a measured profile; the first name when none has one."""
        names = list(names)
        return next((n for n in names if n in self.seconds or n in self.overheads), names[0] if names else "")

    def efficient_batch(self, engine_name: str) -> int | None:
        """The engine's max efficient batch: the largest over its measured input classes (an
        encoder server's pairs, or its query- and chunk-length texts); None: not profiled."""
        sizes = self.by_engine.get(engine_name, {}).values()
        return max(sizes) if sizes else None

    def call_overhead(self, engine_name: str) -> float | None:
        """Measured seconds one call of this engine costs whatever it carries; None: not measured."""
        return self.overheads.get(engine_name)


def call_overhead(points: Iterable[Any], max_efficient_batch: int) -> float | None:
    """A call's fixed cost from a profile's points (`ProfilePoint`s): batch 1's latency less
    one item's share at the max efficient batch (never below 0); None without both points."""
    latency = {point.batch_size: point.latency_s for point in points}
    if 1 not in latency or max_efficient_batch not in latency:
        return None
    return max(0.0, latency[1] - latency[max_efficient_batch] / max_efficient_batch)


def input_class(label: str) -> str | None:
    """The input class a saved profile's label measured (`search-k8-5000rows` -> search)."""
    for cls in CLASSES:
        if label == cls or label.startswith(f"{cls}-"):
            return cls
    return None


def load(directory: Path | None = None) -> MeasuredLimits:
    """Profiles saved by `accel profile` (ACCEL_HOME/profiles), else the documented defaults."""
    from accel.config import settings
    from accel.engines.profile import EngineProfile

    directory = Path(directory) if directory is not None else settings().profiles_dir
    saved: dict[str, dict[str, int]] = {}
    seconds: dict[str, dict[str, float]] = {}
    overheads: dict[str, float] = {}
    spare: int | None = None
    llm_batch: int | None = None
    warm_min: int | None = None
    when: list[str] = []
    busy: list[str] = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            profile = EngineProfile.load(path)
        except Exception as err:  # noqa: BLE001 - a broken file is reported, the rest still count
            log.warning("accel.profiles: ignoring %s (%s)", path, err)
            continue
        when += [profile.measured_at] if profile.measured_at else []
        if profile.busy:
            busy.append(f"{profile.engine}/{profile.label} ({profile.busy_cores:.1f} cores busy)")
        if profile.label.startswith("prompt"):
            spare = spare_batch(profile.points)
            llm_batch = max(profile.points, key=lambda point: point.throughput).batch_size
            if profile.prefill is not None:
                warm_min = profile.prefill.warm_min_tokens
        cls = input_class(profile.label)
        if cls is not None:
            saved.setdefault(profile.engine, {})[cls] = profile.max_efficient_batch
            best = {point.batch_size: point.throughput for point in profile.points}.get(profile.max_efficient_batch)
            if best:
                seconds.setdefault(profile.engine, {})[cls] = 1 / best
            overhead = call_overhead(profile.points, profile.max_efficient_batch)
            if overhead is not None:  # the engine's cheapest class: a call costs at least this
                overheads[profile.engine] = min(overhead, overheads.get(profile.engine, overhead))
    if busy:
        log.warning("accel.profiles: %d profile(s) in %s were measured on a busy machine and read slow (%s); "
                    "run `accel profile` again on a quiet machine", len(busy), directory, ", ".join(busy))
    if saved:
        return MeasuredLimits(saved, _measured_source(directory, when, busy), seconds, spare or DEFAULT_LLM_SPARE,
                              overheads, llm_batch, tuple(busy), _or_default(warm_min))
    return MeasuredLimits(DEFAULTS, "documented defaults of the reference machine (no saved profile: run `accel profile`)",
                          DEFAULT_SECONDS, spare or DEFAULT_LLM_SPARE, llm_batch=llm_batch,
                          warm_min_tokens=_or_default(warm_min))


def _or_default(warm_min: int | None) -> int:
    return DEFAULT_WARM_MIN_TOKENS if warm_min is None else warm_min


def _measured_source(directory: Path, when: list[str], busy: list[str]) -> str:
    """Where saved limits come from, when they were measured, and which read slow."""
    dated = f", profiled {min(when)} to {max(when)}" if when else ""
    source = f"measured on this machine ({directory}{dated})"
    if busy:
        source += (f"; {len(busy)} profile(s) measured while other processes took the machine's cores, which "
                   f"read slow: {', '.join(busy)} (run `accel profile` again on a quiet machine)")
    return source


def spare_batch(points: Iterable[Any]) -> int | None:
    """The largest batch whose latency stays under `SPARE_SLOWDOWN` times batch 1's, from an
    LLM profile's points (`ProfilePoint`s); None without a batch-1 point."""
    latency = {point.batch_size: point.latency_s for point in points}
    if 1 not in latency:
        return None
    return max(size for size, seconds in latency.items() if seconds <= SPARE_SLOWDOWN * latency[1])
