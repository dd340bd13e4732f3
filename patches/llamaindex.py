"""LlamaIndex patch: the entry points apps call run through `accel.wrap` under `ACCEL_AUTO=1`.

- query engines: `BaseQueryEngine.query` / `aquery` (a `RetrieverQueryEngine` is lowered, any
  other becomes a drop-in of its class);
- chat engines: `chat` / `achat` / `stream_chat` / `astream_chat` of the simple, context,
  condense-question and condense-plus-context engines;
- workflows and agents: `Workflow.run`, and the `run` of `BaseWorkflowAgent` (`FunctionAgent`,
  `ReActAgent`, ...) and `AgentWorkflow`, which override it.

A class is patched when its module is imported (wrapt post-import hooks). Each object is wrapped
once (`MethodPatch` caches it); accel's own wrappers and drop-ins, calls inside a wrapped run
(components of a wrapped app, nested apps) and `stock_call()`s take the original method.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any

from accel.patches.methods import MethodPatch

CHAT = ("chat", "achat", "stream_chat", "astream_chat")
# module -> (class, methods)
TARGETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "llama_index.core.base.base_query_engine": ("BaseQueryEngine", ("query", "aquery")),
    "llama_index.core.chat_engine.simple": ("SimpleChatEngine", CHAT),
    "llama_index.core.chat_engine.context": ("ContextChatEngine", CHAT),
    "llama_index.core.chat_engine.condense_question": ("CondenseQuestionChatEngine", CHAT),
    "llama_index.core.chat_engine.condense_plus_context": ("CondensePlusContextChatEngine", CHAT),
    "workflows.workflow": ("Workflow", ("run",)),
    "llama_index.core.agent.workflow.base_agent": ("BaseWorkflowAgent", ("run",)),
    "llama_index.core.agent.workflow.multi_agent_workflow": ("AgentWorkflow", ("run",)),
}


def _accept(obj: Any) -> bool:
    """Not accel's own drop-ins (their entry points are the patched ones they inherit)."""
    from accel.adapters.common.dropin import state_of

    return state_of(obj) is None


def _loader(module: str, name: str) -> Any:
    return lambda: getattr(importlib.import_module(module), name)


def _make_for(patch: list[MethodPatch]) -> Any:
    def make(name: str, original: Any) -> Any:
        if inspect.iscoroutinefunction(original):
            async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
                fast = patch[0].accelerated(self)
                if fast is None:
                    return await original(self, *args, **kwargs)
                return await getattr(fast, name)(*args, **kwargs)
        else:
            def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
                fast = patch[0].accelerated(self)
                if fast is None:
                    return original(self, *args, **kwargs)
                return getattr(fast, name)(*args, **kwargs)
        return patched

    return make


def _method_patch(module: str, name: str, methods: tuple[str, ...]) -> MethodPatch:
    holder: list[MethodPatch] = []
    holder.append(MethodPatch(_loader(module, name), methods, _make_for(holder), accept=_accept))
    return holder[0]


_PATCHES: dict[str, MethodPatch] = {module: _method_patch(module, name, methods) for module, (name, methods) in TARGETS.items()}


_state = {"on": False, "hooked": False}


def patch() -> None:
    """Patch each target class now if its module is imported, else when it is."""
    import wrapt

    _state["on"] = True
    if _state["hooked"]:
        for module, method_patch in _PATCHES.items():
            if module in sys.modules:
                method_patch.patch()
        return
    _state["hooked"] = True
    for module, method_patch in _PATCHES.items():
        wrapt.register_post_import_hook(lambda _m, p=method_patch: _state["on"] and p.patch(), module)


def unpatch() -> None:
    _state["on"] = False
    for method_patch in _PATCHES.values():
        if method_patch.patched():
            method_patch.unpatch()


def patched() -> bool:
    """Whether the query-engine entry points are patched (the others follow their modules)."""
    return _PATCHES["llama_index.core.base.base_query_engine"].patched()
