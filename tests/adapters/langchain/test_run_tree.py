"""A wrapped chain shows tracers the stock chain's run tree, on the real engines.

LangSmith, Langfuse and every other LangChain tracer build their traces from the callback runs
a chain emits: one run per Runnable the user wrote, with its name, run_type, tags, metadata,
inputs, outputs and error, nested as the chain is. A lowered chain runs prompts, models,
parsers, retrievers and parallels on accel's engines, and the trace must not show it: each test
records both runs with a LangSmith-like tracer, normalises away what differs between any two
executions (run ids, times, message ids, token usage, server details) and compares the trees.
"""

from __future__ import annotations

import asyncio
import functools
import operator
from operator import itemgetter
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

import accel
from accel.testing.runtrees import Recorder, difference, llm_runs, outline, trees

pytestmark = [pytest.mark.engines, pytest.mark.slow]

PROMPT = ChatPromptTemplate.from_messages([("system", "Answer briefly."), ("human", "{question}")])
RAG_PROMPT = ChatPromptTemplate.from_messages([("system", "Answer from this context:\n\n{context}"), ("human", "{question}")])


def invoke(x: Any):
    return lambda runnable, config: runnable.invoke(x, config=config)


def same_trace(chain, call=None, x: Any = None) -> tuple[Recorder, Recorder]:
    """Run `call(runnable, config)` on the stock chain and its wrapped twin, each with its own
    recorder: equal outputs, equal run trees. Returns both recorders."""
    call = call or invoke(x)
    fast = accel.wrap(chain)
    assert fast.lowered
    stock_runs, fast_runs = Recorder(), Recorder()
    stock_out = call(chain, {"callbacks": [stock_runs]})
    fast_out = call(fast, {"callbacks": [fast_runs]})
    assert fast_out == stock_out
    assert stock_runs.roots
    assert trees(fast_runs) == trees(stock_runs), difference(trees(fast_runs), trees(stock_runs))
    return stock_runs, fast_runs


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(doc.page_content for doc in docs)


def test_prompt_model_parser(chat_model, questions) -> None:
    stock, _ = same_trace(PROMPT | chat_model | StrOutputParser(), x={"question": questions[0]})
    assert outline(trees(stock)[0]) == [
        (0, "RunnableSequence", "chain", ()),
        (1, "ChatPromptTemplate", "prompt", ("seq:step:1",)),
        (1, "ChatOpenAI", "llm", ("seq:step:2",)),
        (1, "StrOutputParser", "parser", ("seq:step:3",)),
    ]


def test_the_docs_rag_chain(vectorstore, chat_model, questions) -> None:
    retriever = vectorstore.as_retriever(search_kwargs={"k": 3})
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | RAG_PROMPT | chat_model | StrOutputParser()
    stock, _ = same_trace(chain, x=questions[1])
    rows = outline(trees(stock)[0])
    # stock tags a vector store's retriever with the store's and the embedder's class names
    assert (2, "RunnableSequence", "chain", ("map:key:context",)) in rows
    assert (3, "VectorStoreRetriever", "retriever", ("HuggingFaceEmbeddings", "PGVector", "seq:step:1")) in rows
    assert (3, "format_docs", "chain", ("seq:step:2",)) in rows
    assert (2, "RunnablePassthrough", "chain", ("map:key:question",)) in rows


def test_passthrough_assign(chat_model, questions) -> None:
    chain = RunnablePassthrough.assign(answer=PROMPT | chat_model | StrOutputParser())
    same_trace(chain, x={"question": questions[2]})


def two_dependent_calls(chat_model):
    draft = ChatPromptTemplate.from_template("Draft an answer: {question}")
    refine = ChatPromptTemplate.from_messages([("system", "Shorten this draft."), ("human", "{draft}")])
    return {"draft": draft | chat_model | StrOutputParser()} | refine | chat_model | StrOutputParser()


def test_two_dependent_llm_calls(chat_model, questions) -> None:
    stock, _ = same_trace(two_dependent_calls(chat_model), x={"question": questions[3]})
    assert [r[1] for r in outline(trees(stock)[0])].count("ChatOpenAI") == 2


