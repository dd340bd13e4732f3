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

    @tool(response_format="content_and_artifact")
    def retrieve(query: str):
        retrieved_docs = vector_store.similarity_search(query, k=2)
        ...
        return serialized, retrieved_docs

    tools = ToolNode([retrieve])

Changes: the tutorial's query step is a tool call (`llm.bind_tools([retrieve])`); the local
vLLM server runs without a tool-call parser, so `query_or_respond` asks for the query as text
and writes the tool call a model would (`retrieve` with that query; no call and its answer as
is when it wrote nothing). `retrieve` (a sync `@tool`), `ToolNode`, `tools_condition`, the
generate node and its prompt are as written. Documents, store, embeddings and model as in
`lc_rag_tutorial`.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


def build(vector_store, llm):
    @tool(response_format="content_and_artifact")
    def retrieve(query: str):
        """Retrieve information related to a query."""
        retrieved_docs = vector_store.similarity_search(query, k=2)
        serialized = "\n\n".join(f"Source: {doc.metadata}\nContent: {doc.page_content}" for doc in retrieved_docs)
        return serialized, retrieved_docs

    def query_or_respond(state: MessagesState):
        """Generate tool call for retrieval or respond."""
        conversation = "\n".join(f"{m.type}: {m.content}" for m in state["messages"] if m.type in ("human", "ai"))
        response = llm.invoke(f"Write one search query for the last question of this conversation.\n{conversation}")
        query = response.content.strip()
        if not query:
            return {"messages": [response]}
        turn = sum(m.type == "human" for m in state["messages"])
        call = {"name": "retrieve", "args": {"query": query}, "id": f"retrieve_{turn}", "type": "tool_call"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    tools = ToolNode([retrieve])

    def generate(state: MessagesState):
        """Generate answer."""
        # Get generated ToolMessages
        recent_tool_messages = []
        for message in reversed(state["messages"]):
            if message.type == "tool":
                recent_tool_messages.append(message)
            else:
                break
        tool_messages = recent_tool_messages[::-1]

        # Format into prompt
        docs_content = "\n\n".join(doc.content for doc in tool_messages)
        system_message_content = (
            "You are an assistant for question-answering tasks. "
            "Use the following pieces of retrieved context to answer "
            "the question. If you don't know the answer, say that you "
            "don't know. Use three sentences maximum and keep the "
            "answer concise."
            "\n\n"
            f"{docs_content}"
        )
        conversation_messages = [
            message
            for message in state["messages"]
            if message.type in ("human", "system")
            or (message.type == "ai" and not message.tool_calls)
        ]
        prompt = [SystemMessage(system_message_content)] + conversation_messages

        # Run
        response = llm.invoke(prompt)
        return {"messages": [response]}

    graph_builder = StateGraph(MessagesState)
    graph_builder.add_node(query_or_respond)
    graph_builder.add_node(tools)
    graph_builder.add_node(generate)
    graph_builder.set_entry_point("query_or_respond")
    graph_builder.add_conditional_edges("query_or_respond", tools_condition, {END: END, "tools": "tools"})
    graph_builder.add_edge("tools", "generate")
    graph_builder.add_edge("generate", END)
    memory = MemorySaver()
    return graph_builder.compile(checkpointer=memory)
