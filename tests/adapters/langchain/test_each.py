"""RunnableEach (`runnable.map()`) lowers to an Expand node that runs the bound runnable once
per item, side by side on accel's engines, where stock hands the items to the bound's `batch`:
outputs, engine requests, run trees and errors equal stock's, on the real engines."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

import accel
from accel.testing.runtrees import Recorder, difference, outline, trees

from .fidelity import assert_same, run

pytestmark = [pytest.mark.engines, pytest.mark.slow]

MAP = ChatPromptTemplate.from_messages([("system", "Summarise this part of a document in one line."), ("human", "{chunk}")])
REDUCE = PromptTemplate.from_template("Combine these partial summaries about {question} into one.\n{summaries}\nSummary: ")


def map_reduce(vectorstore, chat_model):
    """A map-reduce summary written with LCEL: retrieve, summarise each chunk (`.map()`),
    combine the summaries."""
    retriever = vectorstore.as_retriever(search_kwargs={"k": 3})
    summarise = MAP | chat_model | StrOutputParser()

    def jobs(x: dict) -> list[dict]:
        return [{"chunk": doc.page_content} for doc in x["docs"]]

    def joined(parts: list[str]) -> str:
        return "\n".join(f"- {p.strip()}" for p in parts)

    with_docs = RunnablePassthrough.assign(docs=(lambda x: x["question"]) | retriever)
    summaries = RunnablePassthrough.assign(summaries=RunnableLambda(jobs) | summarise.map() | RunnableLambda(joined))
    return {"question": RunnablePassthrough()} | with_docs | summaries | REDUCE | chat_model | StrOutputParser()


def test_map_reduce_with_map_lowers_and_equals_stock(vectorstore, chat_model, llm_proxy, questions) -> None:
    chain = map_reduce(vectorstore, chat_model)
    fast = accel.wrap(map_reduce(vectorstore, chat_model))
    text = fast.explain()
    assert "RunnableEach" in text and "once per item" in text
    assert "each item: ChatOpenAI" in text  # the map's model runs as a Decode on accel's engine
    stock_run = run(chain, questions[:3], llm_proxy)
    fast_run = run(fast, questions[:3], llm_proxy)
    assert_same(stock_run, fast_run)
    assert len(stock_run.llm) == 3 * (3 + 1)  # three chunk summaries and one combine per question
    assert run(fast, questions[:3], llm_proxy, mode="batch").outputs == stock_run.outputs


def test_async_map_equals_stock(chat_model, questions) -> None:
    summarise = (MAP | chat_model | StrOutputParser()).map()
    fast = accel.wrap(summarise)
    items = [[{"chunk": q} for q in questions[:3]], [{"chunk": questions[3]}], []]

    async def both():
        return [await summarise.ainvoke(x) for x in items], await asyncio.gather(*(fast.ainvoke(x) for x in items))

    stock, wrapped = asyncio.run(both())
    assert wrapped == stock
    assert wrapped[2] == []


def test_a_map_shows_stock_s_run_tree(chat_model, questions) -> None:
    chain = {"chunk": RunnablePassthrough()} | MAP | chat_model | StrOutputParser()
    mapped = RunnableLambda(lambda x: x["chunks"]) | chain.map()
    fast = accel.wrap(mapped)
    stock_runs, fast_runs = Recorder(), Recorder()
    x = {"chunks": questions[:2]}
    assert fast.invoke(x, config={"callbacks": [fast_runs]}) == mapped.invoke(x, config={"callbacks": [stock_runs]})
    assert trees(fast_runs) == trees(stock_runs), difference(trees(fast_runs), trees(stock_runs))
    rows = outline(trees(stock_runs)[0])
    assert (1, "RunnableEach<RunnableSequence>", "chain", ("seq:step:2",)) in rows
    assert rows.count((2, "RunnableSequence", "chain", ())) == 2  # one untagged run per item
    assert rows.count((3, "ChatOpenAI", "llm", ("seq:step:3",))) == 2


def test_a_failing_item_raises_stock_s_error(chat_model) -> None:
    def check(x: dict) -> dict:
        if x["chunk"] == "bad":
            raise ValueError("bad chunk")
        return x

    mapped = (RunnableLambda(check) | MAP | chat_model | StrOutputParser()).map()
    fast = accel.wrap(mapped)
    items = [{"chunk": "good"}, {"chunk": "bad"}, {"chunk": "fine"}]
    with pytest.raises(ValueError, match="bad chunk"):
        mapped.invoke(items)
    with pytest.raises(ValueError, match="bad chunk"):
        fast.invoke(items)
    with pytest.raises(TypeError):
        mapped.invoke(3)
    with pytest.raises(TypeError):
        fast.invoke(3)  # not iterable: stock's `list(inputs)` error


def test_a_model_and_a_retriever_mapped_alone_match_stock_with_their_runs(vectorstore, chat_model, questions) -> None:
    """`.map()` of a bare model (one llm run per item) and of a retriever (one retriever run
    per item, Embed + Search lowered): outputs and run trees as stock's."""
    retriever = vectorstore.as_retriever(search_kwargs={"k": 2})
    for mapped, items in ((chat_model.map(), questions[:2]), (retriever.map(), questions[:3])):
        fast = accel.wrap(mapped)
        assert "each item: " in fast.explain()
        stock_runs, fast_runs = Recorder(), Recorder()
        stock_out = mapped.invoke(items, config={"callbacks": [stock_runs]})
        fast_out = fast.invoke(items, config={"callbacks": [fast_runs]})
        if mapped.bound is chat_model:
            assert [m.content for m in fast_out] == [m.content for m in stock_out]
        else:
            assert fast_out == stock_out
        assert trees(fast_runs) == trees(stock_runs), difference(trees(fast_runs), trees(stock_runs))


def test_max_concurrency_caps_the_items_in_flight_as_stock(chat_model, llm_proxy, questions) -> None:
    """`max_concurrency` in the call's config bounds how many items stock's `batch` runs at
    once (a user's cap on a rate-limited server); the lowered map keeps to it, sync and async
    (the uncapped map runs its items side by side: tests/core/runtime/test_expand_each.py)."""
    from langchain_openai import ChatOpenAI

    slower = ChatOpenAI(base_url=llm_proxy.url + "/v1", api_key="EMPTY", model=chat_model.model_name, temperature=0,
                        max_tokens=48, extra_body={"ignore_eos": True})  # long enough for the items to overlap
    mapped = (MAP | slower | StrOutputParser()).map()
    fast = accel.wrap(mapped)
    items = [{"chunk": f"{q} (part {k})"} for k in (1, 2) for q in questions]
    capped = {"max_concurrency": 2}

    llm_proxy.recorder.take()
    expected = mapped.invoke(items, config=capped)
    assert llm_proxy.recorder.most_in_flight <= 2
    llm_proxy.recorder.take()
    assert fast.invoke(items, config=capped) == expected
    assert len([r for r in llm_proxy.recorder.requests if r.path.endswith("/chat/completions")]) == len(items)
    # the cap holds; whether two items overlap at the server depends on the machine's load (a
    # busy one finished each 48-token answer before the next arrived: `== 2` failed there), so
    # running side by side up to the cap is the virtual-clock test's (tests/core/runtime/test_expand_each.py)
    assert 1 <= llm_proxy.recorder.most_in_flight <= 2
    llm_proxy.recorder.take()
    assert asyncio.run(fast.ainvoke(items, config=capped)) == expected
    assert 1 <= llm_proxy.recorder.most_in_flight <= 2
    assert fast.invoke(items) == expected  # uncapped: as many at once as the engine scheduler admits
