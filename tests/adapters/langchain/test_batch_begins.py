"""A wrapped chain's sync `batch` (`adapters/langchain/batching.py`): every query reaches the
session before any waits, within `max_concurrency`, and the batch still answers, fails and
reports to its callbacks as stock's `Runnable.batch` does."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

import accel
from accel.adapters.common.dropin import state_of
from accel.engines.llm.server import free_port

from .conftest import TINY
from .test_behaviour import Events

pytestmark = [pytest.mark.engines, pytest.mark.slow]

PROMPT = ChatPromptTemplate.from_messages([("system", "Context:\n{context}"), ("human", "{question}")])


def _rag(store: Any, model: Any, *, user_code: bool = True) -> Any:
    retriever = store.as_retriever(search_kwargs={"k": 2})
    context = retriever | RunnableLambda(lambda docs: "\n\n".join(d.page_content for d in docs)) if user_code else retriever
    return {"context": context, "question": RunnablePassthrough()} | PROMPT | model | StrOutputParser()


class Flights:
    """Counts the session's submitted and answered queries of one wrap: how many had begun
    when the first waited, and the most in flight at once."""

    def __init__(self, fast: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        session = state_of(fast).helper.session
        submit, wait = session.submit, session.wait
        self.submitted, self.in_flight, self.most = 0, 0, 0
        self.at_first_wait: int | None = None
        self.waiting_threads: set[int] = set()
        lock = threading.Lock()

        def answered(_: Any) -> None:
            with lock:
                self.in_flight -= 1

        def counting_submit(*args: Any, **kwargs: Any) -> Any:
            with lock:
                self.submitted += 1
                self.in_flight += 1
                self.most = max(self.most, self.in_flight)
            future = submit(*args, **kwargs)
            future.add_done_callback(answered)
            return future

        def counting_wait(*args: Any, **kwargs: Any) -> Any:
            with lock:
                if self.at_first_wait is None:
                    self.at_first_wait = self.submitted
                self.waiting_threads.add(threading.get_ident())
            return wait(*args, **kwargs)

        monkeypatch.setattr(session, "submit", counting_submit)
        monkeypatch.setattr(session, "wait", counting_wait)


def test_every_query_begins_before_any_waits_and_answers_as_stock(vectorstore, chat_model, questions, monkeypatch) -> None:
    chain = _rag(vectorstore, chat_model)
    fast = accel.wrap(chain)
    flights = Flights(fast, monkeypatch)
    assert fast.batch(questions, config={"max_concurrency": 8}) == chain.batch(questions, config={"max_concurrency": 8})
    assert flights.submitted == len(questions)
    assert flights.at_first_wait == len(questions)
    assert threading.get_ident() not in flights.waiting_threads  # each query is served on a pool thread, as stock's
    assert not any(name.startswith("batches begun per thread") for name in fast.counters)


def test_max_concurrency_bounds_the_queries_begun(vectorstore, chat_model, questions, monkeypatch) -> None:
    chain = _rag(vectorstore, chat_model)
    fast = accel.wrap(chain)
    flights = Flights(fast, monkeypatch)
    inputs = questions + questions[:1]
    assert fast.batch(inputs, config={"max_concurrency": 2}) == chain.batch(inputs, config={"max_concurrency": 2})
    assert flights.at_first_wait == 2 and flights.most <= 2 and flights.submitted == len(inputs)


def test_a_failing_query_is_raised_after_the_others_or_returned_in_place(vectorstore, chat_model, questions) -> None:
    def explode(text: str) -> str:
        if "heapq" in text:
            raise ZeroDivisionError("boom in user code")
        return text

    chain = RunnableLambda(explode) | _rag(vectorstore, chat_model)
    fast = accel.wrap(chain)
    stock_out = chain.batch(questions, return_exceptions=True)
    fast_out = fast.batch(questions, return_exceptions=True)
    assert [type(o) for o in fast_out] == [type(o) for o in stock_out]
    assert [o for o in fast_out if isinstance(o, str)] == [o for o in stock_out if isinstance(o, str)]
    with pytest.raises(ZeroDivisionError, match="boom"):
        fast.batch(questions)


def test_listening_callbacks_keep_stocks_threads_and_see_what_stock_shows(vectorstore, chat_model, questions,
                                                                          monkeypatch) -> None:
    chain = _rag(vectorstore, chat_model)
    fast = accel.wrap(chain)
    flights = Flights(fast, monkeypatch)
    stock_events, fast_events = Events(), Events()
    expected = chain.batch(questions, config={"callbacks": [stock_events]})
    assert fast.batch(questions, config={"callbacks": [fast_events]}) == expected
    assert sorted(fast_events.events) == sorted(stock_events.events)
    assert fast.counters["batches begun per thread: callback handlers listen"] == 1
    assert flights.submitted == len(questions)


def test_an_llm_down_fails_each_query_with_stocks_error(vectorstore, questions) -> None:
    from langchain_openai import ChatOpenAI

    dead = ChatOpenAI(base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="EMPTY", model=TINY, max_retries=0)
    for user_code in (False, True):  # without user code the stock chain answers instead, and fails alike
        chain = _rag(vectorstore, dead, user_code=user_code)
        fast = accel.wrap(chain)
        expected = chain.batch(questions, return_exceptions=True)
        ours = fast.batch(questions, return_exceptions=True)
        assert [type(o) for o in ours] == [type(o) for o in expected] and all(isinstance(o, Exception) for o in ours)
        answered_instead = fast.counters["stock fallbacks"] + fast.counters["engine errors raised"]
        assert answered_instead == len(questions), fast.counters
