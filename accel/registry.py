"""What capture may ask of the session, as protocols: `EngineRegistry` (the engines a lowered
app uses) and `TemplateCompiler` (its optimised templates).

Capture and the lowering functions take these, not `accel.session.Session`: the type says what
they use, and any registry can drive them (a test's, a second runtime's). `Session` is the one
the adapters normally pass (`accel.get_session()`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from accel.engines.base import Engine
    from accel.types import EngineSpec, Template, TemplateBuild


@runtime_checkable
class EngineRegistry(Protocol):
    def engine(self, spec: EngineSpec) -> str:
        """The runtime name of the engine `spec` describes, made with `spec.factory()` the
        first time: apps that use the same model, server or database share one engine."""

    def get_engine(self, name: str) -> Engine:
        """The engine behind a runtime name (its tokenizer, block size, ...)."""


@runtime_checkable
class TemplateCompiler(EngineRegistry, Protocol):
    def template(self, build: TemplateBuild) -> Template:
        """The cached, optimised template of the p-graph `build.graph()` makes (once per
        `build.key`); the registry knows what the passes may know of its engines."""
