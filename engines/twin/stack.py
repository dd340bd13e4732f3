"""`accel up --twin PROFILE`: the local stack with engine twins in place of the engines.

Postgres stays real. One process (`python -m accel.engines.twin`) serves the LLM, embedder and
reranker twins. It is recorded in the stack state the way `accel up` records a vLLM server:
its process group is `server_pid`, and it carries the home's tag. So `accel down` stops it, and
the encoder URLs appear in `--json` as `up --encoders server` shows them. A twin stack is known
by its log file's name (`twin-<profile>.log`). Twins never stand in for the real engines of the
README's commands; every number measured on them is simulated.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from accel.config import Settings, settings as current_settings
from accel.engines.errors import EngineError, EngineUnavailable
from accel.engines.llm.server import PRIORITY_SCHEDULING, group_members
from accel.engines.stack import Report, StackInfo, is_twin_stack, read_state, resolve_models
from accel.engines.stack_home import home_tag, locked_home

log = logging.getLogger("accel.engines.twin.stack")

START_TIMEOUT_S = 120.0


async def launch_twins(profile: str, log_path: Path, *, env: dict[str, str] | None = None,
                       ports: tuple[int, int, int] = (0, 0, 0)) -> tuple[int, dict[str, str]]:
    """Start the twins' process in its own process group, the LLM and encoders on `ports`
    (0: any free). Returns its pid and the URLs it prints once it listens. The process outlives
    the caller's event loop (`accel up` returns), so it is a plain `Popen` whose one line is read
    on a worker thread: an asyncio subprocess transport would be closed with its loop."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    llm, embed, rerank = ports
    with open(log_path, "ab") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "accel.engines.twin", "--profile", profile, "--port", str(llm),
             "--embed-port", str(embed), "--rerank-port", str(rerank),
             *PRIORITY_SCHEDULING],  # as `accel up`'s vLLM: accel's priorities reach the LLM twin
            stdout=subprocess.PIPE, stderr=sink, start_new_session=True, env={**os.environ, **(env or {})})
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), START_TIMEOUT_S)
    except BaseException:
        process.kill()
        await asyncio.to_thread(process.wait)
        raise
    finally:
        process.stdout.close()  # the one line is read; the twins write nothing more there
    if not line:
        code = await asyncio.to_thread(process.wait)
        raise EngineUnavailable("twin", f"the twins' process exited ({code}) before listening",
                                f"read its log, {log_path}")
    return process.pid, json.loads(line)


def _ports(state: StackInfo) -> tuple[int, int, int]:
    urls = (state.openai_base_url, state.embed_base_url, state.rerank_base_url)
    return tuple(urlsplit(url).port or 0 if url else 0 for url in urls)  # type: ignore[return-value]


async def up_twin(profile: str, cfg: Settings | None = None, *, report: Report = lambda _: None) -> StackInfo:
    """Start (or find running, or restart on its recorded ports) the twin stack."""
    from accel.engines.vectordb.server import local_postgres_dsn, start_local_postgres

    cfg = cfg or current_settings()
    log_path = cfg.home / "logs" / f"twin-{profile}.log"
    async with locked_home(cfg.home, report):
        state = read_state(cfg)
        if state is not None and not (is_twin_stack(state) and Path(state.server_log or "") == log_path):
            raise EngineError("stack", f"a stack already runs for {cfg.home} ({state.server_log or state.openai_base_url})",
                              "stop it with `accel down` first, then `accel up --twin`")
        if state is not None and state.pg_dir and local_postgres_dsn(state.pg_dir) is None:
            report("restarting embedded Postgres")
            start_local_postgres(Path(state.pg_dir))
        if state is not None and state.server_pid and group_members(state.server_pid):
            return state
        if state is None:
            _, embed, rerank = resolve_models(cfg, report)
            if cfg.pg_dsn:
                dsn, pg_dir = cfg.pg_dsn, None
            else:
                report(f"starting embedded Postgres + pgvector in {cfg.pg_dir}")
                dsn, pg_dir = start_local_postgres(cfg.pg_dir), str(cfg.pg_dir)
            state = StackInfo("", "", dsn, embed, rerank, pg_dir=pg_dir)
        report(f"starting the {profile} twins (simulated engines)")
        pid, urls = await launch_twins(profile, log_path, env=home_tag(cfg.home), ports=_ports(state))
        info = replace(state, openai_base_url=urls["openai_base_url"], model=urls["model"], server_pid=pid,
                       server_log=str(log_path), embed_base_url=urls["embed_base_url"],
                       embed_model_name=urls["embed_model_name"], rerank_base_url=urls["rerank_base_url"],
                       rerank_model_name=urls["rerank_model_name"])
        _write_state(cfg, info)
        log.info("twin stack %s up: %s (%s)", profile, info.openai_base_url, urls["label"])
        return info


def _write_state(cfg: Settings, info: StackInfo) -> None:
    """Atomically, as `accel up` writes it (readers never see half a file)."""
    cfg.stack_state.parent.mkdir(parents=True, exist_ok=True)
    staging = cfg.stack_state.with_suffix(".twin.tmp")
    staging.write_text(json.dumps(info.to_json(), indent=2))
    staging.replace(cfg.stack_state)
