"""vLLM's OpenAI server hosted in this process: no server to run, the same answers as one.

When accel hosts the model (`accel.host_llm`), the app's OpenAI clients still point at a base
URL, but nothing listens there: this engine builds vLLM's own OpenAI application (the FastAPI
app `vllm serve` runs, over an `AsyncLLM` whose engine core is vLLM's usual worker process) and
reaches it through an in-memory streaming transport. Everything `OpenAIServerEngine` does
works unchanged, lowered requests and forwarded client calls alike, and the request semantics
(defaults such as `max_tokens`, chat templates, validation errors, `cached_tokens`) are the
server's own code, so wrapped apps answer as they would against `vllm serve`.

What differs from a server: the API layer (parsing, detokenising, SSE) runs on the session's
loop instead of a process of its own, and spawning the engine core needs the usual
`if __name__ == "__main__":` guard in scripts (Python's spawn start method).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.launchers.api_server.app_state import init_app_state
from vllm.entrypoints.launchers.app import build_app
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.usage.usage_lib import UsageContext
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.v1.engine.async_llm import AsyncLLM

from accel.config import settings
from accel.engines.base import LLMEngine
from accel.engines.errors import EngineUnavailable
from accel.engines.llm.asgi import ASGIStreamTransport
from accel.engines.llm.openai_client import OpenAIServerEngine
from accel.engines.llm.server import serve_args, served_name
from accel.engines.offline.llm import resolve_llm

log = logging.getLogger("accel.engines.hosted")
EXIT_STOP_TIMEOUT_S = 30.0


class HostedServerEngine(OpenAIServerEngine):
    """`OpenAIServerEngine` for `base_url`, answered by vLLM's OpenAI app in this process."""

    name = "vllm-hosted"

    def __init__(self, base_url: str, model: str | None = None, *, served_model_name: str | None = None,
                 max_model_len: int | None = None, extra_args: Sequence[str] = (), api_key: str = "EMPTY") -> None:
        self._model_spec = model
        self._served = served_model_name
        self._max_len = max_model_len
        self._extra_args = tuple(extra_args)
        self._llm: Any = None
        self._app: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._transport: ASGIStreamTransport | None = None
        super().__init__(base_url, served_model_name or "", api_key)

    async def start(self) -> None:
        if self._client is None:
            app = await self._build_app()
            self._loop = asyncio.get_running_loop()
            atexit.register(self._stop_at_exit)  # after vLLM's own exit hooks, so it runs before them
            self._transport = ASGIStreamTransport(app, root_path=urlsplit(self._server_root).path)
            self._client = httpx.AsyncClient(
                transport=self._transport,
                headers={"Authorization": f"Bearer {self._api_key}"},
                timeout=httpx.Timeout(self._timeout_s),
            )
        try:
            await super().start()
        except BaseException:
            await self.stop()  # a failed start must not leave an engine core behind (the session retries)
            raise

    async def _build_app(self) -> Any:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(settings().kv_cache_gib))
        model = await asyncio.to_thread(resolve_llm, self._model_spec, settings().llm_size)
        self.model = self._served or served_name(model)
        argv = serve_args(model, served_model_name=self.model, max_model_len=self._max_len,
                          extra_args=self._extra_args)
        log.info("hosting %s in process for %s (vLLM options %s)", model, self.base_url, argv)
        try:
            self._llm, args = await asyncio.to_thread(_start_engine, argv)
        except Exception as err:  # vLLM raises many types here; callers get one typed error
            raise EngineUnavailable(self.name, f"vLLM could not host {model}: {type(err).__name__}: {err}",
                                    "check the model directory/name, memory and the vLLM log above; scripts "
                                    "need an `if __name__ == \"__main__\":` guard") from err
        try:
            tasks = await self._llm.get_supported_tasks()
            app = self._app = build_app(args, tasks, self._llm.model_config)
            await init_app_state(self._llm, app.state, args, tasks)
        except BaseException:
            await self.stop()
            raise
        return app

    async def _server_block_size(self) -> int:
        """The engine's own prefix-cache block size (no metrics endpoint needed)."""
        return int(self._llm.vllm_config.cache_config.block_size or LLMEngine.block_size)

    def _stop_at_exit(self) -> None:
        """At interpreter exit, stop on the engine's loop before vLLM's exit hooks kill the
        engine core under a running output handler (which would log the exit as a death)."""
        loop = self._loop
        if loop is not None and loop.is_running() and self._llm is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.stop(), loop).result(EXIT_STOP_TIMEOUT_S)

    async def stop(self) -> None:
        atexit.unregister(self._stop_at_exit)
        await super().stop()
        transport, self._transport = self._transport, None
        if transport is not None:
            await transport.aclose()
        app, self._app = self._app, None
        if app is not None:  # as vLLM's lifespan does: the state holds the engine, which must be
            del app.state    # collected now, not at interpreter exit (its __del__ fails then)
        llm, self._llm = self._llm, None
        if llm is not None:
            await _shutdown(llm)


async def _shutdown(llm: AsyncLLM) -> None:
    """Stop the engine core off the loop; at interpreter exit, when no new thread may start
    (`accel.shutdown` runs from atexit), on it: nothing else runs there by then. The output
    handler (a task on this loop) is cancelled first, or it reports the core's exit as a death."""
    handler = getattr(llm, "output_handler", None)
    if handler is not None:
        handler.cancel()
    try:
        await asyncio.to_thread(llm.shutdown)
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        llm.shutdown()


def _start_engine(argv: list[str]) -> tuple[Any, Any]:
    """Parse `argv` as `vllm serve` does and start its engine (weights, engine core process).
    vLLM is imported with this module, not in here: tracebacks vLLM keeps from optional
    imports would otherwise hold this frame, and with it the engine, until exit."""
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(argv)
    validate_parsed_serve_args(args)
    engine_args = AsyncEngineArgs.from_cli_args(args)
    config = engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    llm = AsyncLLM.from_vllm_config(
        vllm_config=config,
        usage_context=UsageContext.OPENAI_API_SERVER,
        enable_log_requests=engine_args.enable_log_requests,
        disable_log_stats=engine_args.disable_log_stats,
    )
    return llm, args
