"""Engine profiles: measured structure, the max-efficient-batch rule, persistence, and the
standard input sets."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from rich.progress import Progress
from transformers import AutoTokenizer

from accel.engines.errors import InvalidRequest
from accel.engines.profile import (
    CHUNK_TOKENS,
    EngineProfile,
    ProfilePoint,
    choose_max_efficient_batch,
    chunk_texts,
    load_max_batches,
    profile_engine,
    query_texts,
)


def points(*pairs: tuple[int, float]) -> list[ProfilePoint]:
    return [ProfilePoint(size, throughput, size / throughput) for size, throughput in pairs]


def test_rule_picks_smallest_size_within_ten_percent_of_best():
    assert choose_max_efficient_batch(points((1, 10), (2, 19), (4, 35), (8, 60), (16, 64), (32, 66))) == 8
    assert choose_max_efficient_batch(points((1, 10), (2, 9), (4, 9.5))) == 1  # batching never helps
    assert choose_max_efficient_batch(points((1, 10), (8, 60), (16, 66)), tolerance=0.0) == 16
    with pytest.raises(InvalidRequest):
        choose_max_efficient_batch([])


@pytest.mark.engines
async def test_profile_on_a_small_sweep(embedder):
    with Progress(console=Console(quiet=True)) as progress:
        profile = await profile_engine(embedder, query_texts, (4, 1, 2), label="query",
                                       repeats=2, warmup=1, progress=progress)
        [task] = progress.tasks
        assert task.completed == task.total == 3 * (1 + 2)
    assert profile.engine == embedder.name and profile.label == "query"
    assert [p.batch_size for p in profile.points] == [1, 2, 4]
    for point in profile.points:
        assert point.latency_s > 0
        assert point.throughput == pytest.approx(point.batch_size / point.latency_s)
    best = max(p.throughput for p in profile.points)
    within = [p.batch_size for p in profile.points if p.throughput >= 0.9 * best]
    assert profile.max_efficient_batch == min(within)
    assert profile.speedup == pytest.approx(
        profile.points[[1, 2, 4].index(profile.max_efficient_batch)].throughput / profile.points[0].throughput
    )


@pytest.mark.engines
async def test_make_batch_must_return_the_requested_size(embedder):
    with pytest.raises(InvalidRequest, match="make_batch"):
        await profile_engine(embedder, lambda n: query_texts(n + 1), (1,), label="bad", warmup=0, repeats=1)


def test_save_load_and_max_batches(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    query = EngineProfile("org/emb", "query", points((1, 10), (64, 300)), 64)
    chunk = EngineProfile("org/emb", "chunk", points((1, 10), (8, 14)), 8)
    path = query.save()
    chunk.save()
    assert path == tmp_path / "profiles" / "org--emb-query.json"
    assert EngineProfile.load(path) == query
    assert query.speedup == pytest.approx(30.0)
    assert load_max_batches() == {"org/emb/query": 64, "org/emb/chunk": 8, "org/emb": 8}
    assert not list((tmp_path / "profiles").glob(".*"))  # no temporary files left behind


def test_no_profiles_means_no_limits(tmp_path: Path):
    assert load_max_batches(tmp_path / "absent") == {}


def test_corrupt_profile_is_a_typed_error(tmp_path: Path):
    (tmp_path / "x-query.json").write_text("{not json")
    with pytest.raises(InvalidRequest) as info:
        load_max_batches(tmp_path)
    assert "x-query.json" in info.value.cause and info.value.remedy


def test_query_texts_are_deterministic_and_query_length():
    texts = query_texts(40)
    assert texts == query_texts(40) and texts[:5] == query_texts(5)
    assert all(8 <= len(t.split()) <= 16 for t in texts)
    assert len(set(texts)) > 30


def test_chunk_texts_are_deterministic_and_about_256_tokens(minilm_path: Path):
    texts = chunk_texts(20)
    assert texts == chunk_texts(20)
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path))
    lengths = [len(tokenizer(t)["input_ids"]) for t in texts]
    assert all(CHUNK_TOKENS - 16 <= n <= CHUNK_TOKENS for n in lengths), lengths
    assert len(set(texts)) == len(texts)


def test_runtime_limits_read_the_profile():
    from accel.runtime.limits import EngineLimits

    profile = EngineProfile("emb", "query", points((1, 10), (32, 200)), 32)
    assert EngineLimits.from_profile(profile).max_batch_size == 32


class _ClockedEngine:
    """A fake engine (named so) whose calls take `seconds(batch size)` on a fake clock, so the
    sweep's stopping rule is checked without timing anything real."""

    name = "fake-clocked"

    def __init__(self, seconds) -> None:
        self.seconds, self.now, self.sizes = seconds, 0.0, []

    async def start(self) -> None:
        pass

    async def run(self, batch):
        self.now += self.seconds(len(batch))
        self.sizes.append(len(batch))
        return list(batch)


async def test_a_sweep_until_flat_stops_after_the_first_doubling_that_gains_under_ten_percent(monkeypatch):
    import types

    import accel.engines.profile as profile_module

    gpu_like = _ClockedEngine(lambda n: 0.01 if n <= 4 else 0.01 * n / 4 * 0.95)  # gains 5% past 4
    monkeypatch.setattr(profile_module, "time", types.SimpleNamespace(perf_counter=lambda: gpu_like.now))
    profile = await profile_engine(gpu_like, lambda n: list(range(n)), (1, 2, 4, 8, 16, 32), label="p",
                                   repeats=1, warmup=0, until_flat=True)
    assert [p.batch_size for p in profile.points] == [1, 2, 4, 8]  # 8 gained 5%: 16 and 32 never sent
    assert gpu_like.sizes == [1, 2, 4, 8]
    everything = await profile_engine(gpu_like, lambda n: list(range(n)), (1, 2, 4, 8, 16, 32), label="p",
                                      repeats=1, warmup=0)
    assert [p.batch_size for p in everything.points] == [1, 2, 4, 8, 16, 32]
