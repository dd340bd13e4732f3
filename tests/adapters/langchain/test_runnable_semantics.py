"""A lowered chain still behaves as a Runnable where accel does not lower it (issue 16), on the
real engines: kwargs reach the first step, async entry points use the steps' async methods on
the caller's loop, sync ones run steps on the caller's thread, opaque steps keep their stock run
tags, configured steps stay opaque without recursing, and a failing engine never makes user
code run twice (issue 10)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableParallel
from langchain_core.tools import tool

import accel

pytestmark = [pytest.mark.engines, pytest.mark.slow]

PROMPT = ChatPromptTemplate.from_messages([("system", "Answer briefly."), ("human", "{question}")])


class KwargsRecorder(Runnable[Any, Any]):
    """A first step that records the keyword arguments `invoke` hands it."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        self.seen.append(dict(kwargs))
        return {"question": input}


class Runs(BaseCallbackHandler):
    """Chain runs as (name, tags) for runs of user code (not accel's own)."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, tuple[str, ...]]] = []
        self.threads: list[str] = []

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, tags=None, **kwargs):
        self.runs.append((kwargs.get("name") or "", tuple(sorted(t for t in tags or () if ":" in t))))

    def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None, tags=None, **kwargs):
        self.runs.append((f"retriever {kwargs.get('name')}: {query}", tuple(sorted(t for t in tags or () if ":" in t))))

    def on_tool_start(self, serialized, input_str, *, run_id, parent_run_id=None, tags=None, **kwargs):
        self.runs.append((f"tool {serialized.get('name')}: {input_str}", tuple(sorted(t for t in tags or () if ":" in t))))


def test_kwargs_reach_the_first_step_as_stock(chat_model) -> None:
    stock_rec, fast_rec = KwargsRecorder(), KwargsRecorder()
    stock = stock_rec | PROMPT | chat_model | StrOutputParser()
    fast = accel.wrap(fast_rec | PROMPT | chat_model | StrOutputParser())
    assert fast.lowered
    assert fast.invoke("What is heapq?", extra="x") == stock.invoke("What is heapq?", extra="x")
    assert fast_rec.seen == stock_rec.seen == [{"extra": "x"}]


def test_kwargs_for_a_lowered_first_step_run_the_stock_chain(chat_model) -> None:
    chain = PROMPT | chat_model | StrOutputParser()
    fast = accel.wrap(chain)
    # a prompt's stock invoke drops kwargs: accel may run the lowered chain
    assert fast.invoke({"question": "hi"}, unused=1) == chain.invoke({"question": "hi"}, unused=1)
    model_first = accel.wrap(chat_model | StrOutputParser())
    # a model first: kwargs change the request (stop), so only the stock chain can honour them
    assert model_first.invoke("count: one two three", stop=["two"]) == (chat_model | StrOutputParser()).invoke("count: one two three", stop=["two"])
    assert "stock runs: kwargs for a lowered first step: 1" in model_first.explain()


def test_async_only_steps_run_their_async_method_on_the_callers_loop(chat_model) -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def ask(question: str) -> dict[str, str]:  # no sync function: ainvoke only, as stock
        loops.append(asyncio.get_running_loop())
        return {"question": question}

    chain = RunnableLambda(ask) | PROMPT | chat_model | StrOutputParser()
    fast = accel.wrap(chain)

    async def both() -> tuple[str, str, asyncio.AbstractEventLoop]:
        return await chain.ainvoke("What is json?"), await fast.ainvoke("What is json?"), asyncio.get_running_loop()

    stock_out, fast_out, caller_loop = asyncio.run(both())
    assert fast_out == stock_out
    assert loops == [caller_loop, caller_loop]
    with pytest.raises(TypeError) as stock_error:
        chain.invoke("x")
    with pytest.raises(type(stock_error.value)):
        fast.invoke("x")


def _asking_chain(chat_model: Any, threads: list[str]) -> Runnable:
    """A sync first step that records the thread it runs on, then the model."""
    def ask(question: str) -> dict[str, str]:
        threads.append(threading.current_thread().name)
        return {"question": question}

    return RunnableLambda(ask) | PROMPT | chat_model | StrOutputParser()


def test_sync_steps_run_on_the_callers_thread_with_stock_run_tags(chat_model) -> None:
    threads: list[str] = []
    chain = _asking_chain(chat_model, threads)
    fast = accel.wrap(chain)
    stock_runs, fast_runs = Runs(), Runs()
    caller = threading.current_thread().name
    chain.invoke("What is json?", config={"callbacks": [stock_runs]})
    fast.invoke("What is json?", config={"callbacks": [fast_runs]})
    assert threads == [caller, caller]
    stock_ask = [r for r in stock_runs.runs if r[0] == "ask"]
    assert stock_ask == [r for r in fast_runs.runs if r[0] == "ask"] == [("ask", ("seq:step:1",))]


def _default_executor_threads() -> int:
    """The threads asyncio gives a loop's default executor (`ThreadPoolExecutor`'s default)."""
    import os

    return min(32, (os.cpu_count() or 1) + 4)


class Ask(Runnable[Any, Any]):
    """A first step with `invoke` only: stock's `ainvoke` runs it in the default executor."""

    def __init__(self, ask: Any) -> None:
        self.ask = ask

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self.ask(input)


