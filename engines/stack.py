"""The embedded local stack behind `accel up` / `accel down`: Postgres + pgvector and a vLLM
OpenAI-compatible server, plus the model paths the embedder and reranker use.

What `up` started is recorded in a state file so that `down`, run from another process, stops
exactly that and nothing a user pointed us at (ACCEL_PG_DSN, ACCEL_OPENAI_BASE_URL).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from accel.config import Settings, settings as current_settings

from .errors import EngineError, EngineUnavailable
from .stack_home import home_tag, locked_home, locked_home_sync, tagged_servers

Report = Callable[[str], None]


@dataclass
class StackInfo:
    openai_base_url: str
    model: str
    pg_dsn: str
    embed_model: str
    rerank_model: str
    server_pid: int | None = None  # the API server process, leader of the server's process group
    server_log: str | None = None
    pg_dir: str | None = None  # set when `up` started the embedded Postgres
    replica_urls: list[str] | None = None  # `up --replicas N`: every vLLM server, the first one first
    replica_pids: list[int] | None = None  # their API server processes (the first one's is server_pid)
    ray_address: str | None = None
    embed_base_url: str | None = None  # `up --encoders server` or ACCEL_EMBED_BASE_URL: the embedding server
    embed_model_name: str | None = None
    rerank_base_url: str | None = None  # ... and the rerank server (/score, /rerank)
    rerank_model_name: str | None = None
    embed_server_pid: int | None = None  # set when `up` started the pooling server itself
    rerank_server_pid: int | None = None

    def to_json(self) -> dict:
        return asdict(self)

    def shown(self) -> dict:
        """`to_json()` fit for printing: the DSN's password, if any, replaced by `***` (the
        state file keeps the real DSN; scripts read it from there)."""
        from .vectordb.failures import redact_dsn

        return {**self.to_json(), "pg_dsn": redact_dsn(self.pg_dsn)}


def _quiet(_: str) -> None:
    pass


def resolve_models(cfg: Settings, report: Report = _quiet) -> tuple[str, str, str]:
    """(llm, embedder, reranker) model specs; builds the offline defaults when needed."""
    from .embeddings import packaged_minilm_path
    from .offline.llm import resolve_llm
    from .offline.reranker import resolve_reranker

    report("resolving the LLM" + ("" if cfg.llm_model else f" (offline '{cfg.llm_size}' model)"))
    llm = resolve_llm(cfg.llm_model, size=cfg.llm_size)
    embed = cfg.embed_model or str(packaged_minilm_path())
    report("resolving the reranker")
    rerank = resolve_reranker(cfg.rerank_model)
    return llm, embed, rerank


def read_state(cfg: Settings | None = None) -> StackInfo | None:
    """What `up` recorded, or None; a state file that is not `up`'s JSON is a typed error."""
    cfg = cfg or current_settings()
    try:
        return StackInfo(**json.loads(cfg.stack_state.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, UnicodeDecodeError) as exc:  # bad JSON, unknown or missing keys
        raise EngineError(
            "stack", f"the state file {cfg.stack_state} is not what `accel up` writes ({type(exc).__name__}: {exc})",
            f"stop what it started by hand if anything runs (see `accel doctor`), then delete {cfg.stack_state}",
        ) from exc


def pid_alive(pid: int | None) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped by its new parent) is not alive."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def up(cfg: Settings | None = None, *, report: Report = _quiet, max_model_len: int | None = None,
             replicas: int = 1, encoders: str = "inprocess") -> StackInfo:
    """Start what is not running yet and return how to reach it. Idempotent; after a crash
    it restarts only what stopped, on the recorded port and socket, so chains built on the
    recorded URLs work again without being rebuilt. `replicas > 1` starts that many vLLM
    servers (wrapped apps use them all, `scaleout.py`) and records a local Ray for the
    embedder and reranker replicas. One `up` at a time per home: a second one waits, then
    reports the same stack. `encoders="server"` also starts vLLM pooling servers for the
    embedder and the reranker (`encoder_servers.py`); ACCEL_EMBED_BASE_URL / ACCEL_RERANK_BASE_URL
    name running ones instead."""
    cfg = cfg or current_settings()
    if encoders not in ("inprocess", "server"):
        raise EngineError("stack", f"unknown encoders {encoders!r}", "pass 'inprocess' (the default) or 'server'")
    async with locked_home(cfg.home, report):
        info = await _up(cfg, report, max_model_len, replicas)
        return await _with_encoders(cfg, info, report, start=encoders == "server")


