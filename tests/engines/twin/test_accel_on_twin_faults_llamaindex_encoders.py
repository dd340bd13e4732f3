"""Scripted twin faults under the apps accel wraps, beyond test_accel_on_twin_faults.py's LangChain
chain: a LlamaIndex query engine whose LLM twin dies mid-answer, and a LangChain RAG chain whose
embedding twin refuses connections or stalls past the client's timeout. Each fault is counted in
the twin's own events (tokens, requests), so the stock run and the wrapped run meet it at the same
point whatever the machine's load: the same exception types for the same queries, and the same
objects answer again once the twin serves."""

from __future__ import annotations

import asyncio

import httpx
import pytest

import accel
from accel.engines.offline.llm import build_llm
from accel.engines.twin.encoder_server import TwinEncoderServer
from accel.engines.twin.llm_server import TwinLLMServer
from accel.engines.twin.profile import load_profile

PROFILE = load_profile("h100-8b")
DOCS = ["heapq keeps a binary heap in a Python list; heappush and heappop keep its order.",
        "json.dumps turns Python objects into JSON text, json.loads reads it back.",
        "sorted returns a new list; list.sort sorts in place and is stable.",
        "The re module compiles regular expressions; re.search scans a string for a match."]
QUESTIONS = ["How does heapq keep its order?", "How do I read JSON text?", "Is list.sort stable?",
             "What does re.search do?"]


async def post_fault(base_url: str, **script) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        assert (await client.post("/admin/faults", json=script)).status_code == 200


def kind(result: object) -> str:
    return type(result).__module__ + "." + type(result).__name__ if isinstance(result, BaseException) else "answer"


@pytest.fixture
async def twins():
    """An LLM twin and an embedding twin, each on a port it can be restarted on."""
    llm = TwinLLMServer(PROFILE, build_llm("tiny"))
    embed = TwinEncoderServer(PROFILE, "embed")
    await llm.start()
    await embed.start()
    yield llm, embed
    await llm.close()
    await embed.close()


async def restart_llm(llm: TwinLLMServer) -> TwinLLMServer:
    port = llm.listener.port
    await llm.close()
    fresh = TwinLLMServer(PROFILE, build_llm("tiny"))
    await fresh.start(port=port)
    return fresh


def llamaindex_engine(llm: TwinLLMServer, embed: TwinEncoderServer, max_tokens: int):
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding
    from llama_index.llms.openai_like import OpenAILike

    embed_model = OpenAILikeEmbedding(model_name=embed.model, api_base=embed.listener.base_url + "/v1",
                                      api_key="EMPTY", max_retries=0)
    chat = OpenAILike(model="tiny", api_base=llm.listener.base_url + "/v1", api_key="EMPTY", is_chat_model=True,
                      temperature=0.0, max_tokens=max_tokens, context_window=1600, max_retries=0,
                      additional_kwargs={"extra_body": {"ignore_eos": True}})
    index = VectorStoreIndex.from_documents([Document(text=d) for d in DOCS], embed_model=embed_model)
    return index.as_query_engine(llm=chat, similarity_top_k=2)


async def answers(engine, questions: list[str]) -> list[object]:
    """Every question at once, as an async app gathers them; each answer's text or its exception."""
    results = await asyncio.wait_for(asyncio.gather(*(engine.aquery(q) for q in questions), return_exceptions=True), 120)
    return [r if isinstance(r, BaseException) else str(r) for r in results]


