"""Auto-instrumentation: `ACCEL_AUTO=1` routes framework entry points into `accel.wrap`.

Patching is lazy and reversible, in the OpenTelemetry instrumentations' style: `instrument()`
registers wrapt post-import hooks, so a framework is patched when the app imports it (or at
once if it is already imported); `uninstrument()` restores the originals. Nothing is patched
unless `ACCEL_AUTO` is set (or `instrument(force=True)` is called). Entry points:
`accel-run python app.py` (a sitecustomize on PYTHONPATH), and the `opentelemetry_instrumentor`
entry point `accel` for `opentelemetry-instrument`.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.dependencies import DependencyConflict, get_dependency_conflicts
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

ENV = "ACCEL_AUTO"
# framework module to patch -> accel patch module (exposing patch() / unpatch())
FRAMEWORKS: dict[str, str] = {
    "langchain_core.runnables.base": "accel.patches.langchain",
    "llama_index.core.query_engine.retriever_query_engine": "accel.patches.llamaindex",
    "langgraph.pregel.main": "accel.patches.langgraph",
    # engine-call capture process-wide: framework components' engine calls from any code
    "langchain_core": "accel.patches.floor",
    "llama_index.core": "accel.patches.floor",
}

_lock = threading.Lock()
_state = {"instrumented": False}


def enabled() -> bool:
    from accel.config import settings

    return settings().auto


def instrument(*, force: bool = False) -> bool:
    """Patch each framework when it is imported. Returns whether anything was instrumented."""
    if not (force or enabled()):
        return False
    import wrapt

    with _lock:
        if _state["instrumented"]:
            return True
        _state["instrumented"] = True
    for framework, patch_module in FRAMEWORKS.items():
        wrapt.register_post_import_hook(_hook(patch_module), framework)
    return True


def _hook(patch_module: str):
    def on_import(_module: object) -> None:
        with _lock:
            if not _state["instrumented"]:
                return  # uninstrumented before the framework was imported
        try:
            module = importlib.import_module(patch_module)
        except ModuleNotFoundError as err:
            if err.name == patch_module:
                return  # no patch for this framework (yet)
            raise
        module.patch()

    return on_import


def uninstrument() -> None:
    """Restore every patched framework entry point."""
    with _lock:
        _state["instrumented"] = False
    for patch_module in FRAMEWORKS.values():
        import sys

        module = sys.modules.get(patch_module)
        if module is not None:
            module.unpatch()


class AccelInstrumentor(BaseInstrumentor):
    """accel as an OpenTelemetry instrumentation: `opentelemetry-instrument` loads it through
    the `opentelemetry_instrumentor` entry point and calls `instrument()`; a
    `tracer_provider=` given to `instrument` receives accel's query and primitive spans.
    It instruments whichever of its frameworks is installed (`_instruments_any`)."""

    _instruments_any = ("langchain-core >= 1.7, < 2", "llama-index-core >= 0.14, < 0.15", "langgraph >= 1.2, < 2")

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def _check_dependency_conflicts(self) -> DependencyConflict | None:
        return get_dependency_conflicts((), self._instruments_any)

    def _instrument(self, **kwargs: Any) -> None:
        from accel.tracer.spans import use_tracer_provider

        use_tracer_provider(kwargs.get("tracer_provider"))
        instrument(force=True)

    def _uninstrument(self, **kwargs: Any) -> None:
        from accel.tracer.spans import use_tracer_provider

        uninstrument()
        use_tracer_provider(None)


__all__ = ["ENV", "AccelInstrumentor", "enabled", "instrument", "uninstrument"]
