"""Drop-in behaviour of the wrapped chain: async and batch entry points, composition, callbacks,
errors of the stock types without hangs, and queries that fail alone."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

import accel

pytestmark = [pytest.mark.engines, pytest.mark.slow]

PROMPT = ChatPromptTemplate.from_messages([("system", "Context:\n{context}"), ("human", "{question}")])


def format_docs(docs) -> str:
    return "\n\n".join(d.page_content for d in docs)


def rag_over(store, chat_model):
    retriever = store.as_retriever(search_kwargs={"k": 2})
    return {"context": retriever | format_docs, "question": RunnablePassthrough()} | PROMPT | chat_model | StrOutputParser()


@pytest.fixture
def rag(vectorstore, chat_model):
    return rag_over(vectorstore, chat_model)


@pytest.fixture
def arag(async_vectorstore, chat_model):
    """The same chain over the same rows, its store serving async calls (`async_vectorstore`)."""
    return rag_over(async_vectorstore, chat_model)


class Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, str | None]] = []
        self.roots: dict = {}

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, name=None, **kwargs):
        self.events.append(("start", kwargs.get("name") or name))
        if parent_run_id is None:
            self.roots[run_id] = name or kwargs.get("name")

    def on_chain_end(self, outputs, *, run_id, parent_run_id=None, **kwargs):
        if parent_run_id is None:
            self.events.append(("end", self.roots.get(run_id)))

    def on_chain_error(self, error, *, run_id, parent_run_id=None, **kwargs):
        if parent_run_id is None:
            self.events.append(("error", type(error).__name__))


async def test_ainvoke_abatch_astream_match_invoke(rag, arag, questions) -> None:
    fast, afast = accel.wrap(rag), accel.wrap(arag)
    expected = [rag.invoke(q) for q in questions]
    assert await afast.ainvoke(questions[0]) == expected[0] == await arag.ainvoke(questions[0])
    assert await afast.abatch(questions) == expected
    assert "".join([chunk async for chunk in afast.astream(questions[1])]) == expected[1]
    assert "".join(fast.stream(questions[2])) == expected[2]


def test_composition_with_config_and_wrap_idempotent(rag, questions) -> None:
    fast = accel.wrap(rag)
    assert accel.wrap(fast) is fast
    shout = fast | RunnableLambda(str.upper)
    assert shout.invoke(questions[0]) == rag.invoke(questions[0]).upper()
    assert fast.with_config(run_name="renamed").invoke(questions[1]) == rag.invoke(questions[1])


def test_user_callbacks_see_the_chain_run(rag, questions) -> None:
    stock_events, fast_events = Events(), Events()
    rag.invoke(questions[0], config={"callbacks": [stock_events]})
    accel.wrap(rag).invoke(questions[0], config={"callbacks": [fast_events]})
    root_name = rag.get_name()
    assert fast_events.events[0] == ("start", root_name)
    assert fast_events.events[-1] == ("end", root_name)
    assert stock_events.events[-1] == fast_events.events[-1]


def test_failing_lambda_raises_the_same_error_and_others_finish(vectorstore, chat_model, questions) -> None:
    def explode(text: str) -> str:
        if "heapq" in text:
            raise ZeroDivisionError("boom in user code")
        return text

    chain = RunnableLambda(explode) | {"context": vectorstore.as_retriever(search_kwargs={"k": 1}) | format_docs,
                                       "question": RunnablePassthrough()} | PROMPT | chat_model | StrOutputParser()
    fast = accel.wrap(chain)
    stock_out = chain.batch(questions, return_exceptions=True)
    fast_out = fast.batch(questions, return_exceptions=True)
    assert [type(o) for o in fast_out] == [type(o) for o in stock_out]  # str subclasses included
    assert [o for o in fast_out if isinstance(o, str)] == [o for o in stock_out if isinstance(o, str)]
    events = Events()
    with pytest.raises(ZeroDivisionError, match="boom"):
        fast.invoke(questions[1], config={"callbacks": [events]})
    assert events.events[-1] == ("error", "ZeroDivisionError")


def test_wrong_input_type_and_missing_variable_raise_stock_errors(chat_model) -> None:
    chain = PROMPT | chat_model | StrOutputParser()
    fast = accel.wrap(chain)
    for bad in (42, {"question": "only one variable"}):
        with pytest.raises(Exception) as stock_error:
            chain.invoke(bad)
        with pytest.raises(type(stock_error.value)) as fast_error:
            fast.invoke(bad)
        assert str(fast_error.value) == str(stock_error.value)


def test_prompt_longer_than_the_context_raises_the_stock_error(chat_model) -> None:
    chain = PROMPT | chat_model | StrOutputParser()
    too_long = {"context": "word " * 5000, "question": "why?"}
    with pytest.raises(Exception) as stock_error:
        chain.invoke(too_long)
    with pytest.raises(type(stock_error.value)):
        accel.wrap(chain).invoke(too_long)


def test_retriever_returning_nothing(vectorstore, chat_model, questions) -> None:
    retriever = vectorstore.as_retriever(search_kwargs={"k": 2, "filter": {"n": -1}})
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | PROMPT | chat_model | StrOutputParser()
    assert retriever.invoke(questions[0]) == []
    assert accel.wrap(retriever).invoke(questions[0]) == []
    assert accel.wrap(chain).invoke(questions[0]) == chain.invoke(questions[0])


def test_unknown_structures_stay_opaque_and_still_run(chat_model, questions) -> None:
    from langchain_core.runnables import RunnableBranch

    branch = RunnableBranch((lambda x: "json" in x, RunnableLambda(lambda x: "json!")), RunnableLambda(lambda x: x[::-1]))
    chain = branch | RunnableLambda(lambda s: {"context": s, "question": s}) | PROMPT | chat_model.with_retry(stop_after_attempt=2) | StrOutputParser()
    fast = accel.wrap(chain)
    assert [fast.invoke(q) for q in questions[:2]] == [chain.invoke(q) for q in questions[:2]]
    text = fast.explain()
    assert "opaque" in text and "RunnableBranch" in text


def test_wrap_rejects_non_runnables_with_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match="dict"):
        accel.wrap({"not": "a runnable"})


async def test_concurrent_async_queries_batch_on_one_engine(rag, arag, questions) -> None:
    fast = accel.wrap(arag)
    many = questions * 3
    expected = [rag.invoke(q) for q in questions] * 3
    assert await asyncio.gather(*(fast.ainvoke(q) for q in many)) == expected
