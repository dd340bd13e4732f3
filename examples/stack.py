"""Where the example apps find their engines: flags, environment, or the `accel up` state file.

Read without importing accel, so the examples stay plain framework code: the state file is the
JSON that `accel up` writes under `$ACCEL_HOME` (default `~/.cache/accel/stack.json`).

Encoders are in-process sentence-transformers unless an embedding or rerank server is named
(`accel up --encoders server` or `--twin` record them; ACCEL_EMBED_BASE_URL /
ACCEL_RERANK_BASE_URL name running ones): the apps then call those servers the way GPU
deployments do (OpenAI embeddings, Cohere-shaped rerank).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

_ENV = {
    "openai_base_url": "ACCEL_OPENAI_BASE_URL",
    "model": "ACCEL_LLM_MODEL",
    "pg_dsn": "ACCEL_PG_DSN",
    "embed_model": "ACCEL_EMBED_MODEL",
    "rerank_model": "ACCEL_RERANK_MODEL",
}
_OPTIONAL_ENV = {
    "embed_base_url": "ACCEL_EMBED_BASE_URL",
    "embed_model_name": "ACCEL_EMBED_MODEL_NAME",
    "rerank_base_url": "ACCEL_RERANK_BASE_URL",
    "rerank_model_name": "ACCEL_RERANK_MODEL_NAME",
}


@dataclass(frozen=True)
class StackConfig:
    """The engines an example talks to. `pg_dsn` is a psycopg URI (`postgresql://...`)."""

    openai_base_url: str
    model: str
    pg_dsn: str
    embed_model: str
    rerank_model: str
    max_tokens: int = 32
    context_window: int = 4096
    embed_base_url: str | None = None
    """An OpenAI-compatible embedding server (`.../v1`); None: `embed_model` in-process."""
    embed_model_name: str | None = None
    rerank_base_url: str | None = None
    """A rerank server in Cohere's v2 shape (`/v2/rerank`); None: `rerank_model` in-process."""
    rerank_model_name: str | None = None

    @classmethod
    def from_stack(cls, info: object, **overrides: object) -> StackConfig:
        """The config of a running stack (`accel up`'s record: any object with these fields)."""
        names = ("openai_base_url", "model", "pg_dsn", "embed_model", "rerank_model", *_OPTIONAL_ENV)
        return cls(**{name: getattr(info, name, None) for name in names}, **overrides)  # type: ignore[arg-type]


def _state_file() -> Path:
    home = os.environ.get("ACCEL_HOME", "").strip()
    return Path(home or Path.home() / ".cache" / "accel") / "stack.json"


def load_config(**overrides: str | int | None) -> StackConfig:
    """Flags (`overrides`) beat environment variables, which beat the `accel up` state."""
    values: dict[str, object] = {}
    state = _state_file()
    if state.exists():
        data = json.loads(state.read_text())
        values.update({key: data[key] for key in (*_ENV, *_OPTIONAL_ENV) if data.get(key)})
    for key, var in (_ENV | _OPTIONAL_ENV).items():
        if os.environ.get(var, "").strip():
            values[key] = os.environ[var].strip()
    values.update({key: value for key, value in overrides.items() if value is not None})
    missing = [key for key in _ENV if key not in values]
    if missing:
        raise SystemExit(
            f"examples: no {', '.join(missing)} configured. Run `accel up`, or set "
            f"{', '.join(_ENV[key] for key in missing)}, or pass the matching --flags."
        )
    for url, name in (("embed_base_url", "embed_model_name"), ("rerank_base_url", "rerank_model_name")):
        if values.get(url) and not values.get(name):
            values[name] = served_model(str(values[url]))
    return StackConfig(**values)  # type: ignore[arg-type]


def served_model(base_url: str) -> str:
    """The one model an OpenAI-compatible server lists (`GET {base_url}/models`)."""
    import httpx

    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        listed = httpx.get(f"{root}/v1/models", timeout=10).raise_for_status().json()["data"]
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        raise SystemExit(f"examples: cannot list the models of {base_url} ({exc}); name it with --*-model-name") from exc
    return str(listed[0]["id"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every example script accepts."""
    for key in (*_ENV, *_OPTIONAL_ENV):
        parser.add_argument(f"--{key.replace('_', '-')}", dest=key, default=None)
    parser.add_argument("--max-tokens", dest="max_tokens", type=int, default=None)


def config_from_args(args: argparse.Namespace) -> StackConfig:
    config = load_config(**{key: getattr(args, key) for key in (*_ENV, *_OPTIONAL_ENV)})
    return replace(config, max_tokens=args.max_tokens) if args.max_tokens else config


def sqlalchemy_url(pg_dsn: str, driver: str) -> str:
    """`postgresql://...` as the SQLAlchemy URL of `driver` (psycopg, psycopg2, asyncpg)."""
    scheme, sep, rest = pg_dsn.partition("://")
    if not sep or not scheme.startswith("postgres"):
        raise SystemExit(f"examples: pg_dsn must be a postgresql:// URI, got {pg_dsn!r}")
    return f"postgresql+{driver}://{rest}"
