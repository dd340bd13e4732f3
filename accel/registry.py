"""What capture may ask of the session, as protocols: `EngineRegistry` (the engines a lowered
app uses) and `TemplateCompiler` (its optimised templates).

Capture and the lowering functions take these, not `accel.session.Session`: the type says what
they use, and any registry can drive them (a test's, a second runtime's). `Session` is the one
the adapters normally pass (`accel.get_session()`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from accel.engines.base import Engine
    from accel.ir import Graph, Template
    from accel.types import EngineLimits


@runtime_checkable
class EngineRegistry(Protocol):
    def engine(self, kind: str, key: Hashable, factory: Callable[[], Engine], *, limits: EngineLimits | None = None) -> str:
        """The runtime name of the engine for `(kind, key)`, made with `factory()` the first
        time: apps that use the same model, server or database share one engine."""

    def get_engine(self, name: str) -> Engine:
        """The engine behind a runtime name (its tokenizer, block size, ...)."""

    def pass_profiles(self) -> Mapping[str, int]:
        """Max efficient batch sizes per "<engine>/<input class>", for the passes."""


@runtime_checkable
class TemplateCompiler(EngineRegistry, Protocol):
    def template(self, structure_key: Hashable, build: Callable[[], Graph], *, context: Any = None,
                 disabled_passes: Iterable[str] = (), passes: bool = True) -> Template:
        """The cached, optimised template of the p-graph `build()` makes (once per key)."""
