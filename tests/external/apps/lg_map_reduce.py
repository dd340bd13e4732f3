"""LangGraph how-to "How to create map-reduce branches for parallel execution"
(https://langchain-ai.github.io/langgraph/how-tos/map-reduce/):

    class OverallState(TypedDict):
        topic: str
        subjects: list
        jokes: Annotated[list, operator.add]
        best_selected_joke: str

    def continue_to_jokes(state: OverallState):
        return [Send("generate_joke", {"subject": s}) for s in state["subjects"]]

    graph = StateGraph(OverallState)
    graph.add_node("generate_topics", generate_topics)
    graph.add_node("generate_joke", generate_joke)
    graph.add_node("best_joke", best_joke)
    graph.add_edge(START, "generate_topics")
    graph.add_conditional_edges("generate_topics", continue_to_jokes, ["generate_joke"])
    graph.add_edge("generate_joke", "best_joke")
    graph.add_edge("best_joke", END)
    app = graph.compile()

Changes: the how-to's nodes call `model.with_structured_output(Subjects / Joke / BestJoke)`;
on the random offline model guided JSON never closes, so they ask for plain text and parse it
(comma-separated subjects, the first integer for the best joke's id). Prompts as written.
"""

from __future__ import annotations

import operator
import re
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

subjects_prompt = """Generate a list of 3 sub-topics that are all related to this overall topic: {topic}."""
joke_prompt = """Generate a joke about {subject}"""
best_joke_prompt = """Below are a bunch of jokes about {topic}. Select the best one! Return the ID of the best one, starting 0 as the ID for the first joke. Jokes: \n\n  {jokes}"""


class OverallState(TypedDict):
    topic: str
    subjects: list
    jokes: Annotated[list, operator.add]
    best_selected_joke: str


class JokeState(TypedDict):
    subject: str


def build(model):
    def generate_topics(state: OverallState):
        text = model.invoke(subjects_prompt.format(topic=state["topic"])).content
        subjects = [s.strip() for s in text.split(",") if s.strip()][:3]
        subjects += [f"{state['topic']} {i}" for i in range(len(subjects), 3)]
        return {"subjects": subjects}

    def generate_joke(state: JokeState):
        response = model.invoke(joke_prompt.format(subject=state["subject"]))
        return {"jokes": [response.content]}

    def continue_to_jokes(state: OverallState):
        return [Send("generate_joke", {"subject": s}) for s in state["subjects"]]

    def best_joke(state: OverallState):
        jokes = "\n\n".join(state["jokes"])
        text = model.invoke(best_joke_prompt.format(topic=state["topic"], jokes=jokes)).content
        found = re.search(r"\d+", text)
        index = int(found.group()) % len(state["jokes"]) if found else 0
        return {"best_selected_joke": state["jokes"][index]}

    graph = StateGraph(OverallState)
    graph.add_node("generate_topics", generate_topics)
    graph.add_node("generate_joke", generate_joke)
    graph.add_node("best_joke", best_joke)
    graph.add_edge(START, "generate_topics")
    graph.add_conditional_edges("generate_topics", continue_to_jokes, ["generate_joke"])
    graph.add_edge("generate_joke", "best_joke")
    graph.add_edge("best_joke", END)
    return graph.compile()
