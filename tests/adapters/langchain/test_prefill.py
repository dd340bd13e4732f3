"""Pass 3 on a wrapped LCEL RAG chain and the real vLLM server: the static head of the chat
prompt (long instructions, before the retrieved context) is prefilled while retrieval runs,
cut at the running server's own KV block size (128 on vLLM-CPU; templates are built before the
server reports it), so the answer request finds it in the prefix cache."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

import accel
from accel.adapters.common.dropin import state_of
from accel.ir import Kind, warmed_ids

pytestmark = [pytest.mark.engines, pytest.mark.slow]


def long_instructions() -> str:
    """Several KV blocks of instructions; unique, so no earlier request cached them."""
    words = "answer from the context only and cite the module name you used when you can".split()
    return f"{uuid.uuid4().hex} " + " ".join(words[i % len(words)] for i in range(420))


def llm_engine(fast: Any) -> Any:
    return state_of(fast).session.get_engine(next(n.engine for n in fast.template.graph.nodes() if n.kind is Kind.DECODE))


def calls(fast: Any, question: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    engine = llm_engine(fast)
    seen: list[tuple[Any, Any]] = []
    run = engine.run

    async def recording(batch: Any) -> Any:
        results = await run(batch)
        seen.extend(zip(batch, results, strict=True))
        return results

    monkeypatch.setattr(engine, "run", recording)
    fast.invoke(question)
    monkeypatch.undo()
    return seen


def rag(vectorstore: Any, chat_model: Any) -> Any:
    prompt = ChatPromptTemplate.from_messages([("system", long_instructions() + "\n\nContext:\n{context}"), ("human", "{question}")])
    docs = vectorstore.as_retriever(search_kwargs={"k": 2}) | (lambda d: "\n\n".join(x.page_content for x in d))
    return {"context": docs, "question": RunnablePassthrough()} | prompt | chat_model | StrOutputParser()


def test_static_head_is_prefilled_at_the_servers_block_size(vectorstore: Any, chat_model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = rag(vectorstore, chat_model)
    fast = accel.wrap(chain)
    assert "prefilled early" in fast.explain()
    seen = calls(fast, "How do I decode JSON?", monkeypatch)
    # prefill_split's warm-up of this query's ready prefix (share_prefixes adds the static
    # head's own, `#head`, before it)
    warmups = [(r, g) for r, g in seen if r.prompt_token_ids is not None and "#warm/" in (r.request_id or "")]
    answers = [(r, g) for r, g in seen if r.prompt_token_ids is None]
    block = llm_engine(fast).block_size
    assert block == 128  # vLLM-CPU's prefix-cache block, read from the running server
    assert len(warmups) == 1 and len(answers) == 1, state_of(fast).session.warmup_lines()  # why none went, if none
    warmed = len(warmed_ids(warmups[0][0]))
    assert warmed >= 2 * block and warmed % block == 0
    assert answers[0][1].cached_tokens >= warmed  # the answer found the warmed head in the cache
    assert fast.invoke("How do I decode JSON?") == chain.invoke("How do I decode JSON?")
