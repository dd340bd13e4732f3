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