def test_completion_model(completion_model, questions) -> None:
    chain = PromptTemplate.from_template("Question: {question}\nAnswer:") | completion_model | StrOutputParser()
    same_trace(chain, x={"question": questions[0]})


def test_run_name_tags_and_metadata(chat_model, questions) -> None:
    answer = (PROMPT | chat_model).with_config(run_name="answer", tags=["mine"], metadata={"k": "v"})
    stock, _ = same_trace(answer | StrOutputParser(), x={"question": questions[1]})
    rows = outline(trees(stock)[0])
    assert rows[1] == (1, "answer", "chain", ("mine", "seq:step:1"))
    assert rows[3] == (2, "ChatOpenAI", "llm", ("mine", "seq:step:2"))  # tags are inherited
    assert trees(stock)[0]["children"][0]["children"][1]["metadata"]["k"] == "v"  # so is metadata


def test_a_bound_stop(chat_model, questions) -> None:
    stock, _ = same_trace(PROMPT | chat_model.bind(stop=["\n"]) | StrOutputParser(), x={"question": questions[1]})
    llm = trees(stock)[0]["children"][1]
    assert llm["invocation"]["stop"] == llm["metadata"]["ls_stop"] == ["\n"]


def test_ainvoke(chat_model, questions) -> None:
    """(Not the RAG chain: a sync PGVector store cannot serve stock `ainvoke`.)"""
    ainvoke = lambda runnable, config: asyncio.run(runnable.ainvoke({"question": questions[0]}, config=config))  # noqa: E731
    same_trace(two_dependent_calls(chat_model), ainvoke)


def test_batch_gives_each_input_its_own_root(chat_model, questions) -> None:
    chain = PROMPT | chat_model | StrOutputParser()
    inputs = [{"question": q} for q in questions[:2]]
    stock, fast = same_trace(chain, lambda runnable, config: runnable.batch(inputs, config=config))
    assert len(stock.roots) == len(fast.roots) == 2


def test_stream(vectorstore, chat_model, questions) -> None:
    retriever = vectorstore.as_retriever(search_kwargs={"k": 3})
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | RAG_PROMPT | chat_model | StrOutputParser()
    stock, fast = same_trace(chain, lambda runnable, config: "".join(runnable.stream(questions[2], config=config)))
    for recorder in (stock, fast):  # the streamed model run reports its tokens as they come
        counts = [sum(event["name"] == "new_token" for event in run.events) for run in llm_runs(recorder.roots[0])]
        assert counts and min(counts) > 0


def test_an_error_after_the_model_marks_the_same_runs(chat_model, questions) -> None:
    def check(answer: str) -> str:
        raise ValueError(f"rejected: {answer!r}")

    def raising(runnable, config) -> str:
        with pytest.raises(ValueError):
            runnable.invoke({"question": questions[0]}, config=config)
        return "raised"

    stock, _ = same_trace(PROMPT | chat_model | StrOutputParser() | RunnableLambda(check), raising)
    root = trees(stock)[0]
    assert root["error"] == root["children"][-1]["error"] == "ValueError"
    assert [child["error"] for child in root["children"][:-1]] == [None, None, None]


def test_a_branch_shows_its_conditions_and_the_taken_branch(chat_model, questions) -> None:
    from langchain_core.runnables import RunnableBranch

    about_json = RunnableLambda(lambda x: "json" in x["question"].lower())
    branch = RunnableBranch((about_json, PROMPT | chat_model | StrOutputParser()), RunnableLambda(lambda x: "not about json"))
    chain = {"question": RunnablePassthrough()} | branch
    stock, _ = same_trace(chain, x=questions[0])
    rows = outline(trees(stock)[0])
    assert (1, "RunnableBranch", "chain", ("seq:step:2",)) in rows
    assert (2, "RunnableSequence", "chain", ("branch:1",)) in rows
    same_trace(chain, x=questions[1])  # the default branch (opaque user code)


