"""Callback run trees, recorded and normalised, to compare a wrapped app's trace with stock's.

Tracers (LangSmith, Langfuse, ...) build their traces from the callback runs a chain emits: one
run per Runnable, with its name, run_type, tags, metadata, inputs, outputs and error, nested as
the chain is. `Recorder` keeps the finished root runs as LangSmith's tracer records them;
`trees` normalises away what differs between any two executions (run ids, times, message ids,
token usage, server details); `difference` says where two trees first differ.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run

INVOCATION = ("model", "model_name", "temperature", "max_tokens", "max_completion_tokens", "stop")  # what the request asked for


class Recorder(BaseTracer):
    """Finished root runs with their child runs, recorded as LangSmith's tracer records them
    (chat messages kept as messages; a chat model run has run_type "llm")."""

    run_inline = True  # async runs call it on the loop, in event order

    def __init__(self) -> None:
        super().__init__(_schema_format="original+chat")
        self.roots: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        self.roots.append(run)

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> Run:
        run = super().on_chat_model_start(*args, **kwargs)
        run.run_type = "llm"
        return run


def plain(value: Any) -> Any:
    """A comparable value: Documents by content and metadata, prompt values and messages by
    their messages' type and content (no ids, usage or response metadata)."""
    if isinstance(value, Document):
        return {"page_content": value.page_content, "metadata": plain(value.metadata)}
    if isinstance(value, PromptValue):
        return {type(value).__name__: plain(value.to_messages())}
    if isinstance(value, BaseMessage):
        return {"type": value.type, "content": value.content}
    if isinstance(value, dict) and value.get("lc") == 1 and value.get("type") == "constructor":
        return {"type": value["kwargs"].get("type"), "content": value["kwargs"].get("content")}  # dumpd'ed message
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def order(run: Run) -> tuple[int, str]:
    """Siblings in the chain's order: sequence steps by step, parallel branches by key (they
    start on threads in any order), anything else in start order (the sort is stable)."""
    for tag in run.tags or ():
        if tag.startswith("seq:step:"):
            return int(tag.removeprefix("seq:step:")), ""
        if tag.startswith("map:key:"):
            return 0, tag.removeprefix("map:key:")
    return 0, ""


def tree(run: Run) -> dict[str, Any]:
    node = {"name": run.name, "run_type": run.run_type, "tags": sorted(run.tags or ()),
            "metadata": dict(run.extra.get("metadata") or {}), "inputs": plain(run.inputs),
            "error": run.error and run.error.split("(", 1)[0]}  # the exception's type name
    if run.run_type == "llm":
        params = run.extra.get("invocation_params") or {}
        node["invocation"] = {k: params.get(k) for k in INVOCATION}
        node["outputs"] = [[g.get("text") for g in gens] for gens in (run.outputs or {}).get("generations", [])]
    else:
        node["outputs"] = plain(run.outputs)
    node["children"] = [tree(child) for child in sorted(run.child_runs, key=order)]
    return node


def trees(recorder: Recorder) -> list[dict[str, Any]]:
    return sorted((tree(root) for root in recorder.roots), key=repr)  # batch roots end in any order


def outline(node: dict[str, Any], depth: int = 0) -> list[tuple[int, str, str, tuple[str, ...]]]:
    rows = [(depth, node["name"], node["run_type"], tuple(node["tags"]))]
    for child in node["children"]:
        rows += outline(child, depth + 1)
    return rows


def llm_runs(run: Run) -> list[Run]:
    return [run] * (run.run_type == "llm") + [r for child in run.child_runs for r in llm_runs(child)]


def difference(fast: Any, stock: Any, path: str = "") -> str:
    """Where two normalised trees first differ, for the assertion message."""
    if isinstance(fast, dict) and isinstance(stock, dict) and fast.keys() == stock.keys():
        return next((d for k in fast if (d := difference(fast[k], stock[k], f"{path}.{k}"))), "")
    if isinstance(fast, list) and isinstance(stock, list) and len(fast) == len(stock):
        return next((d for i, (f, s) in enumerate(zip(fast, stock)) if (d := difference(f, s, f"{path}[{i}]"))), "")
    return "" if fast == stock else f"{path}: accel {fast!r:.300} != stock {stock!r:.300}"
