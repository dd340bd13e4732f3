"""A wrapped chain's sync `batch` answers, fails, bounds its concurrency and reports to its
callbacks as stock's `Runnable.batch` does."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.output_parsers import StrOutputParser
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
    """The session's queries of one wrap: how many, the most in flight at once, and the
    threads that submitted them."""

    def __init__(self, fast: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        session = state_of(fast).helper.session
        submit = session.submit
        self.submitted, self.in_flight, self.most = 0, 0, 0
        self.threads: set[int] = set()
        lock = threading.Lock()

        def answered(_: Any) -> None:
            with lock:
                self.in_flight -= 1

        def counting_submit(*args: Any, **kwargs: Any) -> Any:
            with lock:
                self.submitted += 1
                self.in_flight += 1
                self.most = max(self.most, self.in_flight)
                self.threads.add(threading.get_ident())
            future = submit(*args, **kwargs)
            future.add_done_callback(answered)
            return future

        monkeypatch.setattr(session, "submit", counting_submit)


def test_a_batch_of_one_runs_on_the_calling_thread_as_stocks(vectorstore, chat_model, questions, monkeypatch) -> None:
    chain = _rag(vectorstore, chat_model)
    fast = accel.wrap(chain)
    flights = Flights(fast, monkeypatch)
    assert fast.batch(questions[:1]) == chain.batch(questions[:1])
    assert flights.threads == {threading.get_ident()}
    assert fast.batch([]) == []


def test_max_concurrency_bounds_the_queries_in_flight(vectorstore, chat_model, questions, monkeypatch) -> None:
    chain = _rag(vectorstore, chat_model)
    fast = accel.wrap(chain)
    flights = Flights(fast, monkeypatch)
    inputs = questions + questions[:1]
    assert fast.batch(inputs, config={"max_concurrency": 2}) == chain.batch(inputs, config={"max_concurrency": 2})
    assert flights.most <= 2 and flights.submitted == len(inputs)
    assert threading.get_ident() not in flights.threads  # each query on a pool thread, as stock's


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


def test_listening_callbacks_see_what_stock_shows(vectorstore, chat_model, questions) -> None:
    chain = _rag(vectorstore, chat_model)
    fast = accel.wrap(chain)
    stock_events, fast_events = Events(), Events()
    expected = chain.batch(questions, config={"callbacks": [stock_events]})
    assert fast.batch(questions, config={"callbacks": [fast_events]}) == expected
    assert sorted(fast_events.events) == sorted(stock_events.events)


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