async def test_a_llamaindex_query_engine_whose_llm_twin_dies_fails_like_stock_and_recovers(twins) -> None:
    llm, embed = twins
    # built in a thread: indexing calls the embedding twin synchronously, and the twins serve on this loop
    short = await asyncio.to_thread(llamaindex_engine, llm, embed, 8)
    long = await asyncio.to_thread(llamaindex_engine, llm, embed, 400)
    expected = await answers(short, QUESTIONS)
    assert all(isinstance(a, str) for a in expected)
    assert await answers(accel.wrap(short), QUESTIONS) == expected

    outcomes = {}
    for name, engine in (("stock", long), ("accel", accel.wrap(long))):
        await post_fault(llm.listener.base_url, die_after_tokens=40)  # every 400-token answer is cut
        outcomes[name] = [kind(r) for r in await answers(engine, QUESTIONS)]
        assert llm.engine.dead
        outcomes[name + " down"] = [kind(r) for r in await answers(engine, QUESTIONS[:1])]
        llm = await restart_llm(llm)
    assert outcomes["accel"] == outcomes["stock"], outcomes
    assert outcomes["accel down"] == outcomes["stock down"], outcomes
    assert set(outcomes["stock"]) == {"openai.APIConnectionError"}, outcomes
    fast = accel.wrap(short)  # the engine objects built before the fault, on the restarted port
    assert await answers(fast, QUESTIONS) == expected == await answers(short, QUESTIONS)
    await llm.close()


def langchain_rag(llm: TwinLLMServer, embed: TwinEncoderServer, timeout: float | None = None):
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(model=embed.model, base_url=embed.listener.base_url + "/v1", api_key="EMPTY",
                                  check_embedding_ctx_length=False, max_retries=0, timeout=timeout)
    store = InMemoryVectorStore.from_texts(DOCS, embeddings)
    chat = ChatOpenAI(base_url=llm.listener.base_url + "/v1", api_key="EMPTY", model="tiny", max_tokens=8,
                      max_retries=0)
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    retriever = store.as_retriever(search_kwargs={"k": 2}) | (lambda docs: "\n".join(d.page_content for d in docs))
    return {"context": retriever, "question": RunnablePassthrough()} | prompt | chat | StrOutputParser()


async def test_an_embedding_twin_that_refuses_fails_the_rag_chain_like_stock_and_accepting_recovers(twins) -> None:
    llm, embed = twins
    chain = await asyncio.to_thread(langchain_rag, llm, embed)
    fast = accel.wrap(chain)
    expected = await asyncio.to_thread(chain.batch, QUESTIONS)
    assert await asyncio.to_thread(fast.batch, QUESTIONS) == expected

    await post_fault(embed.listener.base_url, refuse=True)
    embed.listener.reset_connections()
    stock = await asyncio.to_thread(chain.batch, QUESTIONS, return_exceptions=True)
    wrapped = await asyncio.wait_for(asyncio.to_thread(fast.batch, QUESTIONS, return_exceptions=True), 60)
    assert [kind(r) for r in wrapped] == [kind(r) for r in stock]
    assert {kind(r) for r in stock} == {"openai.APIConnectionError"}, stock
    await embed.listener.accept()
    assert await asyncio.to_thread(fast.batch, QUESTIONS) == expected


async def test_an_embedding_twin_stalled_past_the_clients_timeout_times_out_like_stock(twins) -> None:
    """A 5 s stall against a client timeout of 1 s, where a call takes milliseconds: far apart, so
    the outcome does not depend on the machine's speed."""
    llm, embed = twins
    chain = await asyncio.to_thread(langchain_rag, llm, embed, 1.0)
    fast = accel.wrap(chain)
    expected = await asyncio.to_thread(chain.invoke, QUESTIONS[0])
    assert await asyncio.to_thread(fast.invoke, QUESTIONS[0]) == expected

    outcomes = {}
    for name, app in (("stock", chain), ("accel", fast)):
        await post_fault(embed.listener.base_url, stall_s=5)
        result = await asyncio.wait_for(asyncio.to_thread(app.batch, QUESTIONS[:1], return_exceptions=True), 60)
        outcomes[name] = [kind(r) for r in result]
        await post_fault_clear(embed.listener.base_url)
    assert outcomes["accel"] == outcomes["stock"] == ["openai.APITimeoutError"], outcomes
    await embed.device.drain()  # the stalled calls still hold the device, as a stuck GPU would
    assert await asyncio.to_thread(fast.invoke, QUESTIONS[0]) == expected


async def post_fault_clear(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        assert (await client.delete("/admin/faults")).status_code == 200
