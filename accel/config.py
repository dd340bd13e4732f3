"""Where accel keeps its files and which engines it uses, read from the environment.

Everything has an embedded default so that `accel up` works on a fresh machine with no
network; each default can be replaced by a real model or server through one variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def accel_home() -> Path:
    """Cache root for built models, the embedded Postgres, profiles and the stack state."""
    return Path(_env("ACCEL_HOME") or Path.home() / ".cache" / "accel")


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=accel_home)
    llm_model: str | None = field(default_factory=lambda: _env("ACCEL_LLM_MODEL"))
    llm_size: str = field(default_factory=lambda: _env("ACCEL_LLM_SIZE") or "bench")
    embed_model: str | None = field(default_factory=lambda: _env("ACCEL_EMBED_MODEL"))
    rerank_model: str | None = field(default_factory=lambda: _env("ACCEL_RERANK_MODEL"))
    pg_dsn: str | None = field(default_factory=lambda: _env("ACCEL_PG_DSN"))
    openai_base_url: str | None = field(default_factory=lambda: _env("ACCEL_OPENAI_BASE_URL"))
    embed_base_url: str | None = field(default_factory=lambda: _env("ACCEL_EMBED_BASE_URL"))
    """A running embedding server (`/v1/embeddings`) that `accel up` records instead of starting one."""
    rerank_base_url: str | None = field(default_factory=lambda: _env("ACCEL_RERANK_BASE_URL"))
    """A running rerank server (`/score`, `/rerank`) that `accel up` records instead of starting one."""
    kv_cache_gib: int = field(default_factory=lambda: int(_env("VLLM_CPU_KVCACHE_SPACE") or 2))

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    @property
    def pg_dir(self) -> Path:
        return self.home / "pgdata"

    @property
    def profiles_dir(self) -> Path:
        return self.home / "profiles"

    @property
    def stack_state(self) -> Path:
        return self.home / "stack.json"


def settings() -> Settings:
    """Current settings; read fresh each call so tests can change the environment."""
    return Settings()
