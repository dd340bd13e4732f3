"""Retrievers over server embeddings, lowered: a PGVector retriever over LangChain
`OpenAIEmbeddings(base_url=...)` and a LlamaIndex `VectorIndexRetriever` over
`OpenAILikeEmbedding` / `OpenAIEmbedding(api_base=...)` become Embed + Search (the Embed on the
server's `EmbeddingServerEngine`), and answer what stock answers while sending what stock sends
to the embedding server (a real vLLM pooling server behind a recording proxy): a lone query's
request body is stock's own, and under concurrent queries the inputs, each with the fields
beside it, are stock's multiset, in fewer requests. Configurations a lowered Embed cannot
reproduce (a tiktoken-tokenizing client, a client with headers of its own) stay on the floor,
are counted as lost lowerings, and stay stock-equal.

ACCEL_TEST_EMBED_URL reuses an embedding server already running (local iteration).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import accel
from accel.adapters.common import floor
from accel.adapters.common.explain import lost_lowerings
from accel.engines.encoder_servers import EMBED_SERVED_NAME
from accel.ir import Kind
from accel.testing.proxy import RecordingProxy

from .test_server_embeddings import (  # noqa: F401  (module fixtures, one server per module)
    CONCURRENT, QUESTIONS, TINY, doc_texts, embed_proxy, embed_url, lc_embeddings, li_embed_model)

pytestmark = [pytest.mark.engines, pytest.mark.slow]

NEWLINE_QUESTION = "How do I use\njson.loads?"  # OpenAIEmbeddings sends the newline, LlamaIndex a space
ONE_BY_ONE = [QUESTIONS[0], QUESTIONS[5], NEWLINE_QUESTION]


def embedding_requests(proxy: RecordingProxy) -> list[Any]:
    return [r for r in proxy.recorder.take() if r.path.endswith("/embeddings")]


def sent_inputs(requests: list[Any]) -> list[tuple[str, str]]:
    """Every input sent, with the fields its request carried beside it (a multiset, sorted)."""
    items = []
    for r in requests:
        fields = json.dumps({k: v for k, v in r.body.items() if k != "input"}, sort_keys=True)
        inputs = r.body["input"] if isinstance(r.body["input"], list) else [r.body["input"]]
        if inputs and isinstance(inputs[0], int):  # one token-id list
            inputs = [inputs]
        items += [(fields, json.dumps(x)) for x in inputs]
    return sorted(items)


def kinds(graph: Any) -> set[Any]:
    return {node.kind for node in graph.nodes()}


# ---- LangChain: PGVector retrievers over OpenAIEmbeddings -----------------------------------


def _connection(pg_dsn: str) -> str:
    return pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture(scope="module")
def lc_collection(pg_dsn: str, lc_embeddings: Any, doc_texts: list[str]) -> str:
    from langchain_core.documents import Document
    from langchain_postgres import PGVector

    name = f"lc_srvr_{uuid.uuid4().hex[:8]}"
    store = PGVector(embeddings=lc_embeddings, collection_name=name, connection=_connection(pg_dsn), use_jsonb=True)
    store.add_documents([Document(page_content=t, metadata={"n": i}) for i, t in enumerate(doc_texts)])
    return name


def lc_retriever(pg_dsn: str, collection: str, embeddings: Any, *, asynchronous: bool = False, k: int = 3) -> Any:
    from langchain_postgres import PGVector

    store = PGVector(embeddings=embeddings, collection_name=collection, connection=_connection(pg_dsn), use_jsonb=True,
                     **({"async_mode": True} if asynchronous else {}))
    return store.as_retriever(search_kwargs={"k": k})


def lc_docs(docs: list[Any]) -> list[tuple[Any, ...]]:
    return [(d.id, d.page_content, d.metadata) for d in docs]


def test_langchain_retriever_over_server_embeddings_lowers_to_embed_and_search(
        pg_dsn: str, lc_collection: str, lc_embeddings: Any, llm_proxy: RecordingProxy) -> None:
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_openai import ChatOpenAI

    retriever = lc_retriever(pg_dsn, lc_collection, lc_embeddings)
    fast = accel.wrap(retriever)
    assert f"[lowered] VectorStoreRetriever: Embed (server {EMBED_SERVED_NAME}) + Search" in fast.explain(), fast.explain()
    assert {Kind.EMBED, Kind.SEARCH} <= kinds(fast.template.graph)
    model = ChatOpenAI(base_url=llm_proxy.url + "/v1", api_key="EMPTY", model=TINY, temperature=0, max_tokens=8)
    chain = ({"context": retriever | (lambda docs: "\n\n".join(d.page_content for d in docs)), "question": RunnablePassthrough()}
             | ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}\nAnswer:") | model | StrOutputParser())
    fast_chain = accel.wrap(chain)
    assert {Kind.EMBED, Kind.SEARCH} <= kinds(fast_chain.template.graph), fast_chain.explain()
    assert fast_chain.invoke(QUESTIONS[3]) == chain.invoke(QUESTIONS[3])


def test_langchain_invoke_sends_stocks_own_request(pg_dsn: str, lc_collection: str, lc_embeddings: Any,
                                                   embed_proxy: RecordingProxy) -> None:
    retriever = lc_retriever(pg_dsn, lc_collection, lc_embeddings)
    fast = accel.wrap(retriever)
    for question in ONE_BY_ONE:
        embedding_requests(embed_proxy)
        stock = retriever.invoke(question)
        stock_bodies = [r.body for r in embedding_requests(embed_proxy)]
        ours = fast.invoke(question)
        assert lc_docs(ours) == lc_docs(stock)
        assert [r.body for r in embedding_requests(embed_proxy)] == stock_bodies, question
    assert stock_bodies == [{"input": [NEWLINE_QUESTION], "model": EMBED_SERVED_NAME, "encoding_format": "base64"}]


def test_langchain_batch_sends_stocks_inputs_in_fewer_requests(pg_dsn: str, lc_collection: str, lc_embeddings: Any,
                                                               embed_proxy: RecordingProxy) -> None:
    retriever = lc_retriever(pg_dsn, lc_collection, lc_embeddings)
    embedding_requests(embed_proxy)
    stock = retriever.batch(QUESTIONS, config={"max_concurrency": CONCURRENT})
    stock_requests = embedding_requests(embed_proxy)
    ours = accel.wrap(retriever).batch(QUESTIONS, config={"max_concurrency": CONCURRENT})
    ours_requests = embedding_requests(embed_proxy)
    assert [lc_docs(d) for d in ours] == [lc_docs(d) for d in stock]
    assert sent_inputs(ours_requests) == sent_inputs(stock_requests)
    assert len(stock_requests) == len(QUESTIONS) and 1 <= len(ours_requests) < len(QUESTIONS)


async def test_langchain_ainvoke_and_abatch_send_stocks_inputs(pg_dsn: str, lc_collection: str, lc_embeddings: Any,
                                                               embed_proxy: RecordingProxy) -> None:
    retriever = lc_retriever(pg_dsn, lc_collection, lc_embeddings, asynchronous=True)
    fast = accel.wrap(retriever)
    embedding_requests(embed_proxy)
    stock_one = await retriever.ainvoke(NEWLINE_QUESTION)
    stock_one_bodies = [r.body for r in embedding_requests(embed_proxy)]
    ours_one = await fast.ainvoke(NEWLINE_QUESTION)
    assert lc_docs(ours_one) == lc_docs(stock_one)
    assert [r.body for r in embedding_requests(embed_proxy)] == stock_one_bodies
    stock = await retriever.abatch(QUESTIONS, config={"max_concurrency": CONCURRENT})
    stock_requests = embedding_requests(embed_proxy)
    ours = await fast.abatch(QUESTIONS, config={"max_concurrency": CONCURRENT})
    ours_requests = embedding_requests(embed_proxy)
    assert [lc_docs(d) for d in ours] == [lc_docs(d) for d in stock]
    assert sent_inputs(ours_requests) == sent_inputs(stock_requests)
    assert len(stock_requests) == len(QUESTIONS) and 1 <= len(ours_requests) <= len(QUESTIONS) // 4


def test_langchain_float_encoding_is_lowered_with_stocks_vectors(pg_dsn: str, lc_collection: str,
                                                                 embed_proxy: RecordingProxy) -> None:
    from langchain_openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(base_url=embed_proxy.url + "/v1", model=EMBED_SERVED_NAME, api_key="EMPTY",
                                  check_embedding_ctx_length=False, model_kwargs={"encoding_format": "float"})
    retriever = lc_retriever(pg_dsn, lc_collection, embeddings)
    fast = accel.wrap(retriever)
    assert "[lowered] VectorStoreRetriever" in fast.explain()
    embedding_requests(embed_proxy)
    stock = retriever.batch(QUESTIONS[:4])
    stock_requests = embedding_requests(embed_proxy)
    ours = fast.batch(QUESTIONS[:4])
    assert [lc_docs(d) for d in ours] == [lc_docs(d) for d in stock]
    assert sent_inputs(embedding_requests(embed_proxy)) == sent_inputs(stock_requests)
    assert {r.body["encoding_format"] for r in stock_requests} == {"float"}


def test_langchain_multi_query_over_server_embeddings_embeds_each_generated_query(
        pg_dsn: str, lc_collection: str, lc_embeddings: Any, llm_proxy: RecordingProxy, embed_proxy: RecordingProxy) -> None:
    from langchain_classic.retrievers.multi_query import MultiQueryRetriever
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(base_url=llm_proxy.url + "/v1", api_key="EMPTY", model=TINY, temperature=0, max_tokens=24)
    retriever = MultiQueryRetriever.from_llm(retriever=lc_retriever(pg_dsn, lc_collection, lc_embeddings, k=2), llm=model,
                                             include_original=True)
    fast = accel.wrap(retriever)
    assert f"generated queries -> Embed (server {EMBED_SERVED_NAME}) + Search" in fast.explain(), fast.explain()
    for question in QUESTIONS[:2]:
        embedding_requests(embed_proxy)
        stock = retriever.invoke(question)
        stock_requests = embedding_requests(embed_proxy)
        assert lc_docs(fast.invoke(question)) == lc_docs(stock)
        # identical generated lines of one query are embedded once (stock embeds each again)
        assert sorted(set(sent_inputs(embedding_requests(embed_proxy)))) == sorted(set(sent_inputs(stock_requests)))


@pytest.fixture()
def byte_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """tiktoken's encodings cannot be downloaded here (stock would fail); a byte-level encoding
    stands in, so the client tokenizes and sends token ids as it does with cl100k_base."""
    import tiktoken

    encoding = tiktoken.Encoding(name="bytes", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)},
                                 special_tokens={})
    monkeypatch.setattr(tiktoken, "encoding_for_model", lambda _name: encoding)


def test_langchain_tiktoken_client_stays_on_the_floor_and_stock_equal(
        byte_tokens: None, pg_dsn: str, lc_collection: str, embed_proxy: RecordingProxy) -> None:
    from langchain_openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(base_url=embed_proxy.url + "/v1", model=EMBED_SERVED_NAME, api_key="EMPTY",
                                  embedding_ctx_length=200)  # check_embedding_ctx_length=True: token ids
    retriever = lc_retriever(pg_dsn, lc_collection, embeddings)
    floor.install()
    why = "check_embedding_ctx_length=True: the client sends its own tiktoken token ids"
    before = lost_lowerings[("OpenAIEmbeddings", why)]
    fast = accel.wrap(retriever)
    assert "[opaque ]" in fast.explain() and why in fast.explain(), fast.explain()
    assert lost_lowerings[("OpenAIEmbeddings", why)] > before
    embedding_requests(embed_proxy)
    stock_one = retriever.invoke(NEWLINE_QUESTION)
    stock_bodies = [r.body for r in embedding_requests(embed_proxy)]
    assert lc_docs(fast.invoke(NEWLINE_QUESTION)) == lc_docs(stock_one)
    assert [r.body for r in embedding_requests(embed_proxy)] == stock_bodies
    assert isinstance(stock_bodies[0]["input"][0], list)  # token ids
    stock = retriever.batch(QUESTIONS[:8], config={"max_concurrency": 8})
    stock_requests = embedding_requests(embed_proxy)
    ours = fast.batch(QUESTIONS[:8], config={"max_concurrency": 8})
    assert [lc_docs(d) for d in ours] == [lc_docs(d) for d in stock]
    assert sent_inputs(embedding_requests(embed_proxy)) == sent_inputs(stock_requests)


def test_langchain_extra_body_fields_are_lowered_with_stocks_request(pg_dsn: str, lc_collection: str,
                                                                     embed_proxy: RecordingProxy) -> None:
    """vLLM's `truncate_prompt_tokens` (how a self-hosted app keeps long chunks within the
    embedder's 256 tokens) travels in `extra_body`, which the SDK merges into the body."""
    from langchain_openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(base_url=embed_proxy.url + "/v1", model=EMBED_SERVED_NAME, api_key="EMPTY",
                                  check_embedding_ctx_length=False,
                                  model_kwargs={"extra_body": {"truncate_prompt_tokens": 256}})
    retriever = lc_retriever(pg_dsn, lc_collection, embeddings)
    fast = accel.wrap(retriever)
    assert {Kind.EMBED, Kind.SEARCH} <= kinds(fast.template.graph), fast.explain()
    embedding_requests(embed_proxy)
    stock = retriever.invoke(QUESTIONS[1])
    stock_bodies = [r.body for r in embedding_requests(embed_proxy)]
    assert lc_docs(fast.invoke(QUESTIONS[1])) == lc_docs(stock)
    assert [r.body for r in embedding_requests(embed_proxy)] == stock_bodies
    assert stock_bodies[0]["truncate_prompt_tokens"] == 256


