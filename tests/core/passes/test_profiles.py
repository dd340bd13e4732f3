"""Measured limits reach the passes: saved `accel profile` results per input class, else the
documented defaults (and the source says which); stage decomposition reads the class's limit."""

from __future__ import annotations

from pathlib import Path

from accel import profiles
from accel.engines.profile import EngineProfile, ProfilePoint
from accel.ir import CallOp, GraphBuilder, ItemsOp, Kind
from accel.passes import PassContext
from accel.passes.stage import input_class, stage_decompose


def save(directory: Path, engine: str, label: str, best: int) -> None:
    points = [ProfilePoint(n, float(n), 1.0) for n in (1, 2, 4, 8)]
    EngineProfile(engine, label, points, best).save(directory / f"{engine}-{label}.json")


def test_saved_profiles_per_class_and_defaults_otherwise(tmp_path: Path) -> None:
    none = profiles.load(tmp_path)
    assert "documented defaults" in none.source and none.by_engine == profiles.DEFAULTS
    save(tmp_path, "all-MiniLM-L6-v2", "query", 8)
    save(tmp_path, "all-MiniLM-L6-v2", "chunk", 2)
    save(tmp_path, "pgvector", "search-k8-5000rows", 16)
    save(tmp_path, "vllm", "prompt350-out32", 32)  # LLMs are not stage-decomposed
    measured = profiles.load(tmp_path)
    assert "measured on this machine" in measured.source
    assert measured.by_engine == {"all-MiniLM-L6-v2": {"query": 8, "chunk": 2}, "pgvector": {"search": 16}}
    assert measured.for_engines([("embed0", "all-MiniLM-L6-v2")]) == {"embed0/query": 8, "embed0/chunk": 2}


def test_stage_decompose_uses_the_limit_of_the_node_s_input_class() -> None:
    b = GraphBuilder()
    chunks = b.input("chunks")
    embedded = b.add(Kind.EMBED, "embed", engine="embed0", inputs={"texts": chunks}, op=ItemsOp("texts"), attrs={"size": 6})
    stored = b.add(Kind.INGEST, "ingest", engine="db0", inputs={"vectors": embedded}, op=ItemsOp("vectors"))
    b.output(b.add(Kind.CALL, "done", inputs={"value": stored}, op=CallOp(len, blocking=False)))
    graph = b.build()
    assert input_class(graph, graph.node("embed")) == "chunk"
    after = stage_decompose(graph, PassContext(profiles={"embed0/query": 8, "embed0/chunk": 2}))
    assert [n.name for n in after.nodes() if n.name.startswith("embed#mb")] == ["embed#mb0", "embed#mb1", "embed#mb2"]


def test_saved_profiles_give_seconds_per_item(tmp_path: Path) -> None:
    """Throughput at the max efficient batch becomes the cost per request that sizes calls
    by duration (`EngineLimits.max_call_s`)."""
    save(tmp_path, "rerank-minilm-l6", "pairs", 4)  # 4 pairs/s at batch 4
    cost = profiles.load(tmp_path).item_seconds("rerank-minilm-l6")
    assert cost is not None and cost(("query", "passage")) == 0.25


def test_the_session_gives_duration_limits_their_measured_cost(tmp_path: Path, monkeypatch) -> None:
    from accel.runtime.limits import EngineLimits
    from accel.session import Session
    from accel.testing.fakes import FakeEngine

    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    session = Session()
    reranker, unknown = FakeEngine(), FakeEngine()
    reranker.name, unknown.name = "rerank-minilm-l6", "unprofiled"
    sized = session._sized(reranker, EngineLimits(max_call_s=50.0))
    assert sized.sized_by_duration and sized.item_seconds(("q", "p")) == profiles.DEFAULT_SECONDS["rerank-minilm-l6"]["pairs"]
    assert not session._sized(unknown, EngineLimits(max_call_s=50.0)).sized_by_duration  # by count, logged
    assert session._sized(reranker, EngineLimits()) == EngineLimits()  # count-sized limits stay so


def test_an_encoder_server_takes_at_most_its_max_efficient_batch_a_call_once_profiled(tmp_path: Path, monkeypatch) -> None:
    """A rerank server's calls shrink from the catalogue's 1,024 pairs to its profile's max
    efficient batch; an in-process reranker (sharing the LLM's cores) and an unprofiled server
    keep their limits."""
    from accel.engines.catalogue import RERANK_PAIRS_PER_RUN, reranker, rerank_server
    from accel.session import Session
    from accel.testing.fakes import FakeEngine

    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    server, unprofiled, in_process = FakeEngine(), FakeEngine(), FakeEngine()
    server.name, unprofiled.name, in_process.name = "rerank-server:reranker", "rerank-server:other", "rerank-minilm-l6"
    save(tmp_path / "profiles", server.name, "pairs", 4)
    save(tmp_path / "profiles", in_process.name, "pairs", 4)
    limits = rerank_server("http://127.0.0.1:9", "reranker").limits
    assert limits.max_batch_size == RERANK_PAIRS_PER_RUN and limits.efficient_calls
    session = Session()
    sized = session._sized(server, limits)
    assert sized.max_batch_size == 4 and sized.sized_by_duration
    assert session._sized(unprofiled, limits).max_batch_size == RERANK_PAIRS_PER_RUN
    own = reranker("/models/rerank-minilm-l6").limits
    assert not own.efficient_calls and session._sized(in_process, own).max_batch_size == own.max_batch_size


