"""Stock vs wrapped on the real engines: same outputs and same engine requests, per pattern."""

from __future__ import annotations

from operator import itemgetter

import pytest
from langchain_core.output_parsers import CommaSeparatedListOutputParser, NumberedListOutputParser, StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

import accel

from .fidelity import assert_same, run

pytestmark = [pytest.mark.engines, pytest.mark.slow]

RAG_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "You answer questions about the Python standard library. Be brief and precise. "
               "Use only the context below; if it does not say, answer that you do not know.\n\nContext:\n{context}"),
    ("human", "{question}"),
])


def format_docs(docs) -> str:
    return "\n\n".join(d.page_content for d in docs)


def content(message) -> str:
    return message.content


def test_rag_parallel_prompt_chat_model_str_parser(vectorstore, chat_model, llm_proxy, questions) -> None:
    retriever = vectorstore.as_retriever(search_kwargs={"k": 3})
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | RAG_PROMPT | chat_model | StrOutputParser()
    fast = accel.wrap(chain)
    explained = fast.explain()
    assert "Embed + Search" in explained and "Decode" in explained
    stock_run = run(chain, questions, llm_proxy)
    fast_run = run(fast, questions, llm_proxy)
    assert_same(stock_run, fast_run)
    assert all(isinstance(o, str) and o for o in fast_run.outputs)
    assert len(fast_run.searched) == len(questions)
    kinds = {str(node.kind) for node in fast.template.graph.nodes()}
    assert "PartialPrefill" in kinds  # prefill split: the static system prefix is exposed for early prefill


def test_rag_batch_matches_stock_batch(vectorstore, chat_model, llm_proxy, questions) -> None:
    retriever = vectorstore.as_retriever(search_kwargs={"k": 2})
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | RAG_PROMPT | chat_model | StrOutputParser()
    assert_same(run(chain, questions, llm_proxy, mode="batch"), run(accel.wrap(chain), questions, llm_proxy, mode="batch"))


def test_assign_pick_lambda_and_message_output(vectorstore, chat_model, llm_proxy, questions) -> None:
    retriever = vectorstore.as_retriever(search_kwargs={"k": 2, "filter": {"even": True}})
    chain = (
        RunnablePassthrough.assign(context=itemgetter("question") | retriever | RunnableLambda(format_docs))
        | RunnableParallel(answer=RAG_PROMPT | chat_model, context=itemgetter("context"))
        .assign(words=lambda d: len(d["context"].split()))
    )
    inputs = [{"question": q} for q in questions[:3]]
    fast = accel.wrap(chain)
    shape = lambda out: (out["answer"].content, out["context"], out["words"])  # noqa: E731
    assert_same(run(chain, inputs, llm_proxy), run(fast, inputs, llm_proxy), output=shape)
    assert "opaque" in fast.explain()


def test_completion_model_prompt_template_and_list_parsers(completion_model, llm_proxy, questions) -> None:
    prompt = PromptTemplate.from_template("List three keywords for the question below, separated by commas.\nQuestion: {question}\nKeywords:")
    for parser in (CommaSeparatedListOutputParser(), NumberedListOutputParser(), StrOutputParser()):
        chain = prompt | completion_model | parser
        assert_same(run(chain, questions[:2], llm_proxy), run(accel.wrap(chain), questions[:2], llm_proxy))


def test_bound_stop_with_config_and_mustache_prompt(chat_model, llm_proxy, questions) -> None:
    prompt = ChatPromptTemplate.from_messages([("human", "Question: {{question}}\nAnswer:")], template_format="mustache")
    chain = (prompt | chat_model.bind(stop=["\n", "."]) | StrOutputParser()).with_config(run_name="mustache-chain")
    inputs = [{"question": q} for q in questions[:2]]
    assert_same(run(chain, inputs, llm_proxy), run(accel.wrap(chain), inputs, llm_proxy))


def test_model_alone_takes_a_string_or_messages(chat_model, llm_proxy, questions) -> None:
    assert_same(run(chat_model, questions[:2], llm_proxy), run(accel.wrap(chat_model), questions[:2], llm_proxy), output=content)


