"""Start and stop vLLM's OpenAI-compatible server as a detached process group.

`accel up` starts the server and exits; `accel down` (another process) stops it by pid. The
API server process itself leads a new session and process group (its EngineCore and workers
join it), so its pid is both what to watch and the group to signal: killing it leaves no
server running unnoticed, and stopping the group leaves nothing behind. Its output goes
through a `tee -p` in the same group into a log file: the launcher follows tee's copy (through
a pipe) until uvicorn reports "Application startup complete" (no polling), then lets go, and
tee keeps writing the file after the launcher has gone. (A `sh -c '... | tee'` wrapper used to
lead the group: its pid was recorded, and killing it left the server running.) A reaper in the
group waits on the server's pidfd: when the API server dies alone (killed, crashed), it stops the
rest of the group, so vLLM's EngineCore and workers do not hold memory until the next `accel
up` or `accel down`.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from accel.config import settings
from accel.engines.errors import EngineDied, EngineError
from accel.engines.offline.llm import serving_dtype

READY_LINE = "Application startup complete"
DEFAULT_READY_TIMEOUT_S = 420.0
DEFAULT_GRACE_S = 20.0
_ENGINE = "vllm-server"


@dataclass
class ServerHandle:
    """A running server: where it listens, what it serves, and how to stop it."""

    base_url: str
    model: str
    pid: int  # the API server process; also its process-group id
    log_path: Path
    _processes: tuple[subprocess.Popen, ...] = field(default=(), repr=False)

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1].split("/", 1)[0])

    async def stop(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        """SIGTERM the whole group, SIGKILL what is left after `grace_s`; returns when all exited."""
        await asyncio.to_thread(stop_pid, self.pid, grace_s)
        for process in self._processes:
            await asyncio.to_thread(process.wait)  # reap our own children


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def port_free(host: str, port: int) -> bool:
    """True if nothing listens on `host:port` (SO_REUSEADDR, as uvicorn binds)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


PRIORITY_SCHEDULING = ("--scheduling-policy", "priority")
"""How accel's LLM servers schedule (vLLM's, and the LLM twin of `accel up --twin`): by the
`priority` accel sends from depth and objectives; vLLM's default, first come first served,
refuses any non-zero priority, and accel's client then sends none."""


def serve_args(model: str, *, served_model_name: str, max_model_len: int | None,
               extra_args: Sequence[str] = ()) -> list[str]:
    """vLLM's serving options as accel runs it, whether in a server process or hosted in
    this one (`accel.engines.llm.hosted`)."""
    args = [
        "--model", model,
        "--served-model-name", served_model_name,
        *PRIORITY_SCHEDULING,
        "--enable-prompt-tokens-details",
        "--enable-prefix-caching",
        "--dtype", serving_dtype(model),
    ]
    if max_model_len is not None:
        args += ["--max-model-len", str(max_model_len)]
    return args + list(extra_args)


def served_name(model: str) -> str:
    """The name a server answers to by default: a directory's last part, or the model name."""
    return Path(model).name if os.path.sep in model else model


def server_command(model: str, *, host: str, port: int, served_model_name: str,
                   max_model_len: int | None, extra_args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--host", host, "--port", str(port),
            *serve_args(model, served_model_name=served_model_name, max_model_len=max_model_len,
                        extra_args=extra_args)]