async def _with_encoders(cfg: Settings, info: StackInfo, report: Report, *, start: bool) -> StackInfo:
    from .encoder_servers import up_encoders

    # a server that started before another failed is still tagged with this home: `down` stops it
    updated = await up_encoders(cfg, info, report, start=start, embed_model=info.embed_model,
                                rerank_model=info.rerank_model)
    if updated != info:
        _write_state(cfg, updated)
    return updated


def is_twin_stack(state: StackInfo) -> bool:
    """Whether the recorded stack is engine twins (`accel up --twin`), known by its log's name."""
    return bool(state.server_log) and Path(state.server_log).name.startswith("twin-")


async def _up(cfg: Settings, report: Report, max_model_len: int | None, replicas: int) -> StackInfo:
    state = read_state(cfg)
    if state is not None and is_twin_stack(state):  # never report simulated engines as the real ones
        raise EngineError("stack", f"the engine twins of {state.server_log} run for {cfg.home}",
                          "stop them with `accel down` first, or measure on them with `accel bench ... --twin PROFILE`")
    if state is not None:
        recorded = len(state.replica_urls or [state.openai_base_url])
        if replicas > 1 and recorded != replicas:
            report(f"the stack runs {recorded} vLLM replicas; `accel down` first to change that")
        return await _revive(state, cfg, report, max_model_len)

    llm, embed, rerank = resolve_models(cfg, report)
    if cfg.pg_dsn:
        report("using Postgres at ACCEL_PG_DSN")
        dsn, pg_dir = cfg.pg_dsn, None
    else:
        report(f"starting embedded Postgres + pgvector in {cfg.pg_dir}")
        dsn, pg_dir = _start_postgres(cfg.pg_dir), str(cfg.pg_dir)

    if cfg.openai_base_url:
        report("using the vLLM server at ACCEL_OPENAI_BASE_URL")
        base_url, served, pid, log = cfg.openai_base_url, llm, None, None
    else:
        try:
            handle = await _launch(cfg, llm, report, max_model_len=max_model_len)
        except BaseException:
            if pg_dir:
                from .vectordb.server import stop_local_postgres

                stop_local_postgres(Path(pg_dir))
            raise
        base_url, served, pid, log = handle.base_url, handle.model, handle.pid, str(handle.log_path)

    info = StackInfo(base_url, served, dsn, embed, rerank, server_pid=pid, server_log=log, pg_dir=pg_dir)
    if replicas > 1 and pid is not None:
        urls, pids = [base_url], [pid]
        try:
            for index in range(1, replicas):
                extra = await _launch(cfg, llm, report, max_model_len=max_model_len, served_model_name=served, index=index)
                urls.append(extra.base_url)
                pids.append(extra.pid)
        except BaseException:
            _write_state(cfg, replace(info, replica_urls=urls, replica_pids=pids))  # so `accel down` stops them
            raise
        info = replace(info, replica_urls=urls, replica_pids=pids, ray_address="local")
    _write_state(cfg, info)
    return info


async def _revive(state: StackInfo, cfg: Settings, report: Report, max_model_len: int | None) -> StackInfo:
    """Restart the parts of a recorded stack that stopped; leave running parts alone."""
    from .llm.server import group_members, stop_pid

    restarted = []
    if state.pg_dir and _postgres_down(state.pg_dir):
        report(f"the embedded Postgres in {state.pg_dir} is stopped; starting it")
        dsn = _start_postgres(Path(state.pg_dir))
        if dsn != state.pg_dsn:  # same data dir, same socket: only a changed layout gets here
            report(f"Postgres now listens at {dsn}")
            state = replace(state, pg_dsn=dsn)
        restarted.append("postgres")
    if state.server_pid and not pid_alive(state.server_pid):
        leftovers = group_members(state.server_pid)
        if leftovers:  # the API server died, its engine processes may not have
            report(f"stopping what is left of the vLLM server's process group ({len(leftovers)} processes)")
            stop_pid(state.server_pid)
        llm, _, _ = resolve_models(cfg, report)
        port = _recorded_port(state.openai_base_url)
        handle = await _launch(cfg, llm, report, max_model_len=max_model_len, port=port, served_model_name=state.model)
        state = replace(state, server_pid=handle.pid, server_log=str(handle.log_path))
        if state.replica_pids:
            state.replica_pids[0] = handle.pid
        restarted.append("vllm-server")
    for index, (url, pid) in enumerate(zip(state.replica_urls or [], state.replica_pids or [])):
        if index == 0 or pid_alive(pid):
            continue
        if group_members(pid):
            stop_pid(pid)
        llm, _, _ = resolve_models(cfg, report)
        extra = await _launch(cfg, llm, report, max_model_len=max_model_len, port=_recorded_port(url),
                              served_model_name=state.model, index=index)
        state.replica_pids[index] = extra.pid  # type: ignore[index]
        restarted.append(f"vllm-server#{index}")
    from .encoder_servers import revive_encoders

    state, encoders = await revive_encoders(cfg, state, report, embed_model=state.embed_model,
                                            rerank_model=state.rerank_model)
    restarted += encoders
    if not restarted:
        report("stack already up")
        return state
    _write_state(cfg, state)
    return state


