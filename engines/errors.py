"""Typed engine errors: each names the engine, the cause and what to do about it."""

from __future__ import annotations


class EngineError(RuntimeError):
    """Base class. `str(err)` reads: "<engine>: <cause>. Remedy: <remedy>"."""

    def __init__(self, engine: str, cause: str, remedy: str) -> None:
        self.engine = engine
        self.cause = cause
        self.remedy = remedy
        super().__init__(f"{engine}: {cause}. Remedy: {remedy}")

    def __reduce__(self):  # keep the three fields across pickling (process pools, Ray)
        return (type(self), (self.engine, self.cause, self.remedy))


class EngineUnavailable(EngineError):
    """The engine cannot be reached or is not started (unreachable DSN, server down)."""


class EngineDied(EngineError):
    """The engine's process exited or stopped answering while work was in flight."""


class ModelNotFound(EngineError, FileNotFoundError):
    """A model name or path does not resolve to weights on this machine."""


class EmptyBatch(EngineError, ValueError):
    """`run([])` was called; an empty batch is a caller bug, not a no-op to hide."""


class InvalidRequest(EngineError, ValueError):
    """A request the engine cannot serve as given (bad parameters, unknown collection)."""


class DimensionMismatch(InvalidRequest):
    """Vector dimension differs from the table's or the embedder's dimension."""


class PromptTooLong(InvalidRequest):
    """The prompt plus requested output exceeds the model's context window."""