def test_compression_and_multi_query_retrievers_in_a_chain(vectorstore, reranker_dir, chat_model, questions) -> None:
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
    from langchain_classic.retrievers.multi_query import MultiQueryRetriever
    from langchain_community.cross_encoders import HuggingFaceCrossEncoder

    reranked = ContextualCompressionRetriever(base_compressor=CrossEncoderReranker(model=HuggingFaceCrossEncoder(model_name=str(reranker_dir)), top_n=2),
                                              base_retriever=vectorstore.as_retriever(search_kwargs={"k": 4}))
    # include_original=False: stock appends the question to the list its query chain returned,
    # after that run ended, so a stock trace shows it in that run's output (ours does not)
    expanded = MultiQueryRetriever.from_llm(retriever=vectorstore.as_retriever(search_kwargs={"k": 2}), llm=chat_model)
    for retriever in (reranked, expanded):
        chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | RAG_PROMPT | chat_model | StrOutputParser()
        assert "Embed + Search" in accel.wrap(chain).explain()
        same_trace(chain, x=questions[2])


def test_a_window_of_a_parsed_list_shows_its_lambda_run(vectorstore, chat_model, questions) -> None:
    """`itemgetter(slice(0, 2))` after a list parser is lowered (and streamed into the
    retriever), yet the trace shows the RunnableLambda's run with the whole list in and the
    window out, for invoke and stream."""
    from langchain_classic.retrievers.multi_query import LineListOutputParser, MultiQueryRetriever

    expand = PromptTemplate.from_template("Write three other phrasings of this question, one per line:\n{question}")
    queries = expand | chat_model | LineListOutputParser() | itemgetter(slice(0, 2))
    retriever = MultiQueryRetriever(retriever=vectorstore.as_retriever(search_kwargs={"k": 2}), llm_chain=queries)
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | RAG_PROMPT | chat_model | StrOutputParser()
    assert "a window of the list" in accel.wrap(chain).explain()
    stock, _ = same_trace(chain, x=questions[1])
    assert ("RunnableLambda", "chain", ("seq:step:4",)) in [entry[1:] for entry in outline(trees(stock)[0])]
    same_trace(chain, lambda runnable, config: "".join(runnable.stream(questions[2], config=config)))
    same_trace(queries, x={"question": questions[0]})  # the window as the chain's last step


def test_a_streamed_chain_ending_in_a_list_parser_shows_a_streamed_model(chat_model, questions) -> None:
    """Stock `stream` streams every model it reaches through sequences: the model's run reports
    each token and ends in a merged chunk, the list parser's input is an `AIMessageChunk`,
    though the chain's output is the parsed list, not the model's text."""
    from langchain_classic.retrievers.multi_query import LineListOutputParser

    expand = PromptTemplate.from_template("Write three other phrasings of this question, one per line:\n{question}")
    stock, fast = same_trace(expand | chat_model | LineListOutputParser(),
                             lambda runnable, config: list(runnable.stream({"question": questions[0]}, config=config)))
    assert trees(stock)[0]["children"][2]["inputs"]["input"]["type"] == "AIMessageChunk"
    assert_same_tokens(stock, fast)
    assert tokens(llm_runs(fast.roots[0])[0])


def test_streamed_models_are_the_ones_stock_streams(chat_model, questions) -> None:
    """Under `stream`, stock streams the models its sequences, parallels, assigns and taken
    branches hand the stream to, and invokes those under a RunnableEach; `disable_streaming`
    models never stream and `streaming=True` ones stream in `invoke` too (tokens, then a message).
    Every model run reports the same tokens and output type as stock's."""
    from langchain_classic.retrievers.multi_query import LineListOutputParser
    from langchain_core.runnables import RunnableBranch

    expand = PromptTemplate.from_template("Write three other phrasings of this question, one per line:\n{question}")
    lines = expand | chat_model | LineListOutputParser()
    answer = PROMPT | chat_model | StrOutputParser()
    quiet = PROMPT | chat_model.model_copy(update={"disable_streaming": True}) | LineListOutputParser()
    about_json = RunnableLambda(lambda x: "json" in x["question"].lower())
    chains = {
        "parallel": RunnableParallel(lines=lines, answer=answer),
        "assign": RunnablePassthrough.assign(lines=lines),
        "branch": RunnableBranch((about_json, lines), quiet),
        "each": RunnableLambda(lambda x: [x, x]) | lines.map(),
        "disabled": quiet,
    }
    # stock streams a parallel's branches as dicts of chunks (`AddableDict`s); accel gives the
    # whole dict once (docs/design.md): compare what the chunks add up to
    stream = lambda runnable, config: functools.reduce(operator.add, runnable.stream({"question": questions[0]}, config=config))  # noqa: E731
    for name, chain in chains.items():
        stock, fast = same_trace(chain, stream)
        assert_same_tokens(stock, fast, name)
        assert any(tokens(run) for run in llm_runs(stock.roots[0])) == (name not in ("each", "disabled")), name
    stock, fast = same_trace(chain := PROMPT | chat_model.model_copy(update={"streaming": True}) | LineListOutputParser(),
                             x={"question": questions[1]})
    assert_same_tokens(stock, fast)
    assert [tokens(run) for run in llm_runs(stock.roots[0])] != [[]]


