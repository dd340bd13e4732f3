"""Engines whose model lives in one dedicated worker thread (sentence-transformers models).

One thread per engine keeps model compute off the event loop and serialises forward passes,
which is what a CPU-bound model wants anyway; torch's intra-op thread count is set inside that
thread only, so one engine's setting never leaks into another's or the caller's.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from accel.engines.base import Engine, Req, Res
from accel.engines.errors import EngineUnavailable, InvalidRequest

T = TypeVar("T")


class WorkerModelEngine(Engine[Req, Res]):
    """Loads `_load_model()` in its worker on `start()` and runs compute there via `_in_worker`."""

    name: str

    def _init_worker(self, *, max_batch: int, threads: int | None) -> None:
        if max_batch < 1 or (threads is not None and threads < 1):
            raise InvalidRequest(self.kind, f"max_batch={max_batch}, threads={threads}", "pass positive values")
        self.max_batch = max_batch
        self.threads = threads
        self._model: Any = None
        self._executor: ThreadPoolExecutor | None = None
        self._start_lock = asyncio.Lock()

    @abc.abstractmethod
    def _load_model(self) -> Any:
        """Build the model (runs in the worker thread)."""

    async def start(self) -> None:
        async with self._start_lock:
            if self._model is not None:
                return
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"accel-{self.kind}-{self.name}")
            try:
                self._model = await asyncio.get_running_loop().run_in_executor(executor, self._load)
            except BaseException:
                executor.shutdown(wait=False, cancel_futures=True)
                raise
            self._executor = executor

    def _load(self) -> Any:
        if self.threads is not None:  # per calling thread: only this engine's worker changes
            import torch

            torch.set_num_threads(self.threads)
        return self._load_model()

    async def stop(self) -> None:
        async with self._start_lock:
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
            self._model = None

    def _started(self) -> Any:
        if self._model is None:
            raise EngineUnavailable(self.name, f"the {self.kind} engine is not started", "await engine.start() first")
        return self._model

    async def _in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(*args)` in the worker, starting the engine first if needed."""
        await self.start()
        executor = self._executor
        if executor is None:
            raise EngineUnavailable(self.name, f"the {self.kind} engine was stopped", "start it again")
        return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)
