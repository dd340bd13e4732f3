"""The apps of the overhead benchmark (`benchmarks/overhead.py`): LCEL chains and LangGraph
graphs with no engine work, in the shapes the frameworks' docs and tests build them. Each is
a factory (a fresh app, as a test or a request handler builds it) and the input of one call.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict


@dataclass(frozen=True)
class App:
    name: str
    family: str  # "lcel" or "langgraph"
    build: Callable[[], Any]
    input: Any


def _fake_model_chains() -> list[App]:
    """Fake-model chains as langchain-core's runnables tests build them."""
    from langchain_core.language_models.fake import FakeListLLM
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

    def chat() -> Any:
        return FakeListChatModel(responses=["foo, bar"] * 10)

    def prompt_chat_parser() -> Any:
        prompt = ChatPromptTemplate.from_messages([("system", "You are a nice assistant."), ("human", "{question}")])
        return prompt | chat() | StrOutputParser()

    def lambda_prompt_llm() -> Any:
        return (RunnableLambda(lambda q: {"question": q}) | PromptTemplate.from_template("Q: {question}")
                | FakeListLLM(responses=["baz"] * 10))

    def parallel_prompt_chat() -> Any:
        return (RunnableParallel(question=RunnablePassthrough(), upper=RunnableLambda(str.upper))
                | ChatPromptTemplate.from_template("{question} {upper}") | chat() | StrOutputParser())

    return [App("prompt|chat|parser", "lcel", prompt_chat_parser, "hi"),
            App("lambda|prompt|llm", "lcel", lambda_prompt_llm, "hi"),
            App("parallel|prompt|chat", "lcel", parallel_prompt_chat, "hi")]


def _lambda_chains() -> list[App]:
    """Plain-Python LCEL, as the `RunnableSequence` / `RunnableParallel` /
    `RunnablePassthrough.assign` docstrings compose it."""
    from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

    def sequence() -> Any:
        return RunnableLambda(lambda x: x + 1) | RunnableLambda(lambda x: x * 2) | RunnableLambda(str)

    def parallel() -> Any:
        return RunnableLambda(lambda x: x + 1) | {"mul_2": RunnableLambda(lambda x: x * 2),
                                                  "mul_5": RunnableLambda(lambda x: x * 5)}

    def assign() -> Any:
        def context(inputs: dict[str, Any]) -> str:
            return " ".join(sorted(inputs["question"].split()))

        return (RunnableParallel(question=RunnablePassthrough())
                | RunnablePassthrough.assign(context=context, length=lambda x: len(x["question"]))
                | RunnableLambda(lambda x: f"{x['context']} ({x['length']})"))

    return [App("lambda sequence", "lcel", sequence, 1),
            App("lambda|parallel", "lcel", parallel, 1),
            App("parallel|assign|lambda", "lcel", assign, "what does the tutorial index")]


class _RouterState(TypedDict):
    question: str
    steps: Annotated[list[str], operator.add]
    answer: str


class _LoopState(TypedDict):
    messages: Annotated[list[str], operator.add]
    turns: int


def _graphs() -> list[App]:
    """StateGraphs of plain-Python nodes: a router (a conditional edge picks a branch) and an
    agent-like loop (a conditional edge sends the graph back until it is done)."""
    from langgraph.graph import END, START, StateGraph

    def router() -> Any:
        graph = StateGraph(_RouterState)
        graph.add_node("classify", lambda s: {"steps": ["classify"]})
        graph.add_node("short", lambda s: {"steps": ["short"], "answer": s["question"].upper()})
        graph.add_node("long", lambda s: {"steps": ["long"], "answer": s["question"][:20]})
        graph.add_node("finish", lambda s: {"steps": ["finish"]})
        graph.add_edge(START, "classify")
        graph.add_conditional_edges("classify", lambda s: "short" if len(s["question"]) < 20 else "long",
                                    {"short": "short", "long": "long"})
        graph.add_edge("short", "finish")
        graph.add_edge("long", "finish")
        graph.add_edge("finish", END)
        return graph.compile()

    def loop() -> Any:
        graph = StateGraph(_LoopState)
        graph.add_node("agent", lambda s: {"messages": [f"think {s['turns']}"], "turns": s["turns"] + 1})
        graph.add_node("tool", lambda s: {"messages": [f"tool {len(s['messages'])}"]})
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", lambda s: END if s["turns"] >= 3 else "tool")
        graph.add_edge("tool", "agent")
        return graph.compile()

    return [App("router graph", "langgraph", router, {"question": "what is x", "steps": []}),
            App("agent loop graph", "langgraph", loop, {"messages": ["hi"], "turns": 0})]


def apps() -> list[App]:
    return [*_lambda_chains(), *_fake_model_chains(), *_graphs()]
