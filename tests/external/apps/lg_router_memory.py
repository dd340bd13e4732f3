"""LangGraph quickstart patterns: a chatbot with memory (`add_messages` state, `MemorySaver`,
`thread_id`, https://langchain-ai.github.io/langgraph/tutorials/get-started/3-add-memory/),
conditional edges routing to a specialised node (the branching how-to,
https://langchain-ai.github.io/langgraph/how-tos/graph-api/#create-branches), and a human
review step with `interrupt` resumed by `Command(resume=...)`
(https://langchain-ai.github.io/langgraph/tutorials/get-started/4-human-in-the-loop/).

    class State(TypedDict):
        messages: Annotated[list, add_messages]

    graph_builder.add_conditional_edges("route", pick, {"docs": "docs_bot", "chat": "chatbot"})
    memory = MemorySaver()
    graph = graph_builder.compile(checkpointer=memory)
    graph.invoke({"messages": [{"role": "user", "content": "..."}]}, {"configurable": {"thread_id": "1"}})

Changes: the chat model is `ChatOpenAI` on the test vLLM server; the router decides by a
keyword of the last user message (the tutorials' LLM-with-tools routing needs a tool parser).
"""

from __future__ import annotations

from typing import Annotated, TypedDict

from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt


class State(TypedDict):
    messages: Annotated[list, add_messages]


def build(llm, vector_store, *, review: bool = False):
    def route(state: State):
        return {}

    def pick(state: State):
        return "docs" if "python" in state["messages"][-1].content.lower() else "chat"

    def chatbot(state: State):
        return {"messages": [llm.invoke(state["messages"])]}

    def docs_bot(state: State):
        question = state["messages"][-1].content
        docs = vector_store.similarity_search(question, k=2)
        context = "\n\n".join(d.page_content for d in docs)
        system = {"role": "system", "content": f"Answer from these docs:\n{context}"}
        return {"messages": [llm.invoke([system, *state["messages"]])]}

    def human_review(state: State):
        decision = interrupt({"draft": state["messages"][-1].content})
        return {"messages": [{"role": "user", "content": f"Reviewer says: {decision}"}]}

    graph_builder = StateGraph(State)
    graph_builder.add_node("route", route)
    graph_builder.add_node("chatbot", chatbot)
    graph_builder.add_node("docs_bot", docs_bot)
    graph_builder.add_edge(START, "route")
    graph_builder.add_conditional_edges("route", pick, {"docs": "docs_bot", "chat": "chatbot"})
    if review:
        graph_builder.add_node("human_review", human_review)
        graph_builder.add_node("final", chatbot)
        graph_builder.add_edge("chatbot", "human_review")
        graph_builder.add_edge("docs_bot", "human_review")
        graph_builder.add_edge("human_review", "final")
        graph_builder.add_edge("final", END)
    else:
        graph_builder.add_edge("chatbot", END)
        graph_builder.add_edge("docs_bot", END)
    memory = MemorySaver()
    return graph_builder.compile(checkpointer=memory)
