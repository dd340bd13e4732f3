"""Pass 1 (dependency pruning) and pass 2 (stage decomposition): before/after and equivalence."""

from __future__ import annotations

from accel.ir import CallOp, Graph, GraphBuilder, ItemsOp, Kind, Ref, Role, Schedule, Streams
from accel.passes import PassContext, optimize, prune_dependencies, stage_decompose


def snapshot(g: Graph):
    return (
        sorted(g.edges()),
        [(n.name, n.kind, dict(n.inputs), dict(n.attrs), n.op) for n in g.nodes()],
        list(g.meta["passes"]),
    )


# ---- prune_dependencies ------------------------------------------------------------------


async def test_prune_detaches_expansion_from_indexing(rag_template, rag_inputs, run):
    before = rag_template.transform()
    assert ("index.ingest", "expand.rewrite.prefill", False) in list(before.edges())
    frozen = snapshot(before)
    after = prune_dependencies(before, PassContext())
    assert snapshot(before) == frozen  # the input graph is untouched
    order_edges = [(s, d) for s, d, data in after.edges() if not data]
    # module order dropped; the ingest side effect now orders only the search on the same store
    assert order_edges == [("index.ingest", "retrieve.search")]
    assert after.node("expand.rewrite.decode").depth != 0
    assert any("index.ingest" in note for note in after.meta["notes"])
    out_before, eng_before = await run(before, rag_inputs)
    out_after, eng_after = await run(after, rag_inputs)
    assert out_after == out_before
    assert eng_after.requests == eng_before.requests


def test_prune_keeps_order_of_opaque_side_effects():
    b = GraphBuilder()
    q = b.input("q")
    log = b.add(Kind.CALL, "log", inputs={"x": q}, op=CallOp(print), attrs={"side_effect": True})
    pure = b.add(Kind.CALL, "pure", inputs={"x": q}, op=CallOp(str))
    use = b.add(Kind.CALL, "use", inputs={"x": q}, op=CallOp(str))
    b.order(log, use)
    b.order(pure, use)
    b.output(use)
    after = prune_dependencies(b.build(), PassContext())
    assert [(s, d) for s, d, data in after.edges() if not data] == [("log", "use")]


# ---- stage_decompose ---------------------------------------------------------------------


def embed_then_score(size: int | None, *, elementwise: bool = True) -> Graph:
    b = GraphBuilder()
    docs = b.input("docs")
    attrs = {"size": size} if size is not None else {}
    vectors = b.add(Kind.EMBED, "embed", engine="embed", inputs={"texts": docs}, op=ItemsOp("texts"), attrs=attrs)
    scores = b.add(
        Kind.RERANK, "score", engine="rerank", inputs={"vectors": vectors},
        op=ItemsOp("vectors", request=lambda v, _: (str(v), "query"), elementwise=elementwise),
    )
    best = b.add(Kind.CALL, "best", inputs={"scores": scores, "docs": docs},
                 op=CallOp(lambda scores, docs: max(zip(scores, docs))[1], blocking=False))
    count = b.add(Kind.CALL, "count", inputs={"v": vectors}, op=CallOp(lambda v: len(v), blocking=False))
    both = b.add(Kind.AGGREGATE, "both", inputs={"best": best, "n": count}, op=CallOp(lambda best, n: (best, n), blocking=False))
    b.output(both)
    return b.build()


DOCS = {"docs": [f"doc {i} " + "y" * (i * 7 % 11) for i in range(10)]}


async def test_configured_size_becomes_explicit_micro_batch_nodes(run):
    before = embed_then_score(size=10)
    after = stage_decompose(before, PassContext(profiles={"embed": 4}))
    names = {n.name for n in after.nodes()}
    assert {"embed#mb0", "embed#mb1", "embed#mb2", "score#mb0", "score#mb1", "score#mb2"} <= names
    assert after.node("score").kind is Kind.AGGREGATE  # the chain ends in a concatenating Aggregate
    assert after.node("embed").kind is Kind.AGGREGATE  # `count` still reads all vectors
    assert after.node("score#mb1").inputs["vectors"] == Ref("embed#mb1")
    assert [after.node(f"embed#mb{j}").attrs["size"] for j in range(3)] == [4, 4, 2]
    assert [n.derived.index for n in after.derived("score", Role.MICRO_BATCH)] == [0, 1, 2]
    # micro-batch j of both stages shares one depth, so their requests batch across queries
    assert len({after.node(f"score#mb{j}").depth for j in range(3)}) == 1
    out_before, eng_before = await run(before, DOCS)
    out_after, eng_after = await run(after, DOCS)
    assert out_after == out_before
    assert sorted(map(repr, eng_after.requests["rerank"])) == sorted(map(repr, eng_before.requests["rerank"]))