def _stock_one_by_one_then_wrapped_together(stock: Runnable, waiting: Runnable, questions: list[str],
                                            threads: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """Stock asks one question at a time (its sync step records an `asyncio` default-executor
    thread each); the wrapped `waiting` chain asks them all at once, its sync steps meeting at a
    barrier of as many parties: the same answers and runs, no step on a default-executor
    thread. The wrapped call's runs."""
    fast = accel.wrap(waiting)
    assert fast.lowered
    stock_runs, fast_runs = Runs(), Runs()

    async def stock_one_by_one() -> list[str]:
        return [await stock.ainvoke(q, config={"callbacks": [stock_runs]}) for q in questions]

    async def fast_together() -> list[str]:
        return await asyncio.gather(*(fast.ainvoke(q, config={"callbacks": [fast_runs]}) for q in questions))

    expected = asyncio.run(stock_one_by_one())
    assert len(threads) == len(questions) and all(name.startswith("asyncio") for name in threads)  # stock: the default executor
    threads.clear()
    assert asyncio.run(fast_together()) == expected
    assert len(threads) == len(questions) and not any(name.startswith("asyncio") for name in threads)
    assert sorted(fast_runs.runs) == sorted(stock_runs.runs)
    return fast_runs.runs


@pytest.mark.parametrize("step", ["lambda", "invoke only"])
def test_sync_steps_of_concurrent_ainvokes_are_not_held_to_the_default_executor(chat_model, step) -> None:
    """Stock's `ainvoke` hands a sync step to the loop's default executor, so no more of them
    run at once than it has threads. A wrapped call runs the same code in accel's pool: one
    more concurrent call than those threads all meet at a barrier, which they could not if
    each waited for one of them; answers and runs as stock's (stock asked one at a time)."""
    parties = _default_executor_threads() + 1
    meet = threading.Barrier(parties, timeout=60)
    threads: list[str] = []

    def chain_with(wait: bool) -> Runnable:
        def ask(question: str) -> dict[str, str]:
            threads.append(threading.current_thread().name)
            if wait:
                meet.wait()
            return {"question": question}

        first = RunnableLambda(ask) if step == "lambda" else Ask(ask)
        return first | PROMPT | chat_model | StrOutputParser()

    _stock_one_by_one_then_wrapped_together(chain_with(False), chain_with(True),
                                            [f"What is json? ({i})" for i in range(parties)], threads)


class ToyRetriever(BaseRetriever):
    """The LangChain docs' custom retriever (how-to "custom retriever"): the documents that
    contain the query's first word, `_get_relevant_documents` only; `wait` stands for the
    blocking call a real one makes."""

    documents: list[Document]
    k: int
    wait: Any = None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if self.wait is not None:
            self.wait()
        word = query.split()[0].lower()
        return [doc for doc in self.documents if word in doc.page_content.lower()][: self.k]


@pytest.mark.parametrize("step", ["retriever", "retriever in a parallel", "tool"])
def test_sync_retrievers_and_tools_of_concurrent_ainvokes_are_not_held_to_the_default_executor(chat_model, step) -> None:
    """A retriever with only its sync method (a step of its own, or inside an engine-free
    parallel, which runs as one opaque step) and an `@tool` over a plain function: stock's
    `ainvoke` runs them in the default executor, a wrapped call in accel's pool (a barrier of
    one more party than its threads); answers and runs (retriever and tool runs included) as
    stock's, asked one at a time."""
    parties = _default_executor_threads() + 1
    meet = threading.Barrier(parties, timeout=60)
    threads: list[str] = []
    docs = [Document(page_content=f"{word} is a data format.") for word in ("JSON", "YAML", "TOML")]

    def chain_with(wait: bool) -> Runnable:
        def record() -> None:
            threads.append(threading.current_thread().name)
            if wait:
                meet.wait()

        if step.startswith("retriever"):
            retrieve = ToyRetriever(documents=docs, k=1, wait=record)
            if step == "retriever":
                first = retrieve | RunnableLambda(lambda found: {"question": f"Explain: {found[0].page_content}"})
            else:
                first = RunnableParallel(question=retrieve | RunnableLambda(lambda found: f"Explain: {found[0].page_content}"))
        else:
            @tool
            def describe(query: str) -> str:
                """What a format is."""
                record()
                return f"Explain: {query} is a data format."

            first = describe | RunnableLambda(lambda text: {"question": text})
        return first | PROMPT | chat_model | StrOutputParser()

    questions = [word for word in ("JSON", "YAML", "TOML") for _ in range(parties)][:parties]
    fast_runs = _stock_one_by_one_then_wrapped_together(chain_with(False), chain_with(True), questions, threads)
    assert any(run[0].startswith(step.split()[0]) for run in fast_runs)


def test_a_default_executor_the_user_set_runs_the_sync_steps(chat_model) -> None:
    threads: list[str] = []
    chain = _asking_chain(chat_model, threads)
    fast = accel.wrap(chain)

    async def both() -> tuple[str, str]:
        from concurrent.futures import ThreadPoolExecutor

        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2, thread_name_prefix="mine"))
        return await chain.ainvoke("What is json?"), await fast.ainvoke("What is json?")

    stock_out, fast_out = asyncio.run(both())
    assert fast_out == stock_out
    assert len(threads) == 2 and all(name.startswith("mine") for name in threads)


