"""LlamaIndex's token estimates inside wrapped runs (`adapters/llamaindex/floor/token_counts.py`):
the same counts as stock, counted in place instead of on a thread with an event loop of its
own; every other block and every call outside a wrapped run on stock's path."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from accel.adapters.common import floor
from accel.scope import WrappedRun, stock_call, wrapped_run

types = pytest.importorskip("llama_index.core.base.llms.types")


@pytest.fixture(autouse=True)
def installed():
    import accel.adapters.llamaindex  # noqa: F401 - registers the adapter's plug-ins

    floor.install()
    floor.stats.reset()
    yield


@pytest.fixture
def stock_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads stock's `asyncio_run` was called from, one entry a call."""
    calls: list[str] = []
    original = types.asyncio_run

    def counted(coroutine: Any) -> Any:
        calls.append(threading.current_thread().name)
        return original(coroutine)

    monkeypatch.setattr(types, "asyncio_run", counted)
    return calls


def _messages() -> list[Any]:
    text = "Which function pushes an item onto a heap, and what does it return? " * 4
    return [types.ChatMessage(role="system", content="You answer questions about the Python docs."),
            types.ChatMessage(role="user", blocks=[types.TextBlock(text=text), types.ThinkingBlock(content="a plan")]),
            types.ChatMessage(role="assistant", content="heapq.heappush(heap, item); it returns None.")]


def _counts() -> list[int]:
    return [message.estimate_tokens() for message in _messages()]


def test_inside_a_running_loop_the_counts_are_stocks_without_a_thread(stock_runs: list[str]) -> None:
    expected = _counts()
    assert len(stock_runs) == 3 and min(expected) > 0  # outside a run: stock's path, one asyncio_run a message
    stock_runs.clear()

    async def in_run() -> list[int]:
        with wrapped_run(WrappedRun(app="test")):
            return _counts()

    threads = threading.active_count()
    assert asyncio.run(in_run()) == expected
    assert stock_runs == [] and threading.active_count() == threads
    assert floor.stats.snapshot()["routed"].get("llamaindex:token-estimates") == 3


def test_a_block_that_may_read_a_file_or_url_stays_stock(stock_runs: list[str]) -> None:
    image = types.ImageBlock(image=b"\x89PNG\r\n\x1a\n" + b"\x00" * 16)
    message = types.ChatMessage(role="user", blocks=[types.TextBlock(text="what is this?"), image])
    expected = message.estimate_tokens()
    stock_runs.clear()
    with wrapped_run(WrappedRun(app="test")):
        assert message.estimate_tokens() == expected
    assert len(stock_runs) == 1


def test_stock_calls_inside_a_run_stay_stock(stock_runs: list[str]) -> None:
    with wrapped_run(WrappedRun(app="test")), stock_call():
        _counts()
    assert len(stock_runs) == 3


def test_a_tokenizer_error_is_stocks(stock_runs: list[str]) -> None:
    def broken(text: str) -> list[int]:
        raise ValueError("tokenizer failed")

    block = types.TextBlock(text="hello")
    with pytest.raises(ValueError, match="tokenizer failed"):
        block.estimate_tokens(tokenizer=broken)
    with wrapped_run(WrappedRun(app="test")), pytest.raises(ValueError, match="tokenizer failed"):
        block.estimate_tokens(tokenizer=broken)


def test_uninstall_restores_stocks_method() -> None:
    patched = types.BaseContentBlock.estimate_tokens
    floor.uninstall()
    try:
        assert not floor.is_patched("llamaindex:token-estimates")
        assert types.BaseContentBlock.estimate_tokens is not patched
    finally:
        floor.install()
    assert floor.is_patched("llamaindex:token-estimates")
