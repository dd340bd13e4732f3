"""What a Runnable is made of, as capture and the wrapper need to know it: plain bindings
peeled off (their kwargs and tracing config kept), and whether stock `batch` reaches a
component that batches on its own."""

from __future__ import annotations

from typing import Any

from accel.adapters.common.classes import loaded_class
from accel.adapters.common.dropin import state_of

TRACING_ONLY = frozenset({"tags", "metadata", "run_name"})
"""Config keys that only name and annotate a component's own run: a binding carrying only
these lowers like its bound component, whose rebuilt run takes them (`runs`); any other key
(callbacks, configurable, ...) keeps the binding opaque, where it applies."""


def unbind(runnable: Any) -> tuple[Any, dict[str, Any], tuple[dict[str, Any], ...]]:
    """Strip plain RunnableBindings (`bind(**kwargs)`, tracing-only `with_config`), merging
    kwargs; also their tracing configs, outermost first (they join the bound component's run).
    A binding with config that changes what runs is kept: only its own code applies it."""
    from langchain_core.runnables import RunnableBinding

    kwargs: dict[str, Any] = {}
    tracing: list[dict[str, Any]] = []
    while is_plain_binding(runnable):
        if set(runnable.config or {}) - TRACING_ONLY or runnable.config_factories:
            break
        kwargs = {**runnable.kwargs, **kwargs}
        if runnable.config:
            tracing.append(dict(runnable.config))
        runnable = runnable.bound
    return runnable, kwargs, tuple(tracing)


def peel_root(runnable: Any) -> tuple[Any, list[Any]]:
    """The wrapped chain under its outer RunnableBindings, and those bindings (outermost
    first): the wrapper applies their config and kwargs to each call as they would."""
    from langchain_core.runnables import RunnableBinding

    layers = []
    while is_plain_binding(runnable):
        layers.append(runnable)
        runnable = runnable.bound
    return runnable, layers


def is_plain_binding(runnable: Any) -> bool:
    """A `RunnableBinding` with no behaviour of its own: the class itself, or the subclass
    `BaseChatModel.bind` returns (`_ChatModelBinding`, which only narrows static types)."""
    from langchain_core.runnables import RunnableBinding

    cls = type(runnable)
    return cls is RunnableBinding or cls is loaded_class("langchain_core.language_models.chat_models", "_ChatModelBinding")


def _composed_of(runnable: Any) -> list[Any] | None:
    """The parts of a sequence, a parallel or a plain binding, which pass calls on to them."""
    from langchain_core.runnables import RunnableParallel, RunnableSequence

    if isinstance(runnable, RunnableSequence):
        return list(runnable.steps)
    if isinstance(runnable, RunnableParallel):
        return list(runnable.steps__.values())
    if is_plain_binding(runnable):
        return [runnable.bound]
    return None


def has_own_batch(runnable: Any) -> bool:
    """Whether stock `batch` / `abatch` of `runnable` reach a component whose batch differs
    from calling `invoke` per input (an LLM's single generate call, retries, fallbacks, ...)."""
    from langchain_core.runnables import Runnable, RunnableLambda

    if state_of(runnable) is not None:  # a drop-in: its batch is its own
        return True
    if (parts := _composed_of(runnable)) is not None:
        return any(has_own_batch(part) for part in parts)
    if isinstance(runnable, RunnableLambda):
        return False
    cls = type(runnable)
    return cls.batch is not Runnable.batch or cls.abatch is not Runnable.abatch


def has_own_stream(runnable: Any) -> bool:
    """Whether stock `stream` of `runnable`, run as-is (opaque), yields what invoking it would
    not: a model's chunks, a transform parser's partial values (a JSON parser's growing
    objects, which also stay silent where `invoke` raises), a generator's pieces, anything
    whose class streams its own way. Lambdas, passthroughs and picks call their code on the
    whole input, as `invoke` does."""
    from langchain_core.language_models import BaseLanguageModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.output_parsers.transform import BaseTransformOutputParser
    from langchain_core.runnables import Runnable, RunnableBranch, RunnableLambda, RunnablePassthrough, RunnableWithFallbacks
    from langchain_core.runnables.passthrough import RunnableAssign, RunnablePick

    if state_of(runnable) is not None:  # a drop-in: its stream is its own
        return True
    parts = _composed_of(runnable)
    if isinstance(runnable, RunnableAssign):
        parts = [runnable.mapper]
    elif isinstance(runnable, RunnableBranch):  # conditions are invoked; the taken branch streams
        parts = [branch for _, branch in runnable.branches] + [runnable.default]
    elif isinstance(runnable, RunnableWithFallbacks):
        parts = [runnable.runnable, *runnable.fallbacks]
    if parts is not None:
        return any(has_own_stream(part) for part in parts)
    if isinstance(runnable, RunnableLambda | RunnablePassthrough | RunnablePick | StrOutputParser):
        return False  # a StrOutputParser after a lowered model is lowered with it; elsewhere it gets one chunk
    if isinstance(runnable, BaseLanguageModel | BaseTransformOutputParser):
        return True
    cls = type(runnable)
    return cls.stream is not Runnable.stream or cls.transform is not Runnable.transform


def python_only(runnable: Any) -> bool:
    """Whether `runnable` is plain Python (lambdas, passthroughs, picks, prompts, parsers) put
    together by sequences, parallels, assigns and branches. A capture lowers engine work only
    from a model or a retriever, so such a chain has none: wrapping it needs no capture, which
    costs more than the chain's own call (ACCEL_AUTO wraps each new chain at its first call)."""
    from langchain_core.output_parsers import BaseOutputParser
    from langchain_core.prompts import BasePromptTemplate
    from langchain_core.runnables import RunnableBranch, RunnableLambda, RunnableParallel, RunnablePassthrough, RunnableSequence
    from langchain_core.runnables.passthrough import RunnableAssign, RunnablePick

    def plain(part: Any) -> bool:
        kind = type(part)
        if state_of(part) is not None:  # a drop-in: accel's, not plain Python
            return False
        if isinstance(part, RunnableSequence):
            parts = part.steps
        elif kind is RunnableParallel:
            parts = list(part.steps__.values())
        elif kind is RunnableAssign:
            parts = list(part.mapper.steps__.values())
        elif kind is RunnableBranch:
            parts = [*(p for branch in part.branches for p in branch), part.default]
        else:
            return kind in (RunnableLambda, RunnablePassthrough, RunnablePick) or isinstance(part, (BasePromptTemplate, BaseOutputParser))
        return all(plain(p) for p in parts)

    return plain(runnable)
