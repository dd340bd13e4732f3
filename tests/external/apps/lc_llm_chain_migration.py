"""LangChain migration guide "Migrating from LLMChain"
(https://python.langchain.com/docs/versions/migrating_chains/llm_chain/, source
langchain-ai/langchain docs/docs/versions/migrating_chains/llm_chain.ipynb):

    prompt = ChatPromptTemplate.from_messages([("user", "Tell me a {adjective} joke")])
    chain = LLMChain(llm=ChatOpenAI(), prompt=prompt)            # Legacy
    chain({"adjective": "funny"})

    chain = prompt | ChatOpenAI() | StrOutputParser()             # LCEL
    chain.invoke({"adjective": "funny"})
    outer_chain = RunnablePassthrough().assign(text=chain)
    outer_chain.invoke({"adjective": "funny"})

Changes from the documented code:
- `ChatOpenAI()` -> `ChatOpenAI` on the test vLLM server (`base_url`, `api_key="EMPTY"`, the
  served model) with `temperature=0` and a small `max_tokens`;
- `from langchain.chains import LLMChain` -> `langchain_classic.chains` (LangChain 1.0);
  `chain({...})` (the legacy `__call__`) -> `chain.invoke({...})`.
"""

from __future__ import annotations

from langchain_classic.chains import LLMChain
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_openai import ChatOpenAI


def _chat(base_url: str, model: str) -> ChatOpenAI:
    return ChatOpenAI(model=model, base_url=base_url, api_key="EMPTY", temperature=0, max_tokens=16)


def _prompt() -> ChatPromptTemplate:
    return ChatPromptTemplate.from_messages(
        [("user", "Tell me a {adjective} joke")],
    )


def legacy(base_url: str, model: str):
    prompt = _prompt()

    chain = LLMChain(llm=_chat(base_url, model), prompt=prompt)
    return chain


def lcel(base_url: str, model: str):
    prompt = _prompt()

    chain = prompt | _chat(base_url, model) | StrOutputParser()
    return chain


def lcel_outer(base_url: str, model: str):
    chain = lcel(base_url, model)

    outer_chain = RunnablePassthrough().assign(text=chain)
    return outer_chain
