"""`accel.wrap` for every LlamaIndex object with an entry point: what gets lowered inside it.

    RetrieverQueryEngine            -> drop-in; its query lowered (lowered.py, query_engine.py)
    retriever (dense / fusion)      -> lowered retriever drop-in (Embed -> Search on accel)
    CondenseQuestionChatEngine      -> drop-in; its query engine lowered (retrieval + synthesis)
    ContextChatEngine,
    CondensePlusContextChatEngine   -> drop-in; its retriever lowered
    RouterQueryEngine               -> drop-in; each routed query engine lowered
    SubQuestionQueryEngine          -> drop-in; each tool's query engine lowered, the sub-questions
                                       answered side by side (parallel branches)
    anything else (SimpleChatEngine, Workflow, AgentWorkflow, FunctionAgent, CustomQueryEngine,
    other retrievers ...)           -> opaque drop-in: its own code inside a wrapped run

Every drop-in keeps the original's class (see `dropin.py`); the chat engine's memory, the
agent's tools and state are the original's own objects. The LLM, embedding, vector-store and
reranker calls made by code that runs as-is are listed by `explain()`.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.common.dropin import DropInState, state_of
from accel.registry import TemplateCompiler

from .capture import capturing, engine_class
from .dropin import make_dropin
from .lowered import lower_query_engine, lower_retriever
from .subquestion import sub_question_overrides


def _name(obj: Any) -> str:
    """An object's class name, for labels (classes are told apart by identity)."""
    return type(obj).__name__


def _is(obj: Any, module: str, name: str) -> bool:
    import importlib

    return isinstance(obj, getattr(importlib.import_module(module), name))


class Lowering:
    """Lowers the components of one wrapped object and records what happened to each."""

    def __init__(self, session: TemplateCompiler, policy: str, disabled_passes: tuple[str, ...]) -> None:
        self.session = session
        self.policy = policy
        self.disabled_passes = disabled_passes
        self.lowered: list[str] = []
        self.parts: list[Any] = []

    def query_engine(self, engine: Any, where: str) -> Any:
        from llama_index.core.query_engine import RetrieverQueryEngine

        if type(engine) is not RetrieverQueryEngine:
            return engine
        lowered = lower_query_engine(engine, policy=self.policy, disabled_passes=self.disabled_passes)
        self.lowered.append(f"{where}: RetrieverQueryEngine -> retrieval and synthesis as primitives")
        self.parts.append(state_of(lowered).helper)
        return lowered

    def retriever(self, retriever: Any, where: str) -> Any:
        lowered = lower_retriever(retriever, self.session, self.disabled_passes)
        if lowered is None:
            return retriever
        self.lowered.append(f"{where}: {_name(retriever)} -> " + "; ".join(state_of(lowered).lowered))
        return lowered


def wrap_object(obj: Any, *, policy: str = "topology", disabled_passes: tuple[str, ...] = ()) -> Any:
    """The drop-in for any LlamaIndex object with a query / chat / retrieve / run entry point."""
    from accel.session import get_session

    session = get_session(policy=policy)  # one session for every app: their requests batch together
    lower = Lowering(session, policy, tuple(disabled_passes))
    replace: dict[str, Any] = {}
    overrides: dict[str, Any] = {}
    core = "llama_index.core"
    if _is(obj, f"{core}.base.base_retriever", "BaseRetriever"):
        lowered = lower_retriever(obj, session, tuple(disabled_passes))
        if lowered is not None:
            return lowered
    elif _is(obj, f"{core}.chat_engine", "CondenseQuestionChatEngine"):
        replace["_query_engine"] = lower.query_engine(obj._query_engine, "query engine")
    elif _is(obj, f"{core}.chat_engine", "CondensePlusContextChatEngine") or _is(obj, f"{core}.chat_engine", "ContextChatEngine"):
        replace["_retriever"] = lower.retriever(obj._retriever, "retriever")
    elif _is(obj, f"{core}.query_engine", "RouterQueryEngine"):
        replace["_query_engines"] = [lower.query_engine(e, f"route {i}") for i, e in enumerate(obj._query_engines)]
    elif _is(obj, f"{core}.query_engine", "SubQuestionQueryEngine"):
        replace["_query_engines"] = {name: lower.query_engine(e, f"tool {name!r}") for name, e in obj._query_engines.items()}
        overrides = sub_question_overrides()
        lower.lowered.append("sub-questions -> parallel branches (each answered by its tool's query engine, side by side)")
    kind = DropInState(_name(obj), session, lowered=lower.lowered, parts=lower.parts,
                      model=session.learner(_name(obj), disabled_passes))
    kind.captured, kind.as_is = engine_components(obj, replace)
    if not lower.lowered:
        kind.as_is.insert(0, f"{_name(obj)}: opaque, run as-is (its own code; nothing in it is lowered)")
    return make_dropin(obj, kind, overrides=overrides, replace=replace)


def engine_components(obj: Any, replaced: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The engine-facing components reachable from `obj` that run as stock code: (captured by
    accel's engine-call capture, run as-is)."""
    captured, as_is = [], []
    for path, component in _walk(obj, skip=set(replaced)):
        entry = engine_class(component)
        if entry is None:
            continue
        line = f"{path}: {_name(component)} ({entry.role})"
        (captured if capturing(component) else as_is).append(line)
    return captured, as_is


def _walk(obj: Any, *, skip: set[str], depth: int = 3, path: str = "", seen: set[int] | None = None) -> list[tuple[str, Any]]:
    seen = seen if seen is not None else set()
    if depth == 0 or id(obj) in seen:
        return []
    seen.add(id(obj))
    found = []
    attrs = getattr(obj, "__dict__", None) or {}
    for name, value in attrs.items():
        if name in skip or name.startswith("__"):
            continue
        values = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else [(None, value)]
        for key, item in values:
            where = f"{path}{name.lstrip('_')}" + (f"[{key!r}]" if key is not None else "")
            if engine_class(item) is not None and id(item) not in seen:
                seen.add(id(item))
                found.append((where, item))
            elif type(item).__module__.startswith(("llama_index", "workflows")):
                found += _walk(item, skip=set(), depth=depth - 1, path=f"{where}.", seen=seen)
    return found