@pytest.mark.parametrize(("options", "why"), [
    ({"base_url": None}, "a hosted API (api.openai.com)"),
    ({"model_kwargs": {"encoding_format": "base64"}}, "encoding_format='base64' is handed back undecoded"),
    ({"model_kwargs": {"extra_body": {"truncate_prompt_tokens": {"max": 8}}}}, "an extra_body with nested values is not lowered"),
    ({"model_kwargs": {"extra_body": {"model": "another"}}}, "an extra_body that overrides a request field is not lowered"),
    ({"default_headers": {"X-Tenant": "docs"}}, "its client sends headers or query parameters of its own"),
])
def test_langchain_clients_a_lowered_embed_cannot_reproduce_stay_on_the_floor(
        options: dict[str, Any], why: str, pg_dsn: str, lc_collection: str, embed_proxy: RecordingProxy,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_openai import OpenAIEmbeddings

    for name in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_ORG_ID", "OPENAI_ORGANIZATION", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    settings = {"base_url": embed_proxy.url + "/v1", "model": EMBED_SERVED_NAME, "api_key": "EMPTY",
                "check_embedding_ctx_length": False, **options}
    fast = accel.wrap(lc_retriever(pg_dsn, lc_collection, OpenAIEmbeddings(**settings)))
    assert f"[opaque ] VectorStoreRetriever: embeddings OpenAIEmbeddings stay on the floor: {why}" in fast.explain(), \
        fast.explain()
    assert lost_lowerings[("OpenAIEmbeddings", why)] >= 1


