"""`accel up --json` / `accel doctor --json` / `accel down` from .venv/bin/accel, on the real
embedded stack (pgserver Postgres + a vLLM OpenAI server on the tiny offline model): one stack
for the module (`stack`), the other tests need no vLLM."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from accel.engines.stack import pid_alive

ACCEL = str(Path(sys.executable).with_name("accel"))
pytestmark = [pytest.mark.engines, pytest.mark.slow]


def _run(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([ACCEL, *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def stack_env() -> dict[str, str]:
    from accel.engines.offline.llm import build_llm
    from tests.offline_models import suite_reranker

    env = dict(os.environ)
    # Not under pytest's tmp_path: pgserver runs Postgres as its own user, and pytest resets
    # /tmp/pytest-of-<user> to mode 0700 on every run.
    env["ACCEL_HOME"] = tempfile.mkdtemp(prefix="accel-cli-")
    env["ACCEL_LLM_MODEL"] = str(build_llm("tiny"))  # built once in the default cache
    env["ACCEL_RERANK_MODEL"] = suite_reranker()
    env["ACCEL_VLLM_ARGS"] = "--enforce-eager"  # starts and revivals are what is tested, not decode speed
    for var in ("ACCEL_PG_DSN", "ACCEL_OPENAI_BASE_URL"):
        env.pop(var, None)
    return env


@dataclass
class Stack:
    """The module's real stack and what its two first `up` (started at once) printed."""

    env: dict[str, str]
    home: Path
    outputs: list[tuple[str, str]]  # (stdout, stderr) of each `up`
    returncodes: list[int | None]
    tagged_after_up: list[int]  # the servers tagged with the home right after both `up`
    current: dict = field(default_factory=dict)  # the stack as last reported (revived servers change it)
    server_pids: list[int] = field(default_factory=list)  # every vLLM server the stack has had