def test_an_engine_free_parallel_keeps_its_own_run(chat_model) -> None:
    both = RunnableParallel(question=RunnableLambda(lambda q: q), shout=RunnableLambda(str.upper))
    chain = both | ChatPromptTemplate.from_template("{question} {shout}") | chat_model | StrOutputParser()
    fast = accel.wrap(chain)
    stock_runs, fast_runs = Runs(), Runs()
    assert fast.invoke("json?", config={"callbacks": [fast_runs]}) == chain.invoke("json?", config={"callbacks": [stock_runs]})
    keyed = sorted(r for r in stock_runs.runs if any(t.startswith("map:key:") for t in r[1]))
    assert keyed and keyed == sorted(r for r in fast_runs.runs if any(t.startswith("map:key:") for t in r[1]))
    assert [r for r in stock_runs.runs if r[0].startswith("RunnableParallel")] == [r for r in fast_runs.runs if r[0].startswith("RunnableParallel")]


def test_a_step_with_its_own_callbacks_stays_opaque_and_calls_them(chat_model) -> None:
    stock_seen, fast_seen = Runs(), Runs()

    def chain_with(handler: Runs) -> Runnable:
        step = RunnableLambda(lambda q: {"question": q}).with_config(callbacks=[handler], run_name="ask", tags=["mine"])
        return step | PROMPT | chat_model | StrOutputParser()

    stock, fast = chain_with(stock_seen), accel.wrap(chain_with(fast_seen))
    assert fast.invoke("What is json?") == stock.invoke("What is json?")
    assert fast_seen.runs == stock_seen.runs and fast_seen.runs
    assert "with_config(callbacks, run_name, tags)" in fast.explain()


