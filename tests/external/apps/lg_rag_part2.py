"""LangChain tutorial "Build a Retrieval Augmented Generation (RAG) App: Part 2" (conversational
RAG with LangGraph, https://python.langchain.com/docs/tutorials/qa_chat_history/): the state is
`MessagesState`; a first node turns the conversation into a search query (query analysis), a
retrieval step searches for it, a last node answers from the retrieved context and the
conversation; `MemorySaver` keeps each `thread_id`'s conversation across turns:

    graph_builder = StateGraph(MessagesState)
    graph_builder.add_node(query_or_respond)
    graph_builder.add_node(tools)
    graph_builder.add_node(generate)
    graph_builder.set_entry_point("query_or_respond")
    graph_builder.add_conditional_edges("query_or_respond", tools_condition, {END: END, "tools": "tools"})
    graph_builder.add_edge("tools", "generate")
    graph_builder.add_edge("generate", END)
    memory = MemorySaver()
    graph = graph_builder.compile(checkpointer=memory)
    config = {"configurable": {"thread_id": "abc123"}}

Changes: the tutorial's query step is a tool call (`llm.bind_tools([retrieve])` + `ToolNode`);
the local vLLM server runs without a tool-call parser, so `query_or_respond` asks for the query
as text and always retrieves (the conditional edge routes on whether it wrote one), and
`tools` is a plain node calling the same `retrieve` function. The generate node and its
prompt are as written. Documents, store, embeddings and model as in `lc_rag_tutorial`.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, SystemMessage
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, MessagesState, StateGraph


def build(vector_store, llm):
    def retrieve(query: str):
        """Retrieve information related to a query."""
        retrieved_docs = vector_store.similarity_search(query, k=2)
        serialized = "\n\n".join(f"Source: {doc.metadata}\nContent: {doc.page_content}" for doc in retrieved_docs)
        return serialized, retrieved_docs

    def query_or_respond(state: MessagesState):
        """Generate a search query for the conversation so far."""
        conversation = "\n".join(f"{m.type}: {m.content}" for m in state["messages"])
        response = llm.invoke(f"Write one search query for the last question of this conversation.\n{conversation}")
        return {"messages": [AIMessage(content=response.content, name="query")]}

    def route(state: MessagesState):
        return "tools" if state["messages"][-1].content.strip() else END

    def tools(state: MessagesState):
        serialized, _ = retrieve(state["messages"][-1].content)
        return {"messages": [AIMessage(content=serialized, name="retrieve")]}

    def generate(state: MessagesState):
        """Generate answer."""
        docs_content = state["messages"][-1].content
        system_message_content = (
            "You are an assistant for question-answering tasks. "
            "Use the following pieces of retrieved context to answer "
            "the question. If you don't know the answer, say that you "
            "don't know. Use three sentences maximum and keep the "
            "answer concise."
            "\n\n"
            f"{docs_content}"
        )
        conversation_messages = [m for m in state["messages"] if m.type in ("human", "system")
                                 or (m.type == "ai" and m.name not in ("query", "retrieve"))]
        prompt = [SystemMessage(system_message_content)] + conversation_messages
        response = llm.invoke(prompt)
        return {"messages": [response]}

    graph_builder = StateGraph(MessagesState)
    graph_builder.add_node(query_or_respond)
    graph_builder.add_node(tools)
    graph_builder.add_node(generate)
    graph_builder.set_entry_point("query_or_respond")
    graph_builder.add_conditional_edges("query_or_respond", route, {END: END, "tools": "tools"})
    graph_builder.add_edge("tools", "generate")
    graph_builder.add_edge("generate", END)
    memory = MemorySaver()
    return graph_builder.compile(checkpointer=memory)
