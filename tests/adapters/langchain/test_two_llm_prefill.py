"""Pass 3 looks each node's own LLM engine up (issue 28): a chain that drafts with one model and
answers with another gets the static head of both prompts prefilled early, each warm-up on its
own engine. Before, the adapter handed the passes one tokenizer only when the chain had exactly
one LLM engine, so neither prompt was split here.

The two models are two LLM engines (two base URLs, a recording proxy each) in front of the one
real vLLM server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

import accel
from accel.ir import Kind, Role
from accel.testing.proxy import RecordingProxy

from .conftest import TINY

pytestmark = [pytest.mark.engines, pytest.mark.slow]


def instructions(what: str) -> str:
    """A few KV blocks of static text; unique, so no earlier request cached it."""
    words = f"{what} from the text below only and name the module you used when you can".split()
    return f"{uuid.uuid4().hex} " + " ".join(words[i % len(words)] for i in range(300))


@pytest.fixture
def proxies(vllm_server: Any) -> Iterator[tuple[RecordingProxy, RecordingProxy]]:
    upstream = vllm_server.base_url.removesuffix("/v1")
    with RecordingProxy(upstream) as a, RecordingProxy(upstream) as b:
        yield a, b


def chat(proxy: RecordingProxy) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=proxy.url + "/v1", api_key="EMPTY", model=TINY, temperature=0, max_tokens=8)


def warmups(proxy: RecordingProxy) -> list[dict[str, Any]]:
    """The bodies of the one-token prefix warm-ups this proxy relayed (sent as token ids)."""
    return [r.body for r in proxy.recorder.take()
            if r.body is not None and r.body.get("max_tokens") == 1 and isinstance(r.body.get("prompt"), list)]


def test_both_models_get_their_prompt_heads_prefilled(vectorstore: Any, proxies: tuple[RecordingProxy, RecordingProxy]) -> None:
    a, b = proxies
    retriever = vectorstore.as_retriever(search_kwargs={"k": 2}) | (lambda docs: "\n\n".join(d.page_content for d in docs))
    draft = ChatPromptTemplate.from_messages([("system", instructions("draft an answer") + "\n\nContext:\n{context}"),
                                             ("human", "{question}")])
    review = ChatPromptTemplate.from_messages([("human", instructions("improve the draft") + "\n\nDraft:\n{draft}")])
    chain = ({"context": retriever, "question": RunnablePassthrough()} | draft | chat(a) | StrOutputParser()
             | (lambda text: {"draft": text}) | review | chat(b) | StrOutputParser())

    fast = accel.wrap(chain)
    graph = fast.template.graph
    decodes = {n.name: n.engine for n in graph.nodes() if n.kind is Kind.DECODE}
    assert len(set(decodes.values())) == 2  # one engine per model
    warmed = {w.engine for n in graph.nodes() if n.kind in (Kind.PREFILL, Kind.FULL_PREFILL)
              for w in graph.derived(n.name, Role.WARM_UP)}
    assert warmed == set(decodes.values())  # each prompt split, warmed on its own model's engine

    a.recorder.take(), b.recorder.take()
    question = "How do I decode JSON?"
    assert fast.invoke(question) == chain.invoke(question)
    assert warmups(a) and warmups(b)  # each engine sent its own warm-up(s) (prefill_split, share_prefixes)