@pytest.fixture(scope="module")
def stack(stack_env) -> Iterator[Stack]:
    """One real stack (pgserver Postgres + a vLLM server) for the two tests that need vLLM (issue
    26: each started its own, and a vLLM start is a minute or two): two `accel up` at once start
    it. test_up_restarts_what_stopped_on_the_recorded_addresses runs on it first (it stops and
    revives its parts), then test_up_doctor_down checks what both `up` printed, the doctor, and
    takes it down. Either test also runs alone (-k) on a stack of its own; `down` at the end
    in case a test left it up."""
    from accel.engines.stack_home import tagged_servers

    env = dict(stack_env, ACCEL_HOME=tempfile.mkdtemp(prefix="accel-cli-stack-"))
    home = Path(env["ACCEL_HOME"])
    both = [subprocess.Popen([ACCEL, "up", "--json"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=600) for process in both]
    made = Stack(env, home, outputs, [process.returncode for process in both], tagged_servers(home))
    if made.returncodes[0] == 0:
        made.current = json.loads(outputs[0][0])
        made.server_pids.append(made.current["server_pid"])
    try:
        yield made
    finally:
        _run(["down"], env)


def _serves(base_url: str) -> bool:
    import httpx

    try:
        return httpx.get(base_url.removesuffix("/v1") + "/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_up_restarts_what_stopped_on_the_recorded_addresses(stack: Stack):
    """Regressions (issue 14): (c) `server_pid` was a sh/tee wrapper: killing it left the server
    serving and the next `up` started a second one; (d) `up` did not restart a stopped Postgres
    while vLLM was alive; (e) after a crash `up` picked a new port, so chains built on the
    recorded URL stayed broken. On the module's stack (`down` and the check that no server
    process leaked are test_up_doctor_down's)."""
    import signal

    import psutil

    from accel.engines.llm.server import group_members
    from accel.engines.vectordb import stop_local_postgres

    env = stack.env
    assert stack.returncodes[0] == 0, stack.outputs[0][1][-3000:]
    info = stack.current
    assert "vllm.entrypoints.openai.api_server" in psutil.Process(info["server_pid"]).cmdline()

    stop_local_postgres(info["pg_dir"])  # (d) Postgres stops, vLLM stays up
    again = _run(["up", "--json"], env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout) == info  # same DSN, same server, nothing else started
    with psycopg.connect(info["pg_dsn"], connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)

    # (c) the recorded pid is the server itself; killed alone, its EngineCore and workers
    # follow it without waiting for the next `up` (issue 26: they held memory until then)
    members = group_members(info["server_pid"])
    assert len(members) > 2  # the API server, its engine processes, tee and the reaper
    exits = [os.pidfd_open(pid) for pid in members]
    os.kill(info["server_pid"], signal.SIGKILL)
    deadline = time.monotonic() + 60
    for fd in exits:
        assert select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0], \
            f"a server process outlived the API server by 60 s: {group_members(info['server_pid'])}"
        os.close(fd)
    assert not pid_alive(info["server_pid"]) and group_members(info["server_pid"]) == []
    revived = _run(["up", "--json"], env)
    assert revived.returncode == 0, revived.stderr[-3000:]
    new = json.loads(revived.stdout)
    stack.server_pids.append(new["server_pid"])
    stack.current = new
    assert new["openai_base_url"] == info["openai_base_url"]  # (e) the recorded port
    assert new["server_pid"] != info["server_pid"]
    assert group_members(info["server_pid"]) == []  # the old server's leftovers are gone
    assert _serves(new["openai_base_url"])
    assert {k: v for k, v in new.items() if k not in ("server_pid",)} == {
        k: v for k, v in info.items() if k not in ("server_pid",)}


def test_up_doctor_down(stack: Stack):
    """Two `up` at once (issue 26): the second waits for the first and reports the same stack;
    one vLLM server runs, and `down` leaves none (nor any process of the servers the stack had)."""
    from accel.engines.llm.server import group_members
    from accel.engines.stack_home import tagged_servers

    assert all(code == 0 for code in stack.returncodes), [err[-3000:] for _, err in stack.outputs]
    env, home = stack.env, stack.home
    try:
        info = json.loads(stack.outputs[0][0])
        assert json.loads(stack.outputs[1][0]) == info
        assert stack.tagged_after_up == [info["server_pid"]]
        # ACCEL_VLLM_ARGS reached the server (the one the revival started, when the restart test ran first)
        cmdline = Path(f"/proc/{stack.current['server_pid']}/cmdline").read_bytes().split(b"\0")
        assert b"--enforce-eager" in cmdline
        for key in ("openai_base_url", "model", "pg_dsn", "embed_model", "rerank_model"):
            assert info[key], key
        assert info["openai_base_url"].startswith("http://127.0.0.1:")
        with psycopg.connect(info["pg_dsn"]) as conn:
            assert conn.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'").fetchone()

        again = _run(["up", "--json"], env)  # idempotent: same stack, nothing new started
        assert again.returncode == 0 and json.loads(again.stdout) == stack.current

        doctor = _run(["doctor", "--json"], env)
        report = json.loads(doctor.stdout)
        assert doctor.returncode == 0, report
        assert set(report["engines"]) == {"llm", "vectordb", "embed", "rerank", "search"}
        assert all(e["ok"] for e in report["engines"].values()), report
    finally:
        down = _run(["down"], env)
    assert down.returncode == 0, down.stderr[-3000:]
    assert "vllm-server" in down.stdout and "postgres" in down.stdout
    assert not pid_alive(stack.current["server_pid"]) and tagged_servers(home) == []
    assert all(group_members(pgid) == [] for pgid in stack.server_pids), "a server process leaked"
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(info["pg_dsn"], connect_timeout=3)


def test_doctor_without_stack_reports_per_engine_errors(stack_env, tmp_path):
    env = dict(stack_env, ACCEL_HOME=str(tmp_path))
    doctor = _run(["doctor", "--json"], env)
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 1
    assert report["engines"]["embed"]["ok"] and report["engines"]["rerank"]["ok"]
    for name in ("llm", "vectordb"):
        assert not report["engines"][name]["ok"]
        assert "accel up" in report["engines"][name]["detail"]


def test_doctor_checks_the_postgres_accel_pg_dsn_names(stack_env, tmp_path, postgres_factory):
    """ACCEL_PG_DSN beats the state file, for `doctor` as for the apps (issue 26: doctor
    checked the recorded Postgres while apps used another)."""
    (tmp_path / "stack.json").write_text(json.dumps({
        "openai_base_url": "http://127.0.0.1:1/v1", "model": "tiny", "embed_model": "e", "rerank_model": "r",
        "pg_dsn": "postgresql://postgres@127.0.0.1:1/postgres"}))
    env = dict(stack_env, ACCEL_HOME=str(tmp_path), ACCEL_PG_DSN=postgres_factory("accel-doctor-"))
    report = json.loads(_run(["doctor", "--json"], env).stdout)
    assert report["engines"]["vectordb"]["ok"], report["engines"]["vectordb"]
    assert not report["engines"]["llm"]["ok"]  # the recorded server, which is not running


def test_down_without_stack_is_a_no_op(stack_env, tmp_path):
    down = _run(["down"], dict(stack_env, ACCEL_HOME=str(tmp_path)))
    assert down.returncode == 0
    assert "nothing was running" in down.stdout


def test_down_stops_a_server_started_for_its_home_but_not_recorded(stack_env, tmp_path):
    """An `up` killed between launching a server and writing the state file leaves a server
    nobody recorded: `down` finds it by its home's tag (a stand-in process, no vLLM needed)."""
    from accel.engines.llm.server import group_members
    from accel.engines.stack_home import home_tag

    from tests.stand_in_server import started_stand_in

    stray = started_stand_in(dict(stack_env, **home_tag(tmp_path)))
    try:
        down = _run(["down"], dict(stack_env, ACCEL_HOME=str(tmp_path)))
        assert down.returncode == 0, down.stderr[-2000:]
        assert f"pid {stray.pid}" in down.stdout
        assert stray.wait(30) is not None and group_members(stray.pid) == []
    finally:
        stray.kill()
        stray.wait()


@pytest.mark.parametrize("content", ["{not json", '{"who": 1}', "\x00\x01"])
def test_a_corrupt_state_file_is_a_typed_error(stack_env, tmp_path, content):
    (tmp_path / "stack.json").write_text(content)
    down = _run(["down"], dict(stack_env, ACCEL_HOME=str(tmp_path)))
    assert down.returncode == 1
    assert "stack.json" in down.stderr and "Remedy:" in down.stderr and "Traceback" not in down.stderr


def test_up_never_prints_a_dsn_password(stack_env, tmp_path):
    """With ACCEL_PG_DSN and ACCEL_OPENAI_BASE_URL set, `up` starts nothing and records them."""
    env = dict(stack_env, ACCEL_HOME=str(tmp_path), ACCEL_PG_DSN="postgresql://u:s3cret@127.0.0.1:1/db",
               ACCEL_OPENAI_BASE_URL="http://127.0.0.1:1/v1")
    for args in (["up", "--json"], ["up"]):
        up = _run(args, env)
        assert up.returncode == 0, up.stderr[-2000:]
        assert "s3cret" not in up.stdout + up.stderr and "u:***@" in up.stdout
    assert "s3cret" in (tmp_path / "stack.json").read_text()  # scripts read the real DSN from the state file
