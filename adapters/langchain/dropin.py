"""`accel.wrap(runnable)`: a drop-in of the chain's own class (`accel.adapters.common.dropin`).

The drop-in is a shallow copy of the original (sharing its steps, models, retrievers and
memory) whose class is a per-wrap subclass of the original's, so `isinstance` checks, field
reads (`fast.first`, `fast.bound`, `fast.model_name`), `to_json` and the class's other methods
are the original's. What the class overrides:

- **the entry points** (`ENTRY_POINTS`): with engine work to lower, `invoke` / `ainvoke` /
  `stream` / `astream` / `batch` / `abatch` call the wrap's `LoweredChain`, and the others are
  `Runnable`'s own, built on those (a sequence's `transform` would run its steps one by one);
  with nothing to lower, each is the original's own entry point inside a `WrappedRun`
  (`stock_runs.delegate`), as stock runs it;
- **composition** (`COMPOSITION`): `Runnable`'s own, so the drop-in stays one step wherever it
  is composed or configured. A sequence's `__or__` / `__ror__` would splice the drop-in's steps
  into a new plain sequence, and a binding's `bind` / `with_config` would build another
  instance of the drop-in class around the same `LoweredChain`, which would ignore the new
  config. A sequence drop-in's `steps` is `[self]`: `RunnableSequence(...)` flattens
  each sequence step into its steps, which here is the drop-in itself. `prompt | fast`
  (the prompt's `__or__`), `seq | fast` (the drop-in's `__ror__`, which Python calls first
  for a subclass of the left operand's class) and `fast | parser` all keep it as one step;
- **introspection** (`AS_ORIGINAL`): schemas, `get_graph`, `config_specs` and the
  configurable variants are the original's (a sequence drop-in's own would walk `[self]`);
  `explain()`, `template`, `counters`, `lowered`, `original` and `fallback` are the wrap's,
  where the class has no attribute of that name.

Wrapping never changes the original: the copy is what the drop-in class is given.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import Runnable, RunnableSequence

from accel.adapters.common.dropin import DropInState, make_dropin
from accel.adapters.langchain.runnable import LoweredChain
from accel.adapters.langchain.stock_runs import adelegate, delegate
from accel.options import WrapOptions

ENTRY_POINTS = ("invoke", "ainvoke", "batch", "abatch", "stream", "astream", "transform", "atransform",
                "batch_as_completed", "abatch_as_completed", "astream_log", "astream_events")
LOWERED = ("invoke", "ainvoke", "batch", "abatch", "stream", "astream")
_ASYNC = frozenset({"ainvoke", "abatch", "astream", "atransform", "abatch_as_completed", "astream_log", "astream_events"})
COMPOSITION = ("__or__", "__ror__", "pipe", "bind", "with_config", "with_listeners", "with_alisteners", "with_types",
               "with_retry", "with_fallbacks", "map", "pick", "assign")
AS_ORIGINAL = ("get_input_schema", "get_output_schema", "get_graph", "configurable_fields", "configurable_alternatives")
AS_ORIGINAL_PROPERTIES = ("InputType", "OutputType", "config_specs")


def wrap_chain(original: Runnable, options: WrapOptions) -> Runnable:
    """The drop-in of `original`, running as `options` say."""
    chain = LoweredChain(original, policy=options.policy, disabled_passes=options.disabled_passes, fallback=options.fallback)
    state = DropInState(chain.name, chain.session, helper=chain, template=chain.template, counters=chain.counters,
                        own_batch=True)
    return make_dropin(original, state, namespace=namespace(type(original), chain))


def namespace(base: type, chain: LoweredChain) -> dict[str, Any]:
    """The drop-in class's own attributes, for a subclass of `base` running `chain`."""
    made: dict[str, Any] = _lowered_entries(chain) if chain.lowered else _stock_entries(chain)
    made.update({name: Runnable.__dict__[name] for name in COMPOSITION})
    original = chain.original
    for name in AS_ORIGINAL:
        if callable(getattr(base, name, None)):
            made[name] = _as_original(original, name)
    for name in AS_ORIGINAL_PROPERTIES:
        made[name] = property(lambda self, name=name: getattr(original, name))
    if issubclass(base, RunnableSequence):
        made["steps"] = property(lambda self: [self])
    made["__repr__"] = lambda self: f"accel.wrap({original!r})"
    if isinstance(getattr(base, "model_config", None), dict):
        # a pydantic class: the drop-in is a copy, never validated; its schema is built only
        # if something asks for it (building it costs a fresh wrap 3x the rest, ACCEL_AUTO per new chain)
        made["model_config"] = {**base.model_config, "defer_build": True}
    wrap_attributes: dict[str, Any] = {
        "explain": lambda self, picture=None: chain.explain(picture),
        "template": property(lambda self: chain.template),
        "counters": property(lambda self: chain.counters),
        "lowered": property(lambda self: chain.lowered),
        "original": property(lambda self: chain.original),
        "fallback": property(lambda self: chain.fallback),
    }
    fields = getattr(base, "model_fields", {})
    made.update({name: value for name, value in wrap_attributes.items() if not hasattr(base, name) and name not in fields})
    return made


def _lowered_entries(chain: LoweredChain) -> dict[str, Any]:
    """`LOWERED` call the chain with the drop-in; the other entry points are `Runnable`'s, on them."""
    def invoke(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        return chain.invoke(self, input, config, **kwargs)

    async def ainvoke(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        return await chain.ainvoke(self, input, config, **kwargs)

    def batch(self: Any, inputs: list[Any], config: Any = None, *, return_exceptions: bool = False, **kwargs: Any) -> list[Any]:
        return chain.batch(self, inputs, config, return_exceptions=return_exceptions, **kwargs)

    async def abatch(self: Any, inputs: list[Any], config: Any = None, *, return_exceptions: bool = False,
                     **kwargs: Any) -> list[Any]:
        return await chain.abatch(self, inputs, config, return_exceptions=return_exceptions, **kwargs)

    def stream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        return chain.stream(self, input, config, **kwargs)

    def astream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        return chain.astream(self, input, config, **kwargs)

    own = {"invoke": invoke, "ainvoke": ainvoke, "batch": batch, "abatch": abatch, "stream": stream, "astream": astream}
    return {name: own.get(name) or Runnable.__dict__[name] for name in ENTRY_POINTS}


def _stock_entries(chain: LoweredChain) -> dict[str, Any]:
    """Each entry point the original's own, inside a `WrappedRun` (`stock_runs.delegate`)."""
    return {name: _method(name, (adelegate if name in _ASYNC else delegate)(chain, name)) for name in ENTRY_POINTS}


def _method(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
    """`call` as a method of the drop-in class (coroutine functions stay coroutine functions)."""
    if inspect.iscoroutinefunction(call):
        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await call(*args, **kwargs)
    else:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return call(*args, **kwargs)
    method.__name__ = method.__qualname__ = name
    return method


def _as_original(original: Runnable, name: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(original, name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    return method
