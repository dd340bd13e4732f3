"""The embedder returns, item for item, what sentence-transformers, LangChain and LlamaIndex
compute for the same texts on the same model."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from accel.engines.embeddings import EmbedRequest, SentenceTransformerEmbedder
from accel.engines.errors import EmptyBatch, InvalidRequest, ModelNotFound

pytestmark = pytest.mark.engines
ATOL = 1e-6


@pytest.fixture(scope="module")
def reference(minilm_path: Path) -> SentenceTransformer:
    return SentenceTransformer(str(minilm_path), device="cpu")


def close(actual: list[list[float]], expected) -> bool:
    return np.allclose(np.asarray(actual), np.asarray(expected), atol=ATOL, rtol=0)


async def test_plain_texts_equal_sentence_transformers_encode(embedder, reference, texts):
    vectors = await embedder.run(texts)
    assert len(vectors) == len(texts)
    assert all(isinstance(v, list) and len(v) == embedder.dimension == 384 for v in vectors)
    assert close(vectors, reference.encode(texts))


async def test_normalized_requests_equal_normalized_encode(embedder, reference, texts):
    vectors = await embedder.run([EmbedRequest(t, normalize=True) for t in texts])
    assert close(vectors, reference.encode(texts, normalize_embeddings=True))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


async def test_matches_langchain_huggingface_embeddings(embedder, minilm_path, texts):
    from langchain_huggingface import HuggingFaceEmbeddings

    stock = HuggingFaceEmbeddings(model_name=str(minilm_path), model_kwargs={"device": "cpu"})
    with_newlines = [*texts, "first line\nsecond line"]
    # LangChain replaces newlines before encoding; an adapter sends the replaced text.
    ours = await embedder.run([t.replace("\n", " ") for t in with_newlines])
    assert close(ours, stock.embed_documents(with_newlines))
    [query_vector] = await embedder.run([texts[0]])
    assert close([query_vector], [stock.embed_query(texts[0])])


async def test_matches_llamaindex_huggingface_embedding(embedder, minilm_path, texts):
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    stock = HuggingFaceEmbedding(model_name=str(minilm_path), device="cpu")
    ours = await embedder.run([EmbedRequest(t, normalize=True) for t in texts])
    assert close(ours, stock.get_text_embedding_batch(texts))
    [query_vector] = await embedder.run([EmbedRequest(texts[1], normalize=True)])
    assert close([query_vector], [stock.get_query_embedding(texts[1])])


async def test_llamaindex_instruction_is_a_prompt(embedder, minilm_path, texts):
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    stock = HuggingFaceEmbedding(model_name=str(minilm_path), device="cpu", query_instruction="query: ")
    ours = await embedder.run([EmbedRequest(texts[2], normalize=True, prompt="query: ")])
    assert close(ours, [stock.get_query_embedding(texts[2])])
    plain = await embedder.run([EmbedRequest(texts[2], normalize=True)])
    assert not close(ours, plain)


async def test_order_is_preserved_under_permutation(embedder, texts):
    baseline = await embedder.run(texts)
    order = list(range(len(texts)))
    random.Random(7).shuffle(order)
    shuffled = await embedder.run([texts[i] for i in order])
    assert close(shuffled, [baseline[i] for i in order])


async def test_mixed_option_batch_equals_separate_runs(embedder, texts):
    requests = [
        EmbedRequest(text, normalize=i % 2 == 0, prompt="query: " if i % 3 == 0 else None)
        for i, text in enumerate(texts)
    ]
    mixed = await embedder.run(requests)
    one_by_one = [(await embedder.run([request]))[0] for request in requests]
    assert close(mixed, one_by_one)


async def test_batches_larger_than_max_batch(minilm_path, reference, texts):
    async with SentenceTransformerEmbedder(minilm_path, max_batch=4) as small:
        assert close(await small.run(texts), reference.encode(texts))


async def test_health_and_names(embedder):
    health = await embedder.health()
    assert health.ok and health.engine == embedder.name == "all-MiniLM-L6-v2"
    assert embedder.kind == "embed"


async def test_empty_batch_is_a_typed_error(embedder):
    with pytest.raises(EmptyBatch) as info:
        await embedder.run([])
    assert info.value.engine == embedder.name and info.value.remedy


async def test_non_text_item_is_invalid(embedder):
    with pytest.raises(InvalidRequest):
        await embedder.run(["ok", 42])


def test_missing_path_names_cause_and_remedy(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelNotFound) as info:
        SentenceTransformerEmbedder(missing)
    assert str(missing) in info.value.cause and info.value.remedy
    assert isinstance(info.value, FileNotFoundError)


def test_uncached_hub_name_is_not_found():
    with pytest.raises(ModelNotFound, match="local Hugging Face cache"):
        SentenceTransformerEmbedder("accel-tests/not-a-cached-model")


async def test_dimension_needs_a_started_engine(minilm_path):
    from accel.engines.errors import EngineUnavailable

    engine = SentenceTransformerEmbedder(minilm_path)
    with pytest.raises(EngineUnavailable):
        engine.dimension
    await engine.start()
    try:
        assert engine.dimension == 384
    finally:
        await engine.stop()


async def test_threads_apply_to_the_engine_worker_only(minilm_path, reference, texts):
    import torch

    before = torch.get_num_threads()
    async with SentenceTransformerEmbedder(minilm_path, threads=1) as single:
        assert close(await single.run(texts), reference.encode(texts))
    assert torch.get_num_threads() == before
    with pytest.raises(InvalidRequest):
        SentenceTransformerEmbedder(minilm_path, threads=0)
