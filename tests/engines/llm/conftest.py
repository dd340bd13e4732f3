"""Shared fixtures for the LLM engine tests: prompts sized in tokens (the tiny offline model
comes from tests/conftest.py)."""

from __future__ import annotations

import pytest

from accel.engines.offline.corpus import stdlib_docs


@pytest.fixture(scope="session")
def corpus_text() -> str:
    return "\n".join(doc.text for doc in stdlib_docs())


def prompt_of_about(corpus_text: str, approx_tokens: int, offset: int = 0) -> str:
    """A slice of real prose; on the tiny tokenizer ~4 characters make one token."""
    start = offset * 97
    return corpus_text[start : start + approx_tokens * 4]
