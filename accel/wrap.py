"""`accel.wrap(app)`: pick the framework adapter that understands `app` and let it wrap it.

Adapters register themselves with `register_adapter(matches, wrap_fn, honours=...)`;
`wrap_fn(obj, options)` gets the checked `WrapOptions` (`accel.options`). The built-in ones
(LangChain, LlamaIndex) are imported only when their framework is already imported by the
app, so `import accel` stays light and a framework that is not installed costs nothing.
An adapter package registers itself at import time; a third party calls `register_adapter`.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from accel.options import WrapOptions

if TYPE_CHECKING:
    from accel.types import PolicyName

log = logging.getLogger("accel.wrap")

App = TypeVar("App")

# framework root module -> accel adapter package that registers itself on import
BUILTIN_ADAPTERS: dict[str, str] = {
    "langgraph": "accel.adapters.langgraph",
    "langchain_core": "accel.adapters.langchain",
    "llama_index.core": "accel.adapters.llamaindex",
}


@dataclass(frozen=True)
class Adapter:
    matches: Callable[[Any], bool]
    wrap: Callable[[Any, WrapOptions], Any]
    name: str
    honours: frozenset[str]
    """The `WrapOptions` fields this adapter acts on."""


_adapters: list[Adapter] = []
_lock = threading.Lock()


def register_adapter(matches: Callable[[Any], bool], wrap_fn: Callable[[Any, WrapOptions], Any], *, name: str | None = None,
                     first: bool = False, honours: Iterable[str] = ("policy", "disabled_passes", "fallback")) -> None:
    """Add an adapter: `wrap_fn(obj, options)` is used for objects where `matches(obj)`.
    Registering the same `wrap_fn` again replaces the earlier entry (re-imports are harmless).
    `first` puts it ahead of those registered already (a more specific kind of object);
    `honours` names the options it acts on (others set by the user are logged as unused)."""
    adapter = Adapter(matches, wrap_fn, name or getattr(wrap_fn, "__module__", repr(wrap_fn)), frozenset(honours))
    with _lock:
        _adapters[:] = [a for a in _adapters if a.wrap is not wrap_fn and a.name != adapter.name]
        if first:
            _adapters.insert(0, adapter)
        else:
            _adapters.append(adapter)


def note_unused(adapter: str, options: list[str]) -> None:
    """Log options set for an app that its adapter has no use for (an adapter whose use
    depends on the app, like LangGraph's, calls it once it knows)."""
    if options:
        log.warning("accel.wrap: the %s adapter does not use option(s) %s; they have no effect", adapter, options)


def registered_adapters() -> list[str]:
    """Names of the registered adapters, in matching order."""
    _load_builtins()
    return [a.name for a in _adapters]


def _load_builtins() -> None:
    for framework, package in BUILTIN_ADAPTERS.items():
        if framework in sys.modules and package not in sys.modules:
            try:
                importlib.import_module(package)
            except ModuleNotFoundError as err:
                if err.name != package:  # the adapter exists but something it needs is missing
                    raise


def wrap(obj: App, options: WrapOptions | None = None, *, policy: PolicyName | None = None,
         disabled_passes: Iterable[str] | None = None, fallback: bool | None = None) -> App:
    """Return an accelerated drop-in replacement for `obj` (a LangChain Runnable, a LangGraph
    graph, a LlamaIndex query or chat engine, ...), usable wherever `obj` was. Options: a
    `WrapOptions`, or its fields as keywords (`policy="po"`, `disabled_passes=["prefill_split"]`,
    `fallback=False`), which override it; see `accel.options`."""
    chosen = WrapOptions.of(options, policy=policy, disabled_passes=disabled_passes, fallback=fallback)
    _load_builtins()
    with _lock:
        adapters = list(_adapters)
    for adapter in adapters:
        if adapter.matches(obj):
            note_unused(adapter.name, [name for name in chosen.non_default() if name not in adapter.honours])
            return adapter.wrap(obj, chosen)
    supported = ", ".join(a.name for a in adapters) or "none registered (import langchain_core or llama_index first)"
    raise TypeError(
        f"accel.wrap: cannot wrap an object of type {type(obj).__module__}.{type(obj).__qualname__}. "
        f"Supported, by adapter: {supported}."
    )
