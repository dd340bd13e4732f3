"""Measured engine limits for the passes: saved `accel profile` results, or documented defaults.

Stage decomposition needs each engine's max efficient batch size per input-length class (a
query embeds in batches of 8 on two cores where a 256-token chunk gains nothing past 2). The
session loads the profiles saved on this machine once; without any, the defaults below (measured
on the project's reference machine, docs/profile.md) apply and `explain()` says so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class MeasuredLimits:
    by_engine: Mapping[str, Mapping[str, int]]
    """Engine name (as engines report it) -> input class -> max efficient batch size."""
    source: str
    """Where they come from, for `explain()`."""

    def for_engines(self, engines: Iterable[tuple[str, str]]) -> dict[str, int]:
        """Pass-context profiles for `(runtime name, engine name)` pairs: keys
        "<runtime name>/<class>" (what `stage_decompose` looks up)."""
        found: dict[str, int] = {}
        for runtime_name, engine_name in engines:
            for cls, size in self.by_engine.get(engine_name, {}).items():
                found[f"{runtime_name}/{cls}"] = size
        return found


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
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            profile = EngineProfile.load(path)
        except Exception as err:  # noqa: BLE001 - a broken file is reported, the rest still count
            log.warning("accel.profiles: ignoring %s (%s)", path, err)
            continue
        cls = input_class(profile.label)
        if cls is not None:
            saved.setdefault(profile.engine, {})[cls] = profile.max_efficient_batch
    if saved:
        return MeasuredLimits(saved, f"measured on this machine ({directory})")
    return MeasuredLimits(DEFAULTS, "documented defaults of the reference machine (no saved profile: run `accel profile`)")