# ---- LlamaIndex: VectorIndexRetriever over OpenAILikeEmbedding / OpenAIEmbedding ------------


@pytest.fixture(scope="module")
def li_index(pg_dsn: str, li_embed_model: Any, doc_texts: list[str]) -> Any:
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.postgres import PGVectorStore

    store = PGVectorStore.from_params(
        connection_string=pg_dsn.replace("postgresql://", "postgresql+psycopg2://", 1),
        async_connection_string=pg_dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
        table_name=f"li_srvr_{uuid.uuid4().hex[:8]}", embed_dim=384)
    nodes = [TextNode(id_=f"n{i}", text=t, metadata={"n": i}) for i, t in enumerate(doc_texts)]
    return VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=li_embed_model)


def li_models(embed_proxy: RecordingProxy, li_embed_model: Any) -> dict[str, Any]:
    from llama_index.embeddings.openai import OpenAIEmbedding

    named = OpenAIEmbedding(model_name=EMBED_SERVED_NAME, api_base=embed_proxy.url + "/v1", api_key="EMPTY")
    return {"OpenAILikeEmbedding": li_embed_model, "OpenAIEmbedding": named}


def li_nodes(nodes: list[Any]) -> list[tuple[Any, ...]]:
    return [(n.node.node_id, n.score, n.node.get_content(), n.node.metadata) for n in nodes]


