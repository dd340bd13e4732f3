"""The Self-RAG example ends a run whose answer the graders keep rejecting after `MAX_RETRIES`
regenerations, as LangGraph's local adaptive RAG tutorial does: at temperature 0 a rejected
answer comes back identical, and the tutorial's loop ran to LangGraph's recursion limit. A
scripted chat model (langchain-core's fake) and an in-memory retriever; no engines."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.retrievers import BaseRetriever

from accel.examples.langgraph.self_rag import MAX_RETRIES, build


class _Retriever(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: Any = None) -> list[Document]:
        return [Document(page_content="heapq.heappush pushes an item onto the heap")]


class _Store:
    def as_retriever(self) -> BaseRetriever:
        return _Retriever()


@pytest.mark.parametrize(("rejection", "edge"), [("no, not grounded", "not supported"), ("yes", "not useful")])
def test_a_rejected_answer_is_regenerated_at_most_max_retries_times(rejection: str, edge: str) -> None:
    # the document is relevant; then every generation is graded: hallucination, (answer)
    graded = ["answer", rejection] if edge == "not supported" else ["answer", "yes", "no, it does not"]
    if edge == "not useful":  # "not useful" rewrites the question, retrieves and grades the document again
        graded = graded + ["better question", "yes"]
    chat = FakeListChatModel(responses=["yes"] + graded * (MAX_RETRIES + 3))
    state = build(_Store(), chat).invoke({"question": "How do I push onto a heap?"})
    assert state["loop_step"] == MAX_RETRIES + 1 and state["generation"] == "answer"


def test_an_accepted_answer_ends_at_once() -> None:
    chat = FakeListChatModel(responses=["yes", "answer", "yes", "yes"])
    assert build(_Store(), chat).invoke({"question": "q"})["loop_step"] == 1
