"""pytest plugin (`-p wrap_plugin`): the apps a test suite builds run through `accel.wrap`
(the `accel.wrap` variant of the conformance runs; the `ACCEL_AUTO=1` variant patches what a
user's process gets). `--accel-wrap=chains` (the default, for langchain-core's suite) or
`--accel-wrap=graphs` (for LangGraph's).

chains: sequences and parallels (`a | b`, `{...}`) keep their class, so the suite's own
isinstance and snapshot checks see the objects it built; each call at every entry point goes
to `accel.wrap(chain).<method>`.
graphs: `StateGraph.compile()` returns `accel.wrap(compiled)`, as a user who wraps every graph
they compile would have it (the drop-in is still a `CompiledStateGraph`).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

ENTRY_POINTS = ("invoke", "ainvoke", "batch", "abatch", "stream", "astream", "transform", "atransform",
                "batch_as_completed", "abatch_as_completed", "astream_log", "astream_events")

_undo: list[Any] = []


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--accel-wrap", choices=("chains", "graphs"), default="chains",
                     help="what accel.wrap wraps: every LCEL chain's calls, or every compiled StateGraph")


def _maker(patch_ref: list[Any]):
    def make(name: str, original: Any) -> Any:
        if inspect.iscoroutinefunction(original):
            async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
                fast = patch_ref[0].accelerated(self)
                if fast is None:
                    return await original(self, *args, **kwargs)
                return await getattr(fast, name)(*args, **kwargs)
        else:
            def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
                fast = patch_ref[0].accelerated(self)
                if fast is None:
                    return original(self, *args, **kwargs)
                return getattr(fast, name)(*args, **kwargs)
        return patched

    return make


def _wrap_chains() -> None:
    from langchain_core.runnables.base import RunnableParallel, RunnableSequence

    from accel.patches.methods import MethodPatch

    for cls in (RunnableSequence, RunnableParallel):
        methods = tuple(name for name in ENTRY_POINTS if name in cls.__dict__)  # inherited ones call these
        ref: list[Any] = []
        patch = MethodPatch(lambda cls=cls: cls, methods, _maker(ref))
        ref.append(patch)
        patch.patch()
        _undo.append(patch.unpatch)


def _wrap_graphs() -> None:
    from langgraph.graph.state import StateGraph

    import accel

    original = StateGraph.__dict__["compile"]

    @functools.wraps(original)
    def compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        return accel.wrap(original(self, *args, **kwargs))

    StateGraph.compile = compile
    _undo.append(lambda: setattr(StateGraph, "compile", original))


def pytest_configure(config: Any) -> None:
    (_wrap_graphs if config.getoption("accel_wrap") == "graphs" else _wrap_chains)()


def pytest_unconfigure(config: Any) -> None:
    while _undo:
        _undo.pop()()