async def launch_server(
    model: str,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    max_model_len: int | None = None,
    log_path: Path | None = None,
    extra_args: Sequence[str] = (),
    served_model_name: str | None = None,
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> ServerHandle:
    """Start the server and return once it accepts requests.

    Raises EngineDied (with the log tail) if it exits first, EngineError on timeout (the
    server is stopped then). `model` is what vLLM accepts: a directory or a model name.
    """
    port = port or free_port(host)
    name = served_model_name or served_name(model)
    log_path = Path(log_path) if log_path else settings().home / "logs" / f"vllm-server-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, **(env or {}), PYTHONUNBUFFERED="1")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(settings().kv_cache_gib))

    command = server_command(model, host=host, port=port, served_model_name=name,
                             max_model_len=max_model_len, extra_args=extra_args)
    server = _spawn(command, env, log_path)
    handle = ServerHandle(f"http://{host}:{port}/v1", name, server.pid, log_path, (server,))
    try:
        async with asyncio.timeout(ready_timeout_s):
            await _follow_until_ready(server.stdout)
            await _until_listening(host, port, server)
    except TimeoutError:
        await handle.stop()
        raise EngineError(_ENGINE, f"server not ready after {ready_timeout_s:.0f}s; log: {log_path}",
                          "raise the timeout or check the log") from None
    except EOFError:
        await handle.stop()
        raise EngineDied(_ENGINE, f"server exited before it was ready; log tail:\n{log_tail(log_path)}",
                         "fix the cause in the log (model path, port in use, memory)") from None
    except asyncio.CancelledError:
        await asyncio.shield(handle.stop())  # the launcher owns the server until it is ready
        raise
    return handle


_SPAWN = ('exec > >(exec tee -p -a "$ACCEL_SERVER_LOG") 2>&1; '
          '"$ACCEL_PYTHON" -I -c "$ACCEL_REAPER" $$ & exec "$@"')
"""bash runs tee through a process substitution and starts the reaper, then becomes the server
(exec): the server keeps the pid of the session leader we started, and tee and the reaper, its
children, stay in its group."""

_REAPER = """
import os, select, signal, sys, time
try:
    select.select([os.pidfd_open(int(sys.argv[1]))], [], [])
except ProcessLookupError:
    pass
signal.signal(signal.SIGTERM, signal.SIG_IGN)
group, me = os.getpgid(0), os.getpid()
left = []
for entry in os.listdir("/proc"):
    try:
        if entry.isdigit() and int(entry) != me and os.getpgid(int(entry)) == group:
            left.append(os.pidfd_open(int(entry)))
    except OSError:
        pass
os.killpg(group, signal.SIGTERM)
deadline = time.monotonic() + 10
for fd in left:
    select.select([fd], [], [], max(0, deadline - time.monotonic()))
os.killpg(group, signal.SIGKILL)
"""
"""Run in the server's group: once the API server has exited, stop what is left of the group
(SIGTERM, then SIGKILL after 10 s). It dies with the group when `accel down` stops it first."""


def _spawn(command: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """The server, leading a new session (its pid is the group `accel down` signals), its
    output copied by a `tee -p -a log` in its group to the log and to our pipe."""
    return subprocess.Popen(
        ["bash", "-c", _SPAWN, "vllm-server", *command],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**env, "ACCEL_SERVER_LOG": str(log_path), "ACCEL_PYTHON": sys.executable, "ACCEL_REAPER": _REAPER},
        start_new_session=True,
    )


def launch_server_sync(model: str, **kwargs) -> ServerHandle:
    """`launch_server` for synchronous callers such as the CLI."""
    return asyncio.run(launch_server(model, **kwargs))


async def _follow_until_ready(stream) -> None:
    """Read the server's output (through tee) until the ready line; EOFError if it ends first."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
    try:
        while line := await reader.readline():
            if READY_LINE in line.decode(errors="replace"):
                return
        raise EOFError
    finally:
        transport.close()  # tee -p keeps writing the log file after we stop reading


async def _until_listening(host: str, port: int, server: subprocess.Popen, first_wait_s: float = 0.01,
                           last_wait_s: float = 0.5) -> None:
    """vLLM binds its socket before its ready line and listens only after it (uvicorn's
    `create_server` on the bound socket), so a request sent at once can be refused; found when a
    server restarted on its recorded port refused the first request. Nothing announces the
    listen, so this tries to connect with a doubling wait; the caller's timeout bounds it."""
    wait = first_wait_s
    while True:
        try:
            _, writer = await asyncio.open_connection(host, port)
        except ConnectionRefusedError:
            if server.poll() is not None:
                raise EOFError from None  # it exited after its ready line
            await asyncio.sleep(wait)
            wait = min(wait * 2, last_wait_s)
            continue
        writer.close()
        await writer.wait_closed()
        return


def log_tail(log_path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as err:
        return f"(log unreadable: {err})"


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in a process group, from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def stop_pid(pid: int, grace_s: float = DEFAULT_GRACE_S) -> bool:
    """Stop a server's process group from any process. Returns False if nothing was running.

    Waits on pidfds (the kernel says when each process exits), not by polling.
    """
    members = group_members(pid)
    if not members:
        return False
    waits = _pidfds(members)
    try:
        _signal_group(pid, signal.SIGTERM)
        pending = _wait_exits(waits, grace_s)
        if pending:
            _signal_group(pid, signal.SIGKILL)
            _wait_exits(pending, grace_s)
    finally:
        for fd in waits:
            os.close(fd)
    return True


def _pidfds(pids: list[int]) -> list[int]:
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue
    return fds


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _wait_exits(fds: list[int], timeout_s: float) -> list[int]:
    """Block until every pidfd reports its process exited or the timeout passes; the rest."""
    pending = list(fds)
    poller = select.poll()
    for fd in pending:
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout_s
    while pending and (left := deadline - time.monotonic()) > 0:
        for fd, _ in poller.poll(left * 1000):
            poller.unregister(fd)
            pending.remove(fd)
    return pending