def test_llamaindex_retrievers_over_server_embeddings_lower_to_embed_and_search(
        li_index: Any, li_embed_model: Any, embed_proxy: RecordingProxy) -> None:
    from accel.adapters.common.dropin import state_of

    for name, model in li_models(embed_proxy, li_embed_model).items():
        fast = accel.wrap(li_index.as_retriever(similarity_top_k=3, embed_model=model))
        assert f"{name} -> Embed" in fast.explain(), fast.explain()
        assert "PGVectorStore search (k=3) -> Search" in fast.explain()
        assert {Kind.EMBED, Kind.SEARCH} <= kinds(state_of(fast).helper.graph)


def test_llamaindex_retrieve_sends_stocks_own_request(li_index: Any, li_embed_model: Any,
                                                      embed_proxy: RecordingProxy) -> None:
    for model in li_models(embed_proxy, li_embed_model).values():
        retriever = li_index.as_retriever(similarity_top_k=3, embed_model=model)
        fast = accel.wrap(retriever)
        for question in ONE_BY_ONE:
            embedding_requests(embed_proxy)
            stock = retriever.retrieve(question)
            stock_bodies = [r.body for r in embedding_requests(embed_proxy)]
            assert li_nodes(fast.retrieve(question)) == li_nodes(stock)
            assert [r.body for r in embedding_requests(embed_proxy)] == stock_bodies, question
        assert stock_bodies == [{"input": [NEWLINE_QUESTION.replace("\n", " ")], "model": EMBED_SERVED_NAME,
                                 "encoding_format": "base64"}]


