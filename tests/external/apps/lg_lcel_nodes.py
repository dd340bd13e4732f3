"""The RAG tutorial's graph (`lg_rag_part1`, with its "Query analysis" node) written with LCEL
runnables as nodes, which `StateGraph.add_node` accepts as well as functions ("a node can be any
Runnable", LangGraph's Graph API guide): `analyze_query` (prompt | llm | parser), `retrieve`
(the store's retriever) and `generate` (the hub RAG prompt | llm | parser), each ending in a
lambda that returns the state update, added with `add_sequence`.

Same offline substitutions as `lg_rag_part1` (PGVector, MiniLM, the test vLLM server).
"""

from __future__ import annotations

from operator import itemgetter
from typing import TypedDict

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda
from langgraph.graph import START, StateGraph

from .lc_rag_tutorial import format_docs, hub_rag_prompt


class State(TypedDict):
    question: str
    query: str
    context: list[Document]
    answer: str


def build(vector_store, llm):
    retriever = vector_store.as_retriever()
    prompt = hub_rag_prompt()
    analyze_query = (
        {"question": itemgetter("question")}
        | ChatPromptTemplate.from_template("Write a search query for this question: {question}")
        | llm | StrOutputParser() | RunnableLambda(lambda query: {"query": query})
    )
    retrieve = itemgetter("query") | retriever | RunnableLambda(lambda docs: {"context": docs})
    generate = (
        {"context": itemgetter("context") | RunnableLambda(format_docs), "question": itemgetter("question")}
        | prompt | llm | StrOutputParser() | RunnableLambda(lambda answer: {"answer": answer})
    )
    graph_builder = StateGraph(State).add_sequence([("analyze_query", analyze_query), ("retrieve", retrieve),
                                                    ("generate", generate)])
    graph_builder.add_edge(START, "analyze_query")
    return graph_builder.compile()