def assert_same_tokens(stock: Recorder, fast: Recorder, name: str = "") -> None:
    """Each model run reports the same text token by token as stock's: streamed or not, one token
    or more, the same text. Not the same list: vLLM puts several tokens in one event when its
    client lags, so two streams of one answer may split differently (a merge in stock's run made
    a list comparison fail on a busy machine)."""
    pairs = list(zip(llm_runs(stock.roots[0]), llm_runs(fast.roots[0]), strict=True))
    for stock_run, fast_run in pairs:
        ours, theirs = tokens(fast_run), tokens(stock_run)
        assert ("".join(ours), bool(ours), len(ours) > 1) == ("".join(theirs), bool(theirs), len(theirs) > 1), name


def tokens(run) -> list[str]:
    """The text a model run reported token by token (`on_llm_new_token`, events of the run),
    without the empty tokens stock reports for the server's role, finish and usage events."""
    return [event["kwargs"]["token"] for event in run.events if event["name"] == "new_token" and event["kwargs"]["token"]]


def test_astream_events_start_and_end_the_same_runs(chat_model, questions) -> None:
    """`astream_events` (chat UIs stream from it): every run starts and ends as in stock, and
    the same steps stream as in stock, both models included (a streaming handler gets the
    stock chain with its engine calls captured: docs/design.md; events of every external app:
    tests/external/test_stream_events.py)."""
    chain = two_dependent_calls(chat_model)

    async def events(runnable) -> list[tuple[str, str, tuple[str, ...]]]:
        return [(e["event"], e["name"], tuple(sorted(e["tags"])))
                async for e in runnable.astream_events({"question": questions[1]}, version="v2")]

    stock, fast = asyncio.run(events(chain)), asyncio.run(events(accel.wrap(chain)))
    ends = lambda seen: sorted(e for e in seen if e[0].endswith(("_start", "_end")))  # noqa: E731
    assert ends(fast) == ends(stock)
    streamed = lambda seen: sorted({e for e in seen if e[0].endswith("_stream")})  # noqa: E731
    assert streamed(fast) == streamed(stock)
    assert len({e for e in streamed(fast) if e[0] == "on_chat_model_stream"}) == 2


def test_a_model_or_retriever_wrapped_alone_opens_its_own_run(vectorstore, chat_model, questions) -> None:
    # a model's message carries its own id and server details: compare the text
    stock, _ = same_trace(chat_model, lambda runnable, config: runnable.invoke(questions[0], config=config).content)
    assert outline(trees(stock)[0]) == [(0, "ChatOpenAI", "llm", ())]
    named = lambda runnable, config: runnable.invoke(questions[1], config={**config, "run_name": "ask", "tags": ["t"]}).content  # noqa: E731
    stock, _ = same_trace(chat_model, named)
    assert outline(trees(stock)[0]) == [(0, "ask", "llm", ("t",))]
    stock, _ = same_trace(vectorstore.as_retriever(search_kwargs={"k": 2}), x=questions[2])
    assert outline(trees(stock)[0])[0][:3] == (0, "VectorStoreRetriever", "retriever")