def test_llamaindex_threads_send_stocks_inputs_in_fewer_requests(li_index: Any, li_embed_model: Any,
                                                                 embed_proxy: RecordingProxy) -> None:
    retriever = li_index.as_retriever(similarity_top_k=3)
    embedding_requests(embed_proxy)
    with ThreadPoolExecutor(CONCURRENT) as pool:
        stock = list(pool.map(retriever.retrieve, QUESTIONS))
    stock_requests = embedding_requests(embed_proxy)
    fast = accel.wrap(retriever)
    with ThreadPoolExecutor(CONCURRENT) as pool:
        ours = list(pool.map(fast.retrieve, QUESTIONS))
    ours_requests = embedding_requests(embed_proxy)
    assert [li_nodes(n) for n in ours] == [li_nodes(n) for n in stock]
    assert sent_inputs(ours_requests) == sent_inputs(stock_requests)
    assert len(stock_requests) == len(QUESTIONS) and 1 <= len(ours_requests) < len(QUESTIONS)


async def test_llamaindex_aretrieve_concurrent_sends_stocks_inputs(li_index: Any, embed_proxy: RecordingProxy) -> None:
    retriever = li_index.as_retriever(similarity_top_k=3)
    fast = accel.wrap(retriever)
    embedding_requests(embed_proxy)
    stock_one = await retriever.aretrieve(NEWLINE_QUESTION)
    stock_one_bodies = [r.body for r in embedding_requests(embed_proxy)]
    assert li_nodes(await fast.aretrieve(NEWLINE_QUESTION)) == li_nodes(stock_one)
    assert [r.body for r in embedding_requests(embed_proxy)] == stock_one_bodies
    stock = await asyncio.gather(*(retriever.aretrieve(q) for q in QUESTIONS))
    stock_requests = embedding_requests(embed_proxy)
    ours = await asyncio.gather(*(fast.aretrieve(q) for q in QUESTIONS))
    ours_requests = embedding_requests(embed_proxy)
    assert [li_nodes(n) for n in ours] == [li_nodes(n) for n in stock]
    assert sent_inputs(ours_requests) == sent_inputs(stock_requests)
    assert len(stock_requests) == len(QUESTIONS) and 1 <= len(ours_requests) <= len(QUESTIONS) // 4


def test_llamaindex_query_engine_lowers_the_server_embedding(li_index: Any, llm_proxy: RecordingProxy,
                                                             embed_proxy: RecordingProxy) -> None:
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(model=TINY, api_base=llm_proxy.url + "/v1", api_key="EMPTY", max_tokens=8, temperature=0.0,
                     context_window=2048, is_chat_model=False)
    engine = li_index.as_query_engine(llm=llm, similarity_top_k=3)
    fast = accel.wrap(engine)
    assert "OpenAILikeEmbedding -> Embed" in fast.explain(), fast.explain()
    embedding_requests(embed_proxy)
    stock = str(engine.query(NEWLINE_QUESTION))
    stock_bodies = [r.body for r in embedding_requests(embed_proxy)]
    assert str(fast.query(NEWLINE_QUESTION)) == stock
    assert [r.body for r in embedding_requests(embed_proxy)] == stock_bodies