def test_rerank_compression_retriever(vectorstore, reranker_dir, llm_proxy, questions) -> None:
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
    from langchain_community.cross_encoders import HuggingFaceCrossEncoder

    model = HuggingFaceCrossEncoder(model_name=str(reranker_dir))
    retriever = ContextualCompressionRetriever(
        base_compressor=CrossEncoderReranker(model=model, top_n=2),
        base_retriever=vectorstore.as_retriever(search_kwargs={"k": 5}),
    )
    fast = accel.wrap(retriever)
    assert "Rerank" in fast.explain()
    stock_run = run(retriever, questions, llm_proxy)
    fast_run = run(fast, questions, llm_proxy)
    assert_same(stock_run, fast_run)
    assert len(fast_run.scored) == 5 * len(questions)


def test_multi_query_retriever(vectorstore, chat_model, llm_proxy, questions) -> None:
    from langchain_classic.retrievers.multi_query import MultiQueryRetriever

    retriever = MultiQueryRetriever.from_llm(retriever=vectorstore.as_retriever(search_kwargs={"k": 2}), llm=chat_model, include_original=True)
    fast = accel.wrap(retriever)
    explained = fast.explain()
    assert "generated queries" in explained
    stock_run = run(retriever, questions[:2], llm_proxy)
    fast_run = run(fast, questions[:2], llm_proxy)
    assert_same(stock_run, fast_run)
    assert len(fast_run.llm) == 2


def test_multi_query_with_a_window_of_the_generated_lines(vectorstore, chat_model, llm_proxy, questions) -> None:
    """The query chain cut by `itemgetter(slice(0, 2))` (as the multi-query recipes keep the
    first few lines): the window is lowered and the lines stream through it into Embed +
    Search; outputs and every engine request as stock's, invoked and streamed; in a batch,
    identical generated queries are embedded once (`share_requests`)."""
    from langchain_classic.retrievers.multi_query import LineListOutputParser, MultiQueryRetriever

    expand = PromptTemplate.from_template("Write three other phrasings of this question, one per line:\n{question}")
    queries = expand | chat_model | LineListOutputParser() | itemgetter(slice(0, 2))
    retriever = MultiQueryRetriever(retriever=vectorstore.as_retriever(search_kwargs={"k": 2}), llm_chain=queries, include_original=True)
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | RAG_PROMPT | chat_model | StrOutputParser()
    fast = accel.wrap(chain)
    explained = fast.explain()
    assert "a window of the list" in explained and "decodes as a stream of lines items" in explained, explained
    assert_same(run(chain, questions[:3], llm_proxy), run(fast, questions[:3], llm_proxy))
    # a stream's chunks split where the server's events do: compared joined, as in test_streaming
    assert_same(run(chain, questions[:3], llm_proxy, mode="stream"), run(fast, questions[:3], llm_proxy, mode="stream"), output="".join)
    stock, batched = run(chain, questions[:3], llm_proxy, mode="batch"), run(fast, questions[:3], llm_proxy, mode="batch")
    assert batched.outputs == stock.outputs and batched.llm == stock.llm
    assert sorted(set(batched.embedded)) == sorted(set(stock.embedded))


def test_extra_body_fields_reach_the_server_as_top_level_fields(llm_proxy, questions) -> None:
    """`ChatOpenAI(extra_body=...)`: the openai SDK merges these into the request body (vLLM's
    own sampling options, e.g. top_k, repetition_penalty); accel must send them the same way."""
    from langchain_openai import ChatOpenAI

    from .conftest import TINY

    model = ChatOpenAI(base_url=llm_proxy.url + "/v1", api_key="EMPTY", model=TINY, temperature=0, max_tokens=8,
                       extra_body={"top_k": 1, "repetition_penalty": 1.2})
    chain = PromptTemplate.from_template("Say something about {question}") | model | StrOutputParser()
    stock_run, fast_run = run(chain, questions, llm_proxy), run(accel.wrap(chain), questions, llm_proxy)
    assert_same(stock_run, fast_run)
    assert fast_run.llm and all('"extra_body"' not in body and '"top_k": 1' in body for body in fast_run.llm)
