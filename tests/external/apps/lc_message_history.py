"""LangChain how-to "How to add message history" (`RunnableWithMessageHistory`,
https://python.langchain.com/docs/how_to/message_history/):

    prompt = ChatPromptTemplate.from_messages([
        ("system", "You're an assistant who's good at {ability}. Respond in 20 words or fewer"),
        MessagesPlaceholder(variable_name="history"),
        ("human", "{input}"),
    ])
    runnable = prompt | model
    store = {}
    def get_session_history(session_id: str) -> BaseChatMessageHistory:
        if session_id not in store:
            store[session_id] = InMemoryChatMessageHistory()
        return store[session_id]
    with_message_history = RunnableWithMessageHistory(
        runnable, get_session_history, input_messages_key="input", history_messages_key="history")
    with_message_history.invoke({"ability": "math", "input": "What does cosine mean?"},
                                config={"configurable": {"session_id": "abc123"}})

Changes: `model` is `ChatOpenAI` on the test vLLM server.
"""

from __future__ import annotations

from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory


def build(model):
    prompt = ChatPromptTemplate.from_messages([
        ("system", "You're an assistant who's good at {ability}. Respond in 20 words or fewer"),
        MessagesPlaceholder(variable_name="history"),
        ("human", "{input}"),
    ])
    runnable = prompt | model
    store: dict[str, InMemoryChatMessageHistory] = {}

    def get_session_history(session_id: str) -> BaseChatMessageHistory:
        if session_id not in store:
            store[session_id] = InMemoryChatMessageHistory()
        return store[session_id]

    return RunnableWithMessageHistory(runnable, get_session_history, input_messages_key="input",
                                      history_messages_key="history")
