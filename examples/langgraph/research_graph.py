"""A research-assistant graph in LangGraph: retrieval from the pydoc index runs beside a planner;
two experts (API reference, pitfalls) work from the plan side by side; a writer answers from
the retrieved context and both experts' notes. Four LLM calls per run, two of them in parallel,
plus an embedding and a vector search.

    python -m accel.examples.langgraph.research_graph "How do I push an item onto a heap?"
"""

from __future__ import annotations

import argparse
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from ..corpus import pydoc_documents
from ..langchain.models import build_index, chat_model
from ..stack import StackConfig, add_arguments, config_from_args

TOP_K = 3
PLANNER = "You are a planner. Break the question into steps for a researcher and two experts.\nQuestion: {question}\nPlan: "
REFERENCE = "You are an API reference expert.\nQuestion: {question}\nPlan: {plan}\nThe relevant API: "
PITFALLS = "You review Python code for common mistakes.\nQuestion: {question}\nPlan: {plan}\nMistakes to avoid: "
WRITER = (
    "Write the final answer from the research below.\nContext:\n{context}\n\nAPI notes: {reference}\n"
    "Pitfalls: {pitfalls}\nQuestion: {question}\nAnswer: "
)


class State(TypedDict, total=False):
    question: str
    plan: str
    context: str
    reference: str
    pitfalls: str
    answer: str


class Output(TypedDict):
    answer: str


def build_app(config: StackConfig, store: Any, *, parallel: bool = False) -> Any:
    """`app.invoke({"question": q}) -> {"answer": str}`. The branches already run side by
    side in LangGraph's own superstep, so `parallel` changes nothing."""
    llm = chat_model(config)

    def plan(state: State) -> State:
        return {"plan": llm.invoke(PLANNER.format(question=state["question"])).content}

    def retrieve(state: State) -> State:
        docs = store.similarity_search(state["question"], k=TOP_K)
        return {"context": "\n\n".join(doc.page_content for doc in docs)}

    def reference(state: State) -> State:
        return {"reference": llm.invoke(REFERENCE.format(question=state["question"], plan=state["plan"])).content}

    def pitfalls(state: State) -> State:
        return {"pitfalls": llm.invoke(PITFALLS.format(question=state["question"], plan=state["plan"])).content}

    def write(state: State) -> State:
        return {"answer": llm.invoke(WRITER.format(**state)).content}

    graph = StateGraph(State, output_schema=Output)
    for node in (plan, retrieve, reference, pitfalls, write):
        graph.add_node(node.__name__, node)
    graph.add_edge(START, "plan")
    graph.add_edge(START, "retrieve")
    graph.add_edge("plan", "reference")
    graph.add_edge("plan", "pitfalls")
    graph.add_edge(["retrieve", "reference", "pitfalls"], "write")
    graph.add_edge("write", END)
    return graph.compile()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="+")
    parser.add_argument("--modules", default="heapq,bisect,functools")
    add_arguments(parser)
    args = parser.parse_args()
    config = config_from_args(args)
    app = build_app(config, build_index(config, pydoc_documents(args.modules.split(",")), "example_research_graph"))
    for question, state in zip(args.questions, app.batch([{"question": q} for q in args.questions])):
        print(f"Q: {question}\nA: {state['answer']}\n")


if __name__ == "__main__":
    main()
