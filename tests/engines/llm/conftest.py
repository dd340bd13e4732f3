"""Shared fixtures for the LLM engine tests: the tiny offline model, and prompts sized in tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.engines.offline.corpus import stdlib_docs
from accel.engines.offline.llm import build_llm


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """The tiny offline Llama (built once into ACCEL_HOME, reused afterwards)."""
    return build_llm("tiny")


@pytest.fixture(scope="session")
def corpus_text() -> str:
    return "\n".join(doc.text for doc in stdlib_docs())


def prompt_of_about(corpus_text: str, approx_tokens: int, offset: int = 0) -> str:
    """A slice of real prose; on the tiny tokenizer ~4 characters make one token."""
    start = offset * 97
    return corpus_text[start : start + approx_tokens * 4]
