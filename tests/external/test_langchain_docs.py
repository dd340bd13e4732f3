"""LangChain apps transcribed from LangChain's own documentation (tests/external/apps/lc_*.py),
stock vs `accel.wrap`: the same outputs and engine requests, one at a time and with `batch`;
and `explain()` shows the retrieval and the model lowered, so no test passes by running
everything as-is."""

from __future__ import annotations

import uuid

import pytest

import accel

from .apps import lc_rag_builtin_chains, lc_rag_custom_prompt, lc_rag_tutorial
from .fidelity import compare_langchain

pytestmark = [pytest.mark.engines, pytest.mark.slow]


def sqlalchemy_url(dsn: str) -> str:
    return dsn.replace("postgresql://", "postgresql+psycopg://", 1)


def collection() -> str:
    return f"ext_{uuid.uuid4().hex[:8]}"


def lowered(explained: str, *needles: str) -> None:
    """Each needle is on a `[lowered]` component line of `explain()`."""
    lines = [line for line in explained.splitlines() if "[lowered]" in line]
    for needle in needles:
        assert any(needle in line for line in lines), (needle, explained)


@pytest.fixture(scope="module")
def tutorial_store(pydoc_files, pg_dsn, minilm_path):
    return lc_rag_tutorial.index(pydoc_files, sqlalchemy_url(pg_dsn), collection(), minilm_path)


@pytest.fixture(scope="module")
def chat(base_url, model_name):
    return lc_rag_tutorial.chat_model(base_url, model_name)


def test_rag_tutorial_preview_chain(tutorial_store, chat, llm_proxy, questions) -> None:
    chain = lc_rag_tutorial.build(tutorial_store, chat)
    fast = accel.wrap(chain)
    lowered(fast.explain(), "Embed + Search", "Decode on", "prompt parts")
    runs = compare_langchain(chain, fast, questions, llm_proxy)
    assert all(isinstance(o, str) for o in runs[0].outputs)
    assert len(runs[0].llm) == len(questions) and len(runs[0].searched) == len(questions)


def test_rag_tutorial_custom_prompt(tutorial_store, chat, llm_proxy, questions) -> None:
    chain = lc_rag_custom_prompt.build(tutorial_store.as_retriever(), chat)
    fast = accel.wrap(chain)
    lowered(fast.explain(), "Embed + Search", "Decode on", "prompt parts")
    compare_langchain(chain, fast, questions, llm_proxy)


def test_rag_tutorial_builtin_chains(tutorial_store, chat, llm_proxy, questions) -> None:
    chain = lc_rag_builtin_chains.build(tutorial_store.as_retriever(), chat)
    fast = accel.wrap(chain)
    lowered(fast.explain(), "Embed + Search", "Decode on")
    inputs = [{"input": q} for q in questions]
    runs = compare_langchain(chain, fast, inputs, llm_proxy)
    assert all(set(o) == {"input", "context", "answer"} for o in runs[0].outputs)
