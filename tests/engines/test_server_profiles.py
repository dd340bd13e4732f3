"""`accel profile` measures encoder servers (real vLLM pooling servers: the session's, see
tests/conftest.py), and the session sizes server encoder engines from those profiles as it
sizes the in-process encoders: calls by expected duration, and the measured per-call cost that
bounds how long a call is held for the items of open streams."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accel import profiles
from accel.engines.catalogue import embed_server, rerank_server
from accel.engines.embed_server import EmbeddingServerEngine, ServerEmbedRequest, model_profile_name
from accel.engines.encoder_servers import RERANK_SERVED_NAME
from accel.engines.profile import EngineProfile, profile_server_encoders
from accel.engines.rerank_server import RerankServerEngine
from accel.session import profile_names

pytestmark = [pytest.mark.engines, pytest.mark.slow]

SIZES = (1, 2, 4)


def _served_name(url: str) -> str:
    async def served() -> str:
        async with EmbeddingServerEngine(url) as engine:
            return await engine.served_model()

    return model_profile_name(asyncio.run(served()))


def test_server_profiles_are_saved_under_the_server_engines_names(embed_url: str, rerank_url: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    made = asyncio.run(profile_server_encoders(embed_url, rerank_url, RERANK_SERVED_NAME, SIZES, repeats=1))
    embed_name, rerank_name = _served_name(embed_url), RerankServerEngine(rerank_url, RERANK_SERVED_NAME).name
    assert embed_name != EmbeddingServerEngine(embed_url).name  # by the served model, not the URL
    assert [(p.engine, p.label) for p in made] == [(embed_name, "query"), (embed_name, "chunk"), (rerank_name, "pairs")]
    for profile in made:
        assert [point.batch_size for point in profile.points] == list(SIZES)
        assert all(point.latency_s > 0 for point in profile.points)
        assert EngineProfile.load(EngineProfile.default_path(profile.engine, profile.label)) == profile

    measured = profiles.load(tmp_path / "profiles")
    query = measured.item_seconds(embed_name)
    assert query is not None and query(ServerEmbedRequest("a short question", ())) > 0
    assert query(ServerEmbedRequest("x " * 300, ())) > query(ServerEmbedRequest("a short question", ()))  # chunk-length costs more
    assert measured.item_seconds(rerank_name)(("q", "p")) > 0
    assert measured.call_overhead(embed_name) is not None and measured.call_overhead(embed_name) >= 0


def test_the_session_sizes_server_engines_from_their_profiles(embed_url: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from accel.session import Session

    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    spec, engine = embed_server(embed_url), EmbeddingServerEngine(embed_url)
    names = asyncio.run(profile_names(engine))
    assert names == (_served_name(embed_url), engine.name)
    assert Session()._sized(engine, spec.limits, names) == spec.limits  # no profile: by count, the documented overhead
    asyncio.run(profile_server_encoders(embed_url, None, None, SIZES, repeats=1))
    measured = profiles.load(tmp_path / "profiles")
    # the same server under another URL (a twin or a server restarted on a new port) keeps its profile
    moved = EmbeddingServerEngine(embed_url.replace("127.0.0.1", "localhost"))
    for sized in (Session()._sized(engine, spec.limits, names), Session()._sized(moved, spec.limits, asyncio.run(profile_names(moved)))):
        assert sized.sized_by_duration and sized.max_batch_size == spec.limits.max_batch_size
        assert sized.call_overhead_s == measured.call_overhead(names[0])
        assert sized.item_seconds(ServerEmbedRequest("a question", ())) == measured.item_seconds(names[0])(
            ServerEmbedRequest("a question", ()))
    gone = EmbeddingServerEngine("http://127.0.0.1:9/v1")  # nothing listens: its own name, no profile
    assert asyncio.run(profile_names(gone)) == (gone.name,)
    assert Session()._sized(gone, spec.limits, (gone.name,)) == spec.limits
    rerank = rerank_server(embed_url, RERANK_SERVED_NAME)  # an unprofiled server keeps its limits
    assert Session()._sized(RerankServerEngine(embed_url, RERANK_SERVED_NAME), rerank.limits) == rerank.limits


def test_accel_profile_measures_the_embedding_server(embed_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "ACCEL_HOME": str(tmp_path), "ACCEL_EMBED_BASE_URL": embed_url}
    env.pop("ACCEL_RERANK_BASE_URL", None)
    result = subprocess.run([str(Path(sys.executable).with_name("accel")), "profile", "--engine", "embed-server",
                             "--engine", "rerank-server", "--repeats", "1", "--max-batch", "16", "--json"],
                            env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    name = _served_name(embed_url)
    assert [(p["engine"], p["label"]) for p in report["profiles"]] == [(name, "query"), (name, "chunk")]
    assert all([q["batch_size"] for q in p["points"]] == [1, 2, 4, 8, 16] for p in report["profiles"])  # --max-batch
    assert "rerank-server: no server recorded" in result.stderr
    assert sorted(path.name for path in (tmp_path / "profiles").iterdir()) == sorted(
        EngineProfile.default_path(name, label).name for label in ("query", "chunk"))
