"""LangChain tutorial "Build a Retrieval Augmented Generation (RAG) App: Part 1" (the LangGraph
version, https://python.langchain.com/docs/tutorials/rag/):

    class State(TypedDict):
        question: str
        context: List[Document]
        answer: str

    def retrieve(state: State):
        retrieved_docs = vector_store.similarity_search(state["question"])
        return {"context": retrieved_docs}

    def generate(state: State):
        docs_content = "\\n\\n".join(doc.page_content for doc in state["context"])
        messages = prompt.invoke({"question": state["question"], "context": docs_content})
        response = llm.invoke(messages)
        return {"answer": response.content}

    graph_builder = StateGraph(State).add_sequence([retrieve, generate])
    graph_builder.add_edge(START, "retrieve")
    graph = graph_builder.compile()

and its "Query analysis" section: a node before retrieval has the LLM write the search query
(`analyze_query`), retrieval searches for it.

Changes from the documented code: the documents, the vector store (PGVector), embeddings and
the model are those of `lc_rag_tutorial` (local files, MiniLM, the test vLLM server);
`hub.pull("rlm/rag-prompt")` is rebuilt from its text; the query-analysis step asks for the
query as plain text instead of `with_structured_output(Search)`: on the random offline model
guided JSON decoding never closes the object within any max_tokens.
"""

from __future__ import annotations

from typing import TypedDict

from langchain_core.documents import Document
from langgraph.graph import START, StateGraph

from .lc_rag_tutorial import hub_rag_prompt


class State(TypedDict):
    question: str
    context: list[Document]
    answer: str


def build(vector_store, llm):
    prompt = hub_rag_prompt()

    def retrieve(state: State):
        retrieved_docs = vector_store.similarity_search(state["question"])
        return {"context": retrieved_docs}

    def generate(state: State):
        docs_content = "\n\n".join(doc.page_content for doc in state["context"])
        messages = prompt.invoke({"question": state["question"], "context": docs_content})
        response = llm.invoke(messages)
        return {"answer": response.content}

    graph_builder = StateGraph(State).add_sequence([retrieve, generate])
    graph_builder.add_edge(START, "retrieve")
    return graph_builder.compile()


class QueryState(TypedDict):
    question: str
    query: str
    context: list[Document]
    answer: str


def build_with_query_analysis(vector_store, llm):
    prompt = hub_rag_prompt()

    def analyze_query(state: QueryState):
        query = llm.invoke(f"Write a search query for this question: {state['question']}").content
        return {"query": query}

    def retrieve(state: QueryState):
        retrieved_docs = vector_store.similarity_search(state["query"] or state["question"], k=3)
        return {"context": retrieved_docs}

    def generate(state: QueryState):
        docs_content = "\n\n".join(doc.page_content for doc in state["context"])
        messages = prompt.invoke({"question": state["question"], "context": docs_content})
        response = llm.invoke(messages)
        return {"answer": response.content}

    graph_builder = StateGraph(QueryState).add_sequence([analyze_query, retrieve, generate])
    graph_builder.add_edge(START, "analyze_query")
    return graph_builder.compile()