async def test_runtime_size_streams_micro_batches_into_mapped_consumers(run):
    before = embed_then_score(size=None)
    after = stage_decompose(before, PassContext(profiles={"embed": 3}))
    embed, score = after.node("embed"), after.node("score")
    assert embed.schedule == Schedule(streams=Streams.SLICES, micro_batch=3) and embed.batch_port == "texts"
    assert score.map_port == "vectors"
    assert after.node("best").inputs["scores"] == Ref("score#agg")
    assert after.node("count").inputs["v"] == Ref("embed#agg")
    for seed in range(3):
        out_before, _ = await run(before, DOCS, seed)
        out_after, eng = await run(after, DOCS, seed)
        assert out_after == out_before
        assert len(eng.requests["embed"]) == 10


def test_no_profile_no_split_and_small_inputs_stay_whole():
    g = embed_then_score(size=10)
    for context in (PassContext(), PassContext(profiles={"embed": 10}), PassContext(profiles={"rerank": 2})):
        after = stage_decompose(g, context)
        assert sorted(n.name for n in after.nodes()) == sorted(n.name for n in g.nodes())


def test_non_elementwise_consumer_is_not_pipelined():
    after = stage_decompose(embed_then_score(size=None, elementwise=False), PassContext(profiles={"embed": 3}))
    assert after.node("embed").schedule == Schedule()
    assert any("no batchable consumer" in note for note in after.meta["notes"])


async def test_optimize_records_passes_and_keeps_output(run):
    before = embed_then_score(size=10)
    after = optimize(before, context=PassContext(profiles={"embed": 4, "rerank": 4}))
    assert after.meta["passes"] == ["prune_dependencies", "stage_decompose", "prefill_split", "decode_pipeline",
                                    "share_requests", "share_prefixes", "deduce_objectives"]
    assert before.meta["passes"] == []
    assert (await run(after, DOCS))[0] == (await run(before, DOCS))[0]


def embed_then_ingest() -> Graph:
    """Ingestion as an adapter lowers it: chunk texts -> Embed -> local attach -> Ingest."""
    b = GraphBuilder()
    docs = b.input("docs")
    vectors = b.add(Kind.EMBED, "embed", engine="embed", inputs={"texts": docs}, op=ItemsOp("texts"))
    rows = b.add(Kind.CALL, "attach", inputs={"docs": docs, "v": vectors},
                 op=CallOp(lambda docs, v: list(zip(v, docs, strict=True)), blocking=False))
    written = b.add(Kind.INGEST, "ingest", engine="vectordb", inputs={"rows": rows},
                    op=ItemsOp("rows", request=lambda row, _: ("ingest", *row), elementwise=False))
    b.output(b.add(Kind.CALL, "done", inputs={"w": written}, op=CallOp(lambda w: sum(w), blocking=False)))
    return b.build()


async def test_chunk_embedding_is_cut_without_a_pipelined_consumer(run):
    """Bulk chunk embedding (its vectors are ingested) runs in micro-batches of the chunk class's
    limit even though nothing downstream is itemwise: the slices interleave with other apps'
    query embeddings. The query class's limit does not apply to it."""
    before = embed_then_ingest()
    after = stage_decompose(before, PassContext(profiles={"embed/chunk": 3, "embed/query": 8}))
    embed = after.node("embed")
    assert embed.schedule == Schedule(streams=Streams.SLICES, micro_batch=3)
    assert after.node("attach").inputs["v"] == Ref("embed#agg")  # the attach step still sees every vector
    out_before, eng_before = await run(before, DOCS)
    out_after, eng_after = await run(after, DOCS)
    assert out_after == out_before == 10
    assert eng_after.requests == eng_before.requests


def test_query_embedding_without_a_pipelined_consumer_stays_whole():
    b = GraphBuilder()
    docs = b.input("docs")
    vectors = b.add(Kind.EMBED, "embed", engine="embed", inputs={"texts": docs}, op=ItemsOp("texts"))
    b.output(b.add(Kind.CALL, "n", inputs={"v": vectors}, op=CallOp(len, blocking=False)))
    after = stage_decompose(b.build(), PassContext(profiles={"embed/chunk": 3, "embed/query": 3}))
    assert after.node("embed").schedule == Schedule()
