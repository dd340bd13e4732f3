"""Parrot's multi-agent app (Parrot §8.4, MetaGPT-like): an architect plans the files, three
coders write one file each from the plan side by side, a reviewer checks the three files and
writes the final verdict. Every role's prompt starts with the same long team charter (the
shared role prompt), then the role's own instructions, then the task: prompts that share a
static prefix across agents and across queries.

    python -m accel.examples.langchain.role_agents "A command-line tool that merges sorted files"
"""

from __future__ import annotations

import argparse
from typing import Any

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import Runnable, RunnableParallel, RunnablePassthrough

from ..stack import StackConfig, add_arguments, config_from_args
from .models import chat_model

CHARTER = (
    "You are a member of a small software team that writes Python standard-library style code. "
    "The team works in roles: an architect who decides the files and their interfaces, coders "
    "who each write one file, and a reviewer who reads every file and decides whether the work "
    "is done. Everyone follows the same rules. Code is plain Python 3 with type hints on every "
    "public function and a docstring that says why the function exists, not what each line "
    "does. Modules are small and have one job each; names are explicit and never abbreviated. "
    "Errors are raised as specific exception types with a message that names the component, "
    "the cause and the remedy; nothing is swallowed silently. Functions that do input or output "
    "take their streams or paths as arguments so that they can be tested without touching the "
    "disk. Nothing sleeps or polls: work waits on events. Tests read like usage and assert "
    "behaviour, not implementation details. When a rule and the task disagree, the task wins "
    "and the reason is written in a comment. Answers are short: the team reads many of them. "
    "Every answer starts with the file name or the decision, then the content, and ends there. "
    "The team's reference material is the standard library itself: heapq for priority queues, "
    "bisect for sorted sequences, functools for caching and partial application, itertools for "
    "lazy pipelines, json for data interchange, textwrap for formatting, fnmatch and shlex for "
    "patterns and command lines, statistics for summaries, queue and sched for work that waits, "
    "and contextlib for resources that must be released. Prefer these to hand-written versions. "
    "A file opens with a module docstring of two or three sentences that explains why the module "
    "exists and how it is used, followed by imports in three groups (standard library, third "
    "party, local), each sorted. Constants come next, in capitals, each with a comment saying "
    "where its value comes from; measured values are preferred to guessed ones. Public classes "
    "and functions follow, most important first, private helpers last with a leading underscore. "
    "Data that crosses a module boundary travels in frozen dataclasses or named tuples, never in "
    "loose dictionaries. Iteration over large inputs is lazy; nothing reads a whole file into "
    "memory when a line at a time will do. Concurrency, when needed, uses asyncio with one owner "
    "per task, cancellation that propagates, and no task left running when its owner returns. "
    "Logging goes through a module logger; printing is reserved for command-line entry points. "
    "Command-line tools use argparse, exit with status 0 on success and 2 on bad usage, write "
    "results to standard output and diagnostics to standard error. A reviewer rejects work that "
    "breaks any of these rules unless a comment gives the reason, and says exactly which line "
    "and which rule. Coders never change another coder's file; they raise questions with the "
    "architect instead, who answers by changing the plan for everyone.\n"
)
ARCHITECT = CHARTER + "Your role: architect. Split the task into exactly three files and give each one's interface.\nTask: {question}\nFiles: "
CODER = CHARTER + "Your role: coder of file {n} of three. Write that file from the architect's plan.\nTask: {{question}}\nPlan: {{plan}}\nFile {n}: "
REVIEWER = (
    CHARTER + "Your role: reviewer. Read the three files and give the final verdict with the changes needed.\n"
    "Task: {question}\nFile 1: {file1}\nFile 2: {file2}\nFile 3: {file3}\nVerdict: "
)


def _flatten(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"question": inputs["question"], **inputs["files"]}


def build_app(config: StackConfig, store: Any = None, *, parallel: bool = False) -> Runnable:
    """`app.invoke({"question": task}) -> str`: 1 + 3 + 1 LLM calls. The coders are a
    `RunnableParallel` already (stock runs them on a thread pool), so `parallel` changes nothing."""
    def agent(template: str) -> Runnable:
        return PromptTemplate.from_template(template) | chat_model(config) | StrOutputParser()

    coders = RunnableParallel({f"file{n}": agent(CODER.format(n=n)) for n in (1, 2, 3)})
    return RunnablePassthrough.assign(plan=agent(ARCHITECT)) | RunnablePassthrough.assign(files=coders) | _flatten | agent(REVIEWER)


def build_index(config: StackConfig, documents: Any, name: str) -> None:
    """No index: the agents work from the task alone."""
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="+")
    add_arguments(parser)
    args = parser.parse_args()
    app = build_app(config_from_args(args))
    for task, text in zip(args.tasks, app.batch([{"question": t} for t in args.tasks])):
        print(f"Task: {task}\nVerdict: {text}\n")


if __name__ == "__main__":
    main()
