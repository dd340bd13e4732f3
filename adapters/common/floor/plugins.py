"""Plug-ins: which framework methods the floor patches, and the generic routed wrappers.

A `Plugin` names a class by module and attribute path and maps method names to `Wrap`
functions (`original -> replacement`). `install()` patches each plug-in's class when its module
is imported (wrapt post-import hooks, at once if it already is); `uninstall()` restores every
original (a method the class only inherited is removed again). Replacements are inert outside
a wrapped run (`route.active_run()` is None): they call the original with the same arguments.

`routed(plan)` / `arouted(plan)` build the usual replacement: `plan(self, *args, **kwargs)`
returns an `EngineCall` (engine requests + how to shape the results into the method's return
value), which the run's session makes one task of the run's program (`Session.call` /
`acall`), or a string saying why this call stays stock; an `EngineError` before any result
comes back (engine cannot start, request it refuses) re-runs the call on the original, so the
caller gets stock's result or stock's exception.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from accel.adapters.common.floor import route
from accel.engines.errors import EngineError
from accel.types import EngineCall, OnSessionLoop

Wrap = Callable[[Any], Any]
"""`wrap(original) -> replacement` for one method."""


Plan = Callable[..., "EngineCall | str | Awaitable[EngineCall | str]"]


@dataclass(frozen=True)
class Plugin:
    """Patch `module`'s `owner` (a dotted attribute path, e.g. "HuggingFaceEmbeddings") with
    `methods` (name -> Wrap). `name` labels the counters and logs."""

    name: str
    module: str
    owner: str
    methods: dict[str, Wrap] = field(default_factory=dict)

    def target(self) -> type:
        obj: Any = sys.modules[self.module]
        for part in self.owner.split("."):
            obj = getattr(obj, part)
        return obj


def routed(component: str, plan: Plan) -> Wrap:
    """A sync replacement that sends the call's requests through the run's session."""

    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        def replacement(self: Any, *args: Any, **kwargs: Any) -> Any:
            run = route.active_run()
            if run is None:
                return original(self, *args, **kwargs)
            call = _plan(component, plan, self, args, kwargs)
            if call is None:
                return original(self, *args, **kwargs)
            try:
                value = route.session_of(run).call(run, call)
            except (EngineError, OnSessionLoop) as err:
                route.note_fallback(component, err)
                return original(self, *args, **kwargs)
            route.stats.count("routed", component)
            return value

        return replacement

    return wrap


def arouted(component: str, plan: Plan) -> Wrap:
    """The async counterpart of `routed` (`plan` may itself be async)."""

    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        async def replacement(self: Any, *args: Any, **kwargs: Any) -> Any:
            run = route.active_run()
            if run is None:
                return await original(self, *args, **kwargs)
            call = _plan(component, plan, self, args, kwargs)
            if inspect.isawaitable(call):
                call = _checked(component, await call)
            if call is None:
                return await original(self, *args, **kwargs)
            try:
                value = await route.session_of(run).acall(run, call)
            except EngineError as err:
                route.note_fallback(component, err)
                return await original(self, *args, **kwargs)
            route.stats.count("routed", component)
            return value

        return replacement

    return wrap


def _plan(component: str, plan: Plan, obj: Any, args: tuple, kwargs: dict) -> Any:
    """The plan's EngineCall, an awaitable of one, or None (stock: a reason, empty, or the plan
    itself failed, in which case stock's own code raises stock's error)."""
    try:
        call = plan(obj, *args, **kwargs)
    except Exception as err:  # bad input: the original raises its own exception for it
        route.note_stock(component, f"request not mapped ({type(err).__name__})")
        return None
    if inspect.isawaitable(call):
        return call
    return _checked(component, call)


def _checked(component: str, call: Any) -> EngineCall | None:
    if isinstance(call, str):
        route.note_stock(component, call)
        return None
    if not call.requests:
        return None
    return call


# ---- registry and (un)installation -----------------------------------------------------------

_plugins: dict[str, Plugin] = {}
_patched: dict[tuple[str, str], tuple[type, Any, bool]] = {}  # (plugin, method) -> (class, original, own)
_hooked: set[str] = set()
_lock = threading.RLock()
_state = {"installed": False}


def register(plugin: Plugin) -> None:
    """Add (or replace) a plug-in; patched at once if the floor is installed and its module
    is imported."""
    with _lock:
        old = _plugins.get(plugin.name)
        if old is not None:
            _unpatch(old)
        _plugins[plugin.name] = plugin
        if _state["installed"]:
            _hook(plugin.module)


def plugins() -> list[str]:
    with _lock:
        return sorted(_plugins)


def install() -> None:
    """Patch every registered plug-in's class when its module is imported. Idempotent."""
    with _lock:
        _state["installed"] = True
        for module in {p.module for p in _plugins.values()}:
            _hook(module)


def uninstall() -> None:
    """Restore every patched method."""
    with _lock:
        _state["installed"] = False
        for plugin in _plugins.values():
            _unpatch(plugin)


def installed() -> bool:
    return _state["installed"]


def is_patched(plugin: str) -> bool:
    with _lock:
        return any(key[0] == plugin for key in _patched)


def _hook(module: str) -> None:
    if module in sys.modules:
        _on_import(module)
    if module in _hooked:
        return
    import wrapt

    _hooked.add(module)
    wrapt.register_post_import_hook(lambda _m: _on_import(module), module)


def _on_import(module: str) -> None:
    with _lock:
        if not _state["installed"]:
            return  # uninstalled before the framework was imported
        for plugin in _plugins.values():
            if plugin.module == module:
                _patch(plugin)


def _patch(plugin: Plugin) -> None:
    try:
        importlib.import_module(plugin.module)
        cls = plugin.target()
    except (ImportError, AttributeError) as err:
        route.note_stock(plugin.name, f"not patched: {type(err).__name__}: {err}")
        return
    for name, wrap in plugin.methods.items():
        key = (plugin.name, name)
        if key in _patched:
            continue
        own = name in cls.__dict__
        original = cls.__dict__[name] if own else getattr(cls, name)
        replacement = wrap(original)
        replacement.__wrapped__ = original
        setattr(cls, name, replacement)
        _patched[key] = (cls, original, own)


def _unpatch(plugin: Plugin) -> None:
    for name in plugin.methods:
        entry = _patched.pop((plugin.name, name), None)
        if entry is None:
            continue
        cls, original, own = entry
        if own:
            setattr(cls, name, original)
        else:
            delattr(cls, name)
