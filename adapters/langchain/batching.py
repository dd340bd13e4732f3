"""A lowered chain's sync `batch`: every query reaches the session before any waits.

LangChain's `Runnable.batch` runs `invoke` once per input on a pool of threads. Each thread
must start, take the GIL and open its call's run before its query reaches accel's session, so
32 queries arrive over 50-100 ms while the session's loop already runs the first ones, and
the engine schedulers batch what has arrived: the batch splits into several smaller ones at
every stage. Here the calling thread opens every call's run and submits its query first, then
the pool's threads each serve one query's user code (`accel.caller.ThreadCaller`) and close
its run, exactly as `invoke` would have on that thread.

What stays stock's: one call run per input with its config (`get_config_list`), the
executor and its `max_concurrency` (only that many queries are begun at once; the rest begin on
a pool thread as one finishes), results in input order, `return_exceptions`, and the stock
chain answering a query whose engine failed before any user code ran. A batch whose calls
have callback handlers (a tracer, a listener) runs `Runnable.batch` itself, so every handler
sees each call from its own thread as stock shows it; that is counted and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import (ensure_config, get_callback_manager_for_config, get_config_list,
                                             get_executor_for_config, patch_config, set_config_context)

if TYPE_CHECKING:
    from accel.adapters.langchain.runnable import Begun, LoweredChain

log = logging.getLogger("accel.adapters.langchain")


@dataclass(frozen=True)
class _Call:
    """One input's call, opened as `Runnable._call_with_config` opens it."""

    input: Any
    config: RunnableConfig
    kwargs: dict[str, Any]
    manager: Any


@dataclass
class _Open:
    """A call whose run is open and whose query was submitted (or failed to be)."""

    run: Any
    scope: ExitStack
    context: Any = None
    """The call's config context (`set_config_context`), where its query began and where it
    is waited for, as `_call_with_config` runs `invoke` inside it."""
    begun: Begun | None = None
    error: BaseException | None = None


def threads_reason(chain: LoweredChain, calls: Sequence[_Call]) -> str | None:
    """Why this batch must run as `Runnable.batch` runs it (None: it may begin together)."""
    if len(calls) < 2:
        return None if calls else "no inputs"
    if chain.leaf_root:
        return "a model or retriever wrapped alone opens its own runs"
    for call in calls:
        if why := chain.stock_reason(call.config, call.kwargs):
            return why
        if call.manager.handlers:
            return "callback handlers listen"
    return None


def plan(chain: LoweredChain, inputs: Sequence[Any], config: RunnableConfig | Sequence[RunnableConfig] | None,
         kwargs: dict[str, Any]) -> list[_Call]:
    """Each input's call: its own config (outer bindings applied) and callback manager."""
    calls = []
    for input, each in zip(inputs, get_config_list(config, len(inputs))):  # type: ignore[arg-type]
        bound, bound_kwargs = chain.bind(each, dict(kwargs))
        bound = ensure_config(bound)
        calls.append(_Call(input, bound, bound_kwargs, get_callback_manager_for_config(bound)))
    return calls


def batch(chain: LoweredChain, runnable: Runnable, calls: Sequence[_Call], return_exceptions: bool) -> list[Any]:
    """Answer `calls` (two or more, no handlers: `threads_reason` is None) on LangChain's
    executor, the first `max_concurrency` of them begun from this thread before any waits."""
    with get_executor_for_config(calls[0].config) as executor:
        at_once = getattr(executor, "_max_workers", 1)
        opened: list[_Open] = []
        try:
            for call in calls[:at_once]:
                opened.append(_open(chain, runnable, call))
        except BaseException:
            for done in opened:
                _cancel(done)
            raise

        def one(i: int) -> Any:
            done = opened[i] if i < len(opened) else _open(chain, runnable, calls[i])
            if not return_exceptions:
                return _close(chain, done)
            try:
                return _close(chain, done)
            except Exception as err:
                return err

        return list(executor.map(one, range(len(calls))))


def _open(chain: LoweredChain, runnable: Runnable, call: _Call) -> _Open:
    """Open the call's run and submit its query, as `_call_with_config` then `invoke` would."""
    config = dict(call.config)
    run = call.manager.on_chain_start(None, call.input, run_type=None,
                                      name=config.get("run_name") or runnable.get_name(), run_id=config.pop("run_id", None))
    scope = ExitStack()
    opened = _Open(run, scope)
    try:
        opened.context = scope.enter_context(set_config_context(patch_config(config, callbacks=run.get_child())))
        opened.begun = opened.context.run(chain.begin, call.input, run, config, call.kwargs)
    except BaseException as err:  # raised in its place when the call is closed
        opened.error = err
    return opened


def _close(chain: LoweredChain, opened: _Open) -> Any:
    """Wait for the query on this thread (it serves the query's user code), then end its run."""
    try:
        if opened.error is not None:
            raise opened.error
        output = opened.context.run(chain.finish, opened.begun)
    except BaseException as err:
        opened.run.on_chain_error(err)
        raise
    finally:
        opened.scope.close()
    opened.run.on_chain_end(output)
    return output


def _cancel(opened: _Open) -> None:
    if opened.begun is not None:
        opened.begun.future.cancel()
    opened.scope.close()

