"""Engine bindings: which shared session engine serves a framework object.

The engines themselves come from the engine catalogue (`accel.engines.catalogue`); what is
left here is the framework side: the `accel.hosting` choice for an LLM base URL (engines may
not import `accel.hosting`) and the SQLAlchemy URL of a vector store.
"""

from __future__ import annotations

from typing import Any

from accel.engines import catalogue
from accel.engines.catalogue import EngineSpec, embedder, pgvector, reranker
from accel.hosting import hosted_llm

__all__ = ["EngineSpec", "embedder", "libpq_dsn", "openai_server", "pgvector", "reranker"]


def openai_server(base_url: str, model: str, api_key: str = "EMPTY") -> EngineSpec:
    """A vLLM OpenAI-compatible server, or vLLM's OpenAI layer hosted in this process when
    accel hosts `base_url` (`accel.host_llm`)."""
    hosted = hosted_llm(base_url)
    if hosted is None:
        return catalogue.openai_server(base_url, model, api_key)
    return catalogue.hosted_server(hosted.base_url, hosted.model, served_model_name=hosted.served_model_name,
                                   max_model_len=hosted.max_model_len, extra_args=hosted.extra_args, api_key=api_key)


def libpq_dsn(sqlalchemy_url: Any) -> str:
    """A libpq DSN from a SQLAlchemy URL (`postgresql+psycopg://...` -> `postgresql://...`)."""
    return sqlalchemy_url.set(drivername="postgresql").render_as_string(hide_password=False)
