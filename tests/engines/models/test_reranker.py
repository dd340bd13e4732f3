"""The offline reranker build and the reranker engine: scores equal what LangChain's and
LlamaIndex's cross-encoder rerankers compute on the same model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file
from sentence_transformers import CrossEncoder

from accel.engines.errors import EmptyBatch, InvalidRequest, ModelNotFound
from accel.engines.offline.reranker import DEFAULT_DIRNAME, STAMP, _is_built, build_reranker, resolve_reranker
from accel.engines.profile import chunk_texts, query_texts
from accel.engines.reranker import CrossEncoderReranker

pytestmark = pytest.mark.engines


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    queries, chunks = query_texts(3), chunk_texts(4)
    return [(q, c) for q in queries for c in chunks] + [(queries[0], "short passage"), ("", "empty query")]


def test_build_has_ms_marco_minilm_architecture(reranker_dir: Path, minilm_path: Path):
    config = json.loads((reranker_dir / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert (config["hidden_size"], config["num_hidden_layers"], len(config["id2label"])) == (384, 6, 1)
    built, encoder = load_file(reranker_dir / "model.safetensors"), load_file(minilm_path / "model.safetensors")
    for name, weight in encoder.items():
        if name.endswith("position_ids"):  # a constant buffer that old checkpoints stored
            continue
        assert np.array_equal(built[f"bert.{name}"].numpy(), weight.numpy()), name
    assert built["classifier.weight"].shape == (1, 384) and float(built["classifier.weight"].abs().sum()) > 0
    assert (reranker_dir / "vocab.txt").read_bytes() == (minilm_path / "vocab.txt").read_bytes()
    model = CrossEncoder(str(reranker_dir))
    assert model.num_labels == 1


def test_build_is_idempotent_and_seeded(reranker_dir: Path, tmp_path: Path):
    stamp_mtime = (reranker_dir / STAMP).stat().st_mtime_ns
    assert build_reranker(reranker_dir) == reranker_dir
    assert (reranker_dir / STAMP).stat().st_mtime_ns == stamp_mtime
    again = build_reranker(tmp_path / "copy", force=True)
    assert (again / "model.safetensors").read_bytes() == (reranker_dir / "model.safetensors").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]  # no staging leftovers


def test_stale_build_is_replaced(tmp_path: Path, reranker_dir: Path):
    target = tmp_path / "stale"
    target.mkdir()
    (target / "config.json").write_text("{}")  # half-written earlier attempt, no stamp
    build_reranker(target)
    assert (target / STAMP).is_file()
    assert (target / "config.json").read_bytes() == (reranker_dir / "config.json").read_bytes()


def test_resolve_reranker(accel_home: Path, reranker_dir: Path, monkeypatch, tmp_path: Path):
    monkeypatch.setenv("ACCEL_HOME", str(accel_home))
    assert Path(resolve_reranker(None)) == accel_home / "models" / DEFAULT_DIRNAME == reranker_dir
    assert Path(resolve_reranker(str(reranker_dir))) == reranker_dir.resolve()
    with pytest.raises(ModelNotFound) as info:
        resolve_reranker(str(tmp_path / "absent"))
    assert info.value.engine == "rerank" and info.value.remedy


async def test_scores_equal_cross_encoder_predict(reranker, reranker_dir, pairs):
    scores = await reranker.run(pairs)
    expected = CrossEncoder(str(reranker_dir)).predict(pairs)
    assert all(isinstance(s, float) for s in scores)
    assert np.allclose(scores, expected, atol=1e-6, rtol=0)
    assert len(set(scores)) > len(pairs) // 2  # the seeded head does discriminate


async def test_scores_equal_langchain_cross_encoder(reranker, reranker_dir, pairs):
    from langchain_community.cross_encoders import HuggingFaceCrossEncoder

    stock = HuggingFaceCrossEncoder(model_name=str(reranker_dir), model_kwargs={"device": "cpu"})
    assert np.allclose(await reranker.run(pairs), list(stock.score(pairs)), atol=1e-6, rtol=0)


async def test_scores_equal_llamaindex_sentence_transformer_rerank(reranker, reranker_dir, pairs):
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    query = pairs[0][0]
    passages = [passage for q, passage in pairs if q == query]
    stock = SentenceTransformerRerank(model=str(reranker_dir), top_n=len(passages), device="cpu")
    nodes = [NodeWithScore(node=TextNode(text=p, id_=str(i))) for i, p in enumerate(passages)]
    reranked = stock.postprocess_nodes(nodes, query_bundle=QueryBundle(query))
    stock_scores = {n.node.node_id: n.score for n in reranked}
    ours = await reranker.run([(query, p) for p in passages])
    assert np.allclose(ours, [stock_scores[str(i)] for i in range(len(passages))], atol=1e-6, rtol=0)


async def test_order_is_preserved(reranker, pairs):
    forward = await reranker.run(pairs)
    backward = await reranker.run(pairs[::-1])
    assert np.allclose(backward[::-1], forward, atol=1e-6, rtol=0)


async def test_a_call_mixing_lengths_scores_each_pair_as_alone(reranker, reranker_dir, pairs):
    """The engine sorts a call's pairs by length for its forward passes and restores the order:
    each score is the pair's own (as when scored alone), whatever else rode in the call."""
    mixed = [pairs[-2], *pairs, pairs[0]]  # short, long, ..., short, empty query, long
    alone = [float(CrossEncoder(str(reranker_dir)).predict([pair])[0]) for pair in mixed]
    assert np.allclose(await reranker.run(mixed), alone, atol=1e-5, rtol=0)


async def test_errors(reranker, tmp_path):
    with pytest.raises(EmptyBatch):
        await reranker.run([])
    with pytest.raises(InvalidRequest, match="pairs of strings"):
        await reranker.run([("only one",)])
    with pytest.raises(ModelNotFound):
        CrossEncoderReranker(tmp_path / "missing")
    health = await reranker.health()
    assert health.ok and reranker.kind == "rerank"


def test_a_shallower_build_keeps_the_first_layers(reranker_dir: Path, tmp_path: Path):
    shallow = build_reranker(tmp_path / "l2", layers=2)
    config = json.loads((shallow / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and json.loads((shallow / STAMP).read_text())["layers"] == 2
    full, cut = load_file(reranker_dir / "model.safetensors"), load_file(shallow / "model.safetensors")
    assert {name for name in full if ".layer.2." in name} and not {name for name in cut if ".layer.2." in name}
    for name, weight in cut.items():  # the same embeddings, first two layers and head
        assert np.array_equal(weight.numpy(), full[name].numpy()), name
    assert not _is_built(shallow, 6) and _is_built(shallow, 2)  # a six-layer build never takes it
    with pytest.raises(ValueError, match="layers=7"):
        build_reranker(tmp_path / "l7", layers=7)