def test_user_code_runs_once_when_a_later_engine_fails(chat_model) -> None:
    """A step with a side effect, then an LLM call the server rejects (prompt over the context
    length): stock runs the step once and raises the client's error; so does accel."""
    stock_calls, fast_calls = [], []

    def chain_with(calls: list[str]) -> Runnable:
        def remember(question: str) -> dict[str, str]:
            calls.append(question)
            return {"question": "word " * 5000}

        return RunnableLambda(remember) | PROMPT | chat_model | StrOutputParser()

    stock, fast = chain_with(stock_calls), accel.wrap(chain_with(fast_calls))
    with pytest.raises(Exception) as stock_error:
        stock.invoke("q")
    with pytest.raises(type(stock_error.value)):
        fast.invoke("q")
    with pytest.raises(type(stock_error.value)):
        asyncio.run(fast.ainvoke("q"))
    assert stock_calls == ["q"] and fast_calls == ["q", "q"]  # once per call
    assert "engine errors raised: 2" in fast.explain()


def test_an_engine_error_before_user_code_ran_answers_with_the_stock_chain(chat_model) -> None:
    """Nothing of the user's ran yet (the failing LLM call is the first step): the stock
    chain answers, so the caller gets stock's own exception from stock's own request."""
    chain = chat_model | StrOutputParser()
    fast = accel.wrap(chain)
    too_long = "word " * 5000
    with pytest.raises(Exception) as stock_error:
        chain.invoke(too_long)
    with pytest.raises(type(stock_error.value)):
        fast.invoke(too_long)
    assert "stock fallbacks: 1" in fast.explain()


def test_components_with_their_own_batch_get_it(chat_model) -> None:
    """A completion model batches its prompts into one generate call; an opaque one in a
    lowered chain gets that call from a wrapped `batch`, as from stock's."""
    calls: dict[str, int] = {"stock": 0, "fast": 0}

    def counting(key: str):
        from langchain_core.language_models.fake import FakeListLLM

        class CountingLLM(FakeListLLM):
            def batch(self, inputs, config=None, **kwargs):
                calls[key] += 1
                return super().batch(inputs, config, **kwargs)

        return CountingLLM(responses=["a", "b", "c"])

    def chain_with(key: str) -> Runnable:
        return PROMPT | chat_model | StrOutputParser() | counting(key)

    stock, fast = chain_with("stock"), accel.wrap(chain_with("fast"))
    assert fast.lowered
    questions = ["What is json?", "What is heapq?"]
    assert fast.batch(questions) == stock.batch(questions)
    assert calls == {"stock": 1, "fast": 1}
    assert "CountingLLM batch(es) on their own" in fast.explain()


@pytest.mark.parametrize("bad", [None, "a plain string", 7, {"question": None}, {"question": 123}, {"question": ["a", "b"]}])
def test_malformed_inputs_raise_stock_s_exception_types(vectorstore, chat_model, bad) -> None:
    """The docs' `RunnablePassthrough.assign(context=...)` RAG shape: stock checks the input is a
    dict before any branch runs, and the embedder fails on a non-str question itself."""
    from langchain_core.runnables import RunnablePassthrough

    retriever = vectorstore.as_retriever(search_kwargs={"k": 1})
    chain = (RunnablePassthrough.assign(context=(lambda x: x["question"]) | retriever)
             | ChatPromptTemplate.from_template("{context} {question}") | chat_model | StrOutputParser())
    fast = accel.wrap(chain)
    assert fast.lowered
    with pytest.raises(Exception) as stock_error:
        chain.invoke(bad)
    with pytest.raises(type(stock_error.value)):
        fast.invoke(bad)
    with pytest.raises(type(stock_error.value)):
        list(fast.stream(bad))
    stock_out = chain.batch([{"question": "What is json?"}, bad], return_exceptions=True)
    fast_out = fast.batch([{"question": "What is json?"}, bad], return_exceptions=True)
    assert [type(o) for o in fast_out] == [type(o) for o in stock_out] and fast_out[0] == stock_out[0]
