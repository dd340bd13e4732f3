"""Every `--json` of the command line writes exactly one compact JSON document to stdout and
nothing else there (logs, progress and tables go to stderr); third-party progress bars stay
off unless `--verbose`; `accel bench` prints its verdict first and fits 80 columns.

Each command runs as a user runs it (.venv/bin/accel, a subprocess) on real engines where it
needs them: the session's vLLM server on the tiny offline model, a pgserver Postgres, MiniLM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

ACCEL = str(Path(sys.executable).with_name("accel"))
BARS = ("Loading weights", "Writing model shards", "it/s]")


def _run(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([ACCEL, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _one_document(stdout: str) -> Any:
    """stdout holds one JSON document on one line and nothing else."""
    assert stdout.endswith("\n") and stdout.count("\n") == 1, stdout[:2000]
    return json.loads(stdout)


@pytest.fixture(scope="module")
def home_env() -> dict[str, str]:
    """A fresh ACCEL_HOME (no stack state) with the offline models built once elsewhere."""
    from tests.offline_models import suite_reranker

    env = dict(os.environ, ACCEL_HOME=tempfile.mkdtemp(prefix="accel-json-"), COLUMNS="80",
               ACCEL_RERANK_MODEL=suite_reranker(), ACCEL_LLM_MODEL="tiny")
    for var in ("ACCEL_PG_DSN", "ACCEL_OPENAI_BASE_URL", "TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS"):
        env.pop(var, None)
    return env


@pytest.fixture(scope="module")
def engines_env(home_env: dict[str, str], vllm_server, postgres_factory) -> dict[str, str]:
    """The same, pointed at the session's vLLM server (served as "tiny") and its own Postgres."""
    return dict(home_env, ACCEL_HOME=tempfile.mkdtemp(prefix="accel-json-"), ACCEL_OPENAI_BASE_URL=vllm_server.base_url,
                ACCEL_PG_DSN=postgres_factory("accel-json-"))


def test_bench_scheduler_json_to_stdout() -> None:
    result = _run(["bench", "scheduler", "--queries", "50", "--json", "-"], dict(os.environ))
    assert result.returncode == 0, result.stderr[-3000:]
    report = _one_document(result.stdout)
    assert report["template_nodes"] == 50 and "dispatch_us_per_primitive" in report
    assert "scheduler overhead" in result.stderr  # the table went to stderr


@pytest.mark.engines
@pytest.mark.slow
def test_doctor_json_is_one_document_and_loads_models_quietly(home_env: dict[str, str]) -> None:
    """No stack: llm and vectordb report errors, the embedder and reranker load for real."""
    result = _run(["doctor", "--json"], home_env)
    assert result.returncode == 1
    report = _one_document(result.stdout)
    assert report["engines"]["embed"]["ok"] and report["engines"]["rerank"]["ok"]
    assert not report["engines"]["llm"]["ok"]
    assert not any(bar in result.stderr for bar in BARS), result.stderr[-2000:]

    verbose = _run(["doctor", "--json", "--verbose"], home_env)  # the libraries' own output is back
    assert _one_document(verbose.stdout)["engines"].keys() == report["engines"].keys()
    assert "Loading weights" in verbose.stderr


@pytest.mark.engines
def test_up_and_profile_json_are_one_document_each(engines_env: dict[str, str]) -> None:
    up = _run(["up", "--json"], engines_env)
    assert up.returncode == 0, up.stderr[-3000:]
    info = _one_document(up.stdout)
    assert info["openai_base_url"] == engines_env["ACCEL_OPENAI_BASE_URL"]
    assert info["pg_dsn"] == engines_env["ACCEL_PG_DSN"]

    profile = _run(["profile", "--engine", "vectordb", "--repeats", "1", "--json"], engines_env)
    assert profile.returncode == 0, profile.stderr[-3000:]
    (vectordb,) = _one_document(profile.stdout)["profiles"]
    assert vectordb["engine"] == "pgvector" and vectordb["max_efficient_batch"] >= 1


@pytest.mark.engines
@pytest.mark.slow
def test_bench_json_to_stdout_verdict_first_within_80_columns(engines_env: dict[str, str], tmp_path: Path) -> None:
    result = _run(["bench", "advanced-rag", "--queries", "1", "--json", "-", "--plot", str(tmp_path / "b.png")],
                  engines_env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = _one_document(result.stdout)
    assert set(report["systems"]) == {"stock-sequential", "llamadistpc", "accel-topology"}  # the fast default
    assert report["bound"]["kind"] == "critical-path" and report["bound"]["value_s"] > 0
    assert not any(bar in result.stderr for bar in BARS), result.stderr[-2000:]
    shown = result.stderr.splitlines()
    first = next(i for i, line in enumerate(shown) if line.startswith("accel "))
    assert " ".join(shown[first:first + 2]).startswith(report["verdict"][:60])
    assert all(len(line) <= 80 for line in shown[first:]), "\n".join(shown[first:])
    for label in ("stock", "llamadistpc", "accel"):
        assert any(line.startswith(label + " ") for line in shown[first:]), label