async def _launch(cfg: Settings, llm: str, report: Report, *, max_model_len: int | None, port: int | None = None,
                  served_model_name: str | None = None, index: int = 0):
    from .llm.server import launch_server, port_free

    host = "127.0.0.1"
    if port is not None and not port_free(host, port):
        raise EngineUnavailable(
            "vllm-server",
            f"port {port}, recorded for the vLLM server in {cfg.stack_state}, is in use by another process",
            "stop that process so the server comes back where chains expect it, or run `accel down` then "
            "`accel up` for a new port (chains built on the old URL must then be rebuilt)",
        )
    where = f" on port {port}" if port else ""
    which = f" #{index}" if index else ""
    report(f"starting the vLLM OpenAI server{which}{where} (about 2 minutes on CPU)")
    log_path = cfg.home / "logs" / (f"vllm-server-{index}.log" if index else "vllm-server.log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return await launch_server(llm, host=host, port=port, max_model_len=max_model_len, log_path=log_path,
                               served_model_name=served_model_name, extra_args=cfg.vllm_args, env=home_tag(cfg.home))


def _recorded_port(base_url: str) -> int | None:
    port = urlsplit(base_url).port
    return port if port else None


def _start_postgres(pg_dir: Path) -> str:
    from .vectordb.server import start_local_postgres

    return start_local_postgres(pg_dir)


def _postgres_down(pg_dir: str) -> bool:
    from .vectordb.server import local_postgres_dsn

    return local_postgres_dsn(pg_dir) is None


def _write_state(cfg: Settings, info: StackInfo) -> None:
    cfg.stack_state.parent.mkdir(parents=True, exist_ok=True)
    tmp = cfg.stack_state.with_suffix(".tmp")
    tmp.write_text(json.dumps(info.to_json(), indent=2))
    tmp.replace(cfg.stack_state)


def down(cfg: Settings | None = None, *, report: Report = _quiet) -> list[str]:
    """Stop what `up` started, and every other vLLM server started for this home; returns
    what was stopped."""
    cfg = cfg or current_settings()
    with locked_home_sync(cfg.home, report):
        return _down(cfg, report)


def _down(cfg: Settings, report: Report) -> list[str]:
    from .llm.server import group_members, stop_pid
    from .vectordb.server import stop_local_postgres

    state = read_state(cfg)
    stopped = _stop_unrecorded(cfg, state, report)
    if state is None:
        if not stopped:
            report("nothing to stop")
        return stopped
    errors: list[str] = []
    if state.server_pid and group_members(state.server_pid):  # the server or what is left of its group
        report(f"stopping the vLLM server (process group {state.server_pid})")
        try:
            stop_pid(state.server_pid)
            stopped.append("vllm-server")
        except Exception as exc:  # keep going: Postgres must still be stopped
            errors.append(f"vllm-server: {exc}")
    for index, pid in enumerate(state.replica_pids or []):
        if index and group_members(pid):
            report(f"stopping vLLM replica #{index} (process group {pid})")
            try:
                stop_pid(pid)
                stopped.append(f"vllm-server#{index}")
            except Exception as exc:
                errors.append(f"vllm-server#{index}: {exc}")
    from .encoder_servers import down_encoders

    encoders, failed = down_encoders(state, report)
    stopped += encoders
    errors += failed
    if state.pg_dir:
        report("stopping embedded Postgres")
        try:
            stop_local_postgres(Path(state.pg_dir))
            stopped.append("postgres")
        except Exception as exc:
            errors.append(f"postgres: {exc}")
    cfg.stack_state.unlink(missing_ok=True)
    if errors:
        raise EngineError("stack", "; ".join(errors), "stop the processes by hand (see `accel doctor`)")
    return stopped


def _stop_unrecorded(cfg: Settings, state: StackInfo | None, report: Report) -> list[str]:
    """Stop the servers tagged with this home that the state file does not name."""
    from .llm.server import stop_pid

    from .encoder_servers import recorded_pids

    recorded = set(state.replica_pids or []) | {state.server_pid} | recorded_pids(state) if state else set()
    stopped = []
    for pid in tagged_servers(cfg.home):
        if pid not in recorded:
            report(f"stopping a vLLM server started for {cfg.home} but not recorded (process group {pid})")
            stop_pid(pid)
            stopped.append(f"vllm-server (unrecorded, pid {pid})")
    return stopped