def test_llm_spare_capacity_is_the_largest_batch_that_barely_slows_a_request():
    from accel.engines.profile import ProfilePoint
    from accel.profiles import DEFAULT_LLM_SPARE, load, spare_batch

    bench = [ProfilePoint(1, 1.7, 0.574), ProfilePoint(2, 2.6, 0.779), ProfilePoint(4, 3.1, 1.285)]
    assert spare_batch(bench) == 2  # docs/profile.md's bench model
    gpu_like = [ProfilePoint(1, 100, 0.0096), ProfilePoint(32, 2700, 0.0119), ProfilePoint(128, 7500, 0.0169)]
    assert spare_batch(gpu_like) == 32
    assert spare_batch([ProfilePoint(2, 2.6, 0.779)]) is None
    assert load(Path("/nonexistent")).llm_spare == DEFAULT_LLM_SPARE


def _save_llm(directory: Path, throughputs: dict[int, float]) -> None:
    points = [ProfilePoint(n, t, n / t) for n, t in throughputs.items()]
    EngineProfile("vllm-openai", "prompt350-out32", points, min(throughputs)).save(directory / "vllm-prompt.json")


def test_an_llm_keeps_as_many_requests_in_flight_as_its_profile_s_peak(tmp_path: Path, monkeypatch) -> None:
    """The twin h100-8b's sweep (2026-11-27, 16:25 UTC): throughput still grew 13% from 64 to
    128, so 128 requests stay in flight; a CPU's peak at 32 keeps the default 64, and a cap the
    app chose stays whatever the profile says."""
    from accel.runtime.limits import EngineLimits
    from accel.session import Session
    from accel.testing.fakes import FakeLLMEngine

    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    (tmp_path / "profiles").mkdir()
    _save_llm(tmp_path / "profiles", {1: 3.2, 16: 30.5, 32: 43.6, 64: 56.0, 128: 63.3})
    assert profiles.load(tmp_path / "profiles").llm_batch == 128
    llm = FakeLLMEngine()
    assert Session()._sized(llm, EngineLimits(use_priority=True)).max_inflight == 128
    assert Session()._sized(llm, EngineLimits(max_inflight=8)).max_inflight == 8

    _save_llm(tmp_path / "profiles", {1: 6.4, 16: 22.9, 32: 25.0})  # docs/profile.md, the tiny model on 2 cores
    assert Session()._sized(llm, EngineLimits()).max_inflight == EngineLimits().max_inflight
    assert profiles.load(Path("/nonexistent")).llm_batch is None


def test_an_llm_profile_s_prefill_cost_sets_the_shortest_warm_up_that_pays(tmp_path: Path) -> None:
    """The `h100-8b` twin's lone prompts (2026-11-28): 13.4 ms at 32 tokens, 35.4 ms at 1024,
    so a request costs 12.7 ms and a token 22 us: warm-ups under 570 tokens cost more than they
    save. Saved with the LLM profile, read back by `accel.profiles.load`; an LLM profile saved
    before prefill was measured still loads and keeps the default (any full block)."""
    from accel.engines.profile import PrefillCost

    cost = PrefillCost(32, 0.013371, 1024, 0.035411)
    assert round(cost.request_s * 1e3, 1) == 12.7 and round(cost.token_s * 1e6, 1) == 22.2
    assert cost.warm_min_tokens == 570
    assert PrefillCost(32, 0.01, 1024, 0.009).warm_min_tokens == 1024  # no measurable prefill cost: nothing pays

    _save_llm(tmp_path, {1: 100.0, 2: 190.0})
    assert profiles.load(tmp_path).warm_min_tokens == profiles.DEFAULT_WARM_MIN_TOKENS == 0
    path = tmp_path / "vllm-prompt.json"
    profile = EngineProfile.load(path)
    EngineProfile(profile.engine, profile.label, profile.points, profile.max_efficient_batch, prefill=cost).save(path)
    assert EngineProfile.load(path).prefill == cost
    assert profiles.load(tmp_path).warm_min_tokens == 570
