"""Where accel keeps its files and which engines it uses, read from the environment.

Everything has an embedded default so that `accel up` works on a fresh machine with no
network; each default can be replaced by a real model or server through one variable.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


_OFF = ("0", "false", "off", "no")
_ON = ("1", "true", "yes", "on")


def _switch(name: str, default: bool) -> bool:
    """A yes/no variable: unset keeps `default`; "0/false/off/no" is off and, when the default
    is off, only "1/true/yes/on" turns it on."""
    value = (_env(name) or "").lower()
    if not value:
        return default
    return value not in _OFF if default else value in _ON


def _count(name: str) -> int | None:
    value = _env(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a whole number. Remedy: set it to a count, or unset it.") from None


def _seconds(name: str, default: float) -> float:
    value = _env(name)
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"{name}={value!r} is not a positive number of seconds. Remedy: set it to one (e.g. 10), "
                         "or unset it.")
    return seconds


CONNECT_TIMEOUT_S = 3.0
"""A server that has not accepted a connection in 3 s is down or wedged: its request fails then
(typed, EngineUnavailable) rather than after 10 s; a refused connection fails at once anyway."""


def _listed(name: str) -> tuple[str, ...]:
    return tuple(u.strip() for u in (_env(name) or "").split(",") if u.strip())


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
    home_from_env: bool = field(default_factory=lambda: _env("ACCEL_HOME") is not None)
    """Whether `home` came from ACCEL_HOME (commands the CLI prints then name it)."""
    auto: bool = field(default_factory=lambda: _switch("ACCEL_AUTO", False))
    """ACCEL_AUTO: framework entry points run through `accel.wrap` (`accel.patches`)."""
    host_llm: str | None = field(default_factory=lambda: _env("ACCEL_HOST_LLM"))
    """ACCEL_HOST_LLM: `<base URL>` or `<base URL>=<model>` that `accel.hosting` serves in process."""
    program_priority: bool = field(default_factory=lambda: _switch("ACCEL_PROGRAM_PRIORITY", True))
    """ACCEL_PROGRAM_PRIORITY: program-aware LLM priorities (off: every captured call at 0)."""
    ray_address: str | None = field(default_factory=lambda: _env("ACCEL_RAY_ADDRESS"))
    """ACCEL_RAY_ADDRESS (`host:port`, `auto` or `local`): embedders and rerankers run as Ray actors."""
    replicas: int | None = field(default_factory=lambda: _count("ACCEL_REPLICAS"))
    """ACCEL_REPLICAS: Ray actor replicas per engine (None: `engines.scaleout.DEFAULT_REPLICAS`)."""
    openai_replica_urls: tuple[str, ...] = field(default_factory=lambda: _listed("ACCEL_OPENAI_REPLICA_URLS"))
    """ACCEL_OPENAI_REPLICA_URLS (comma-separated): vLLM servers serving one model together."""
    embed_replica_urls: tuple[str, ...] = field(default_factory=lambda: _listed("ACCEL_EMBED_REPLICA_URLS"))
    """ACCEL_EMBED_REPLICA_URLS (comma-separated): embedding servers serving one model together."""
    rerank_replica_urls: tuple[str, ...] = field(default_factory=lambda: _listed("ACCEL_RERANK_REPLICA_URLS"))
    """ACCEL_RERANK_REPLICA_URLS (comma-separated): rerank servers serving one model together."""
    connect_timeout_s: float = field(default_factory=lambda: _seconds("ACCEL_CONNECT_TIMEOUT_S", CONNECT_TIMEOUT_S))
    """ACCEL_CONNECT_TIMEOUT_S: how long accel's engine clients (LLM, embedding and rerank servers)
    wait for a connection. The timer runs on accel's event loop, so a host loaded enough to stall
    that loop for longer fails healthy connections: raise it there."""
    vllm_args: tuple[str, ...] = field(default_factory=lambda: tuple(shlex.split(_env("ACCEL_VLLM_ARGS") or "")))
    """ACCEL_VLLM_ARGS (shell words): appended to every vLLM server `accel up` starts, e.g.
    `--enforce-eager` (starts about 8 s sooner on CPU, decodes slower)."""

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