def test_llamaindex_fusion_over_server_embeddings_embeds_each_generated_query(
        li_index: Any, llm_proxy: RecordingProxy, embed_proxy: RecordingProxy) -> None:
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(model=TINY, api_base=llm_proxy.url + "/v1", api_key="EMPTY", max_tokens=32, temperature=0.0,
                     context_window=2048, is_chat_model=False)
    fusion = QueryFusionRetriever([li_index.as_retriever(similarity_top_k=3)], llm=llm, num_queries=3, similarity_top_k=3,
                                  use_async=False)
    fast = accel.wrap(fusion)
    assert "batched Embed/Search per sub-retriever" in fast.explain(), fast.explain()
    for question in QUESTIONS[:2]:
        embedding_requests(embed_proxy)
        stock = fusion.retrieve(question)
        stock_requests = embedding_requests(embed_proxy)
        assert li_nodes(fast.retrieve(question)) == li_nodes(stock)
        assert sent_inputs(embedding_requests(embed_proxy)) == sent_inputs(stock_requests)


def test_llamaindex_client_with_own_headers_stays_on_the_floor_and_stock_equal(
        li_index: Any, embed_proxy: RecordingProxy) -> None:
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding

    model = OpenAILikeEmbedding(model_name=EMBED_SERVED_NAME, api_base=embed_proxy.url + "/v1", api_key="EMPTY",
                                default_headers={"X-Tenant": "docs"})
    retriever = li_index.as_retriever(similarity_top_k=3, embed_model=model)
    floor.install()
    why = "its client sends headers or query parameters of its own"
    before = lost_lowerings[("OpenAILikeEmbedding", why)]
    fast = accel.wrap(retriever)
    assert "OpenAILikeEmbedding: stays on the floor" in fast.explain() and "-> Embed" not in fast.explain(), fast.explain()
    assert lost_lowerings[("OpenAILikeEmbedding", why)] > before
    embedding_requests(embed_proxy)
    with ThreadPoolExecutor(8) as pool:
        stock = list(pool.map(retriever.retrieve, QUESTIONS[:8]))
    stock_requests = embedding_requests(embed_proxy)
    with ThreadPoolExecutor(8) as pool:
        ours = list(pool.map(fast.retrieve, QUESTIONS[:8]))
    assert [li_nodes(n) for n in ours] == [li_nodes(n) for n in stock]
    assert sent_inputs(embedding_requests(embed_proxy)) == sent_inputs(stock_requests)



async def test_llamaindex_events_and_spans_are_stocks(li_index: Any, llm_proxy: RecordingProxy) -> None:
    """The lowered server Embed reports the embedding's spans and events where stock does."""
    import llama_index.core.instrumentation as instrument
    from llama_index.llms.openai_like import OpenAILike

    from .llamaindex.conftest import Recorder
    from .llamaindex.test_events_and_errors import event_tree, nests_like, payload

    llm = OpenAILike(model=TINY, api_base=llm_proxy.url + "/v1", api_key="EMPTY", max_tokens=8, temperature=0.0,
                     context_window=2048, is_chat_model=False)
    engine = li_index.as_query_engine(llm=llm, similarity_top_k=3)
    fast = accel.wrap(engine)
    fast.query(QUESTIONS[1])  # warm: templates built, engines started
    root, recorder = instrument.get_dispatcher(), Recorder()
    root.add_event_handler(recorder.handler)
    root.add_span_handler(recorder.spans)
    try:
        for entry in ("query", "aquery"):
            trees = []
            for app in (engine, fast):
                result = app.query(NEWLINE_QUESTION) if entry == "query" else await app.aquery(NEWLINE_QUESTION)
                assert result.response
                trees.append(event_tree(recorder.take_log()))
            stock, ours = trees
            assert [f.key for f in ours] == [f.key for f in stock], entry
            for mine, theirs in zip(ours, stock, strict=True):
                assert nests_like(mine.path, theirs.path), (entry, mine.path, theirs.path)
                assert payload(mine.event) == payload(theirs.event), entry
            assert "EmbeddingEndEvent" in {f.key[0] for f in ours}
    finally:
        root.event_handlers.remove(recorder.handler)
        root.span_handlers.remove(recorder.spans)
