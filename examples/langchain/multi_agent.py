"""A Halo-style multi-agent workflow (Halo §2): a planner breaks the question into a plan,
three expert agents (API reference, usage example, pitfalls) work from the plan side by side,
and an aggregator writes the final answer; run over a batch of inputs.

    python -m accel.examples.langchain.multi_agent "How do I push an item onto a heap?" "..."
"""

from __future__ import annotations

import argparse
from typing import Any

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import Runnable, RunnableParallel, RunnablePassthrough

from ..stack import StackConfig, add_arguments, config_from_args
from .models import chat_model

PLANNER = "You are a planner. Break the question into steps for three experts.\nQuestion: {question}\nPlan: "
EXPERTS = {
    "reference": "You are an API reference expert.\nQuestion: {question}\nPlan: {plan}\nYour part: ",
    "example": "You are a Python teacher who writes a short usage example.\nQuestion: {question}\nPlan: {plan}\nYour part: ",
    "pitfalls": "You review code for common mistakes.\nQuestion: {question}\nPlan: {plan}\nYour part: ",
}
AGGREGATOR = (
    "Write the final answer to the question from the experts' notes.\nQuestion: {question}\n"
    "Reference: {reference}\nExample: {example}\nPitfalls: {pitfalls}\nAnswer: "
)


def _flatten(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"question": inputs["question"], **inputs["notes"]}


def build_app(config: StackConfig, store: Any = None, *, parallel: bool = False) -> Runnable:
    """`app.invoke({"question": q}) -> str`. The experts are a `RunnableParallel` already
    (stock LangChain runs them on a thread pool), so `parallel` changes nothing."""
    def agent(template: str) -> Runnable:
        return PromptTemplate.from_template(template) | chat_model(config) | StrOutputParser()

    experts = RunnableParallel({name: agent(template) for name, template in EXPERTS.items()})
    return RunnablePassthrough.assign(plan=agent(PLANNER)) | RunnablePassthrough.assign(notes=experts) | _flatten | agent(AGGREGATOR)


def build_index(config: StackConfig, documents: Any, name: str) -> None:
    """No index: the agents answer from the question alone."""
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="+")
    add_arguments(parser)
    args = parser.parse_args()
    app = build_app(config_from_args(args))
    for question, text in zip(args.questions, app.batch([{"question": q} for q in args.questions])):
        print(f"Q: {question}\nA: {text}\n")


if __name__ == "__main__":
    main()
