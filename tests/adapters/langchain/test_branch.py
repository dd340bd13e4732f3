"""RunnableBranch lowers to an Expand node: its conditions run as-is, in order, and only the
taken branch runs (its engine work batched and optimised like any lowered chain), as stock
runs it; outputs and every engine request equal stock's."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableBranch, RunnableLambda, RunnablePassthrough

import accel

from .fidelity import assert_same, run

pytestmark = [pytest.mark.engines, pytest.mark.slow]


def format_docs(docs) -> str:
    return "\n\n".join(d.page_content for d in docs)


def routed_chain(vectorstore, chat_model, seen: list[str]):
    """A docs-style routing chain: questions about JSON get RAG, others a plain answer."""
    rag_prompt = ChatPromptTemplate.from_messages([("system", "Use the context:\n{context}"), ("human", "{question}")])
    plain_prompt = ChatPromptTemplate.from_messages([("system", "Answer in one line."), ("human", "{question}")])
    retriever = vectorstore.as_retriever(search_kwargs={"k": 2})

    def about_json(x: dict) -> bool:
        seen.append(x["question"])
        return "json" in x["question"].lower()

    rag = {"context": RunnableLambda(lambda x: x["question"]) | retriever | format_docs,
           "question": lambda x: x["question"]} | rag_prompt | chat_model | StrOutputParser()
    plain = plain_prompt | chat_model | StrOutputParser()
    return {"question": RunnablePassthrough()} | RunnableBranch((about_json, rag), plain)


def test_only_the_taken_branch_runs_and_requests_equal_stock(vectorstore, chat_model, llm_proxy, questions) -> None:
    stock_seen, fast_seen = [], []
    chain = routed_chain(vectorstore, chat_model, stock_seen)
    fast = accel.wrap(routed_chain(vectorstore, chat_model, fast_seen))
    text = fast.explain()
    assert "Expand" in text and "branch 1: " in text and "default: " in text
    assert fast.lowered
    stock_run = run(chain, questions, llm_proxy)
    fast_run = run(fast, questions, llm_proxy)
    assert_same(stock_run, fast_run)  # one search per JSON question, one LLM call per question
    assert len(stock_run.searched) == sum("json" in q.lower() for q in questions) >= 1
    assert fast_seen == stock_seen == questions  # every condition ran once, on the caller's side
    batched = run(fast, questions, llm_proxy, mode="batch")
    assert batched.outputs == stock_run.outputs


def test_async_branches_match_stock(vectorstore, async_vectorstore, chat_model, questions) -> None:
    """(A store serves sync or async calls, never both: the wrapped chain runs over the
    collection's async-mode store, stock's `batch` over its sync one.)"""
    chain = routed_chain(vectorstore, chat_model, [])
    fast = accel.wrap(routed_chain(async_vectorstore, chat_model, []))

    async def concurrently():
        return await asyncio.gather(*(fast.ainvoke(q) for q in questions))

    assert asyncio.run(concurrently()) == chain.batch(questions)


def test_a_failing_condition_raises_stock_s_error(vectorstore, chat_model) -> None:
    def broken(x):
        raise KeyError("no route")

    chain = {"question": RunnablePassthrough()} | RunnableBranch((broken, ChatPromptTemplate.from_template("{question}") | chat_model),
                                                                   ChatPromptTemplate.from_template("{question}") | chat_model)
    fast = accel.wrap(chain)
    with pytest.raises(KeyError, match="no route"):
        fast.invoke("q")
