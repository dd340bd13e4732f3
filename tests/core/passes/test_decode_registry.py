"""Pass 4 (decode pipelining), the registry, and all passes together on Teola's advanced RAG."""

from __future__ import annotations

from operator import itemgetter

import pytest

from accel.engines.base import Generation, GenerationChunk
from accel.ir import CallOp, Graph, GraphBuilder, ItemsOp, Kind, PassError, Ref, Slot, StreamDecodeOp
from accel.ir.getters import GetItemOp, getter_keys, prefix_window
from accel.passes import PASSES, LLMInfo, PassContext, decode_pipeline, optimize, register_pass, unregister_pass


def expand_embed_score(split: str = "lines") -> Graph:
    b = GraphBuilder()
    q = b.input("question")
    queries = b.llm("rewrite", ["Rewrite three ways: ", Slot("q")], {"q": q}, split=split)
    vectors = b.add(Kind.EMBED, "embed", engine="embed", inputs={"texts": queries}, op=ItemsOp("texts"))
    scores = b.add(Kind.RERANK, "score", engine="rerank", inputs={"vectors": vectors},
                   op=ItemsOp("vectors", request=lambda v, values: (str(v), "q")))
    first = b.add(Kind.CALL, "first", inputs={"q": Ref(queries.node, 0)}, op=CallOp(lambda q: q.upper(), blocking=False))
    both = b.add(Kind.CALL, "both", inputs={"s": scores, "f": first},
                 op=CallOp(lambda s, f: (round(sum(s), 6), f), blocking=False))
    b.output(both)
    return b.build()


async def test_splittable_decode_streams_into_mapped_consumers(run):
    before = expand_embed_score()
    after = decode_pipeline(before, PassContext())
    decode = after.node("rewrite.decode")
    assert decode.kind is Kind.PARTIAL_DECODE and decode.streams and isinstance(decode.op, StreamDecodeOp)
    assert after.node("embed").map_port == "texts" and after.node("embed").streams
    assert after.node("score").map_port == "vectors" and not after.node("score").streams
    assert after.node("first").inputs["q"] == Ref("rewrite.decode#agg", 0)  # keyed reader sees the whole list
    assert after.node("both").inputs["s"] == Ref("score#agg")
    assert before.node("rewrite.decode").kind is Kind.DECODE
    for seed in range(4):  # different delta cuts
        out_before, eng_before = await run(before, {"question": "why?"}, seed)
        out_after, eng_after = await run(after, {"question": "why?"}, seed)
        assert out_after == out_before
        assert eng_after.requests == eng_before.requests


async def test_items_leave_before_the_decode_ends():
    after = decode_pipeline(expand_embed_score(), PassContext())
    op = after.node("rewrite.decode").op
    events: list[str] = []

    async def chunks():
        for delta in ["first q", "uery\nsecond", " query\nthird query"]:
            events.append(f"sent {delta!r}")
            yield GenerationChunk(delta)
        events.append("end")
        yield GenerationChunk("", finished=True, generation=Generation("", 1, 1))

    async for item in op.stream({"prompt": "p"}, chunks()):
        events.append(f"item {item}")
    assert events == [
        "sent 'first q'",
        "sent 'uery\\nsecond'",
        "item ['first query']",
        "sent ' query\\nthird query'",
        "item ['second query']",
        "end",
        "item ['third query']",
    ]


def test_decode_without_batchable_consumers_is_left_alone():
    b = GraphBuilder()
    q = b.input("q")
    b.output(b.llm("list", ["List: ", Slot("q")], {"q": q}, split="comma"))
    after = decode_pipeline(b.build(), PassContext())
    assert after.node("list.decode").kind is Kind.DECODE


def expand_window_embed(window: slice) -> Graph:
    """Query expansion cut by `itemgetter(window)` (as LangChain's multi-query recipes write
    it), then embedded and scored."""
    b = GraphBuilder()
    q = b.input("question")
    queries = b.llm("rewrite", ["Rewrite three ways: ", Slot("q")], {"q": q}, split="lines")
    getter = itemgetter(window)
    kept = b.add(Kind.CALL, "window", inputs={"value": queries}, attrs={"batchable": True, "batch_port": "value"},
                 op=GetItemOp(getter, prefix_window(getter_keys(getter))))
    vectors = b.add(Kind.EMBED, "embed", engine="embed", inputs={"texts": kept}, op=ItemsOp("texts"))
    b.output(b.add(Kind.CALL, "both", inputs={"v": vectors, "kept": kept}, op=CallOp(lambda v, kept: (v, kept), blocking=False)))
    return b.build()


@pytest.mark.parametrize("window", [slice(0, 2), slice(1, None), slice(None, 1), slice(2, 9), slice(1, 1)])
async def test_a_window_of_the_list_streams_its_kept_items(run, window):
    before = expand_window_embed(window)
    after = decode_pipeline(before, PassContext())
    assert after.node("rewrite.decode").kind is Kind.PARTIAL_DECODE
    assert after.node("window").map_port == "value" and after.node("window").streams
    assert after.node("embed").map_port == "texts"
    assert after.node("both").inputs["kept"] == Ref("window#agg")  # whole readers see the getter's value
    for seed in range(4):  # different delta cuts
        out_before, eng_before = await run(before, {"question": "why?"}, seed)
        out_after, eng_after = await run(after, {"question": "why?"}, seed)
        assert out_after == out_before
        assert eng_after.requests == eng_before.requests
    assert [line.split()[1] for line in out_after[1]] == ["0", "1", "2"][window]  # "variant <i> of ..."


def test_a_window_counted_from_the_end_or_leading_nowhere_leaves_the_decode_whole():
    for window in (slice(-2, None), slice(0, 3, 2)):
        assert prefix_window(getter_keys(itemgetter(window))) is None
        graph = expand_window_embed(window)
        assert not graph.node("window").op.positional
        assert decode_pipeline(graph, PassContext()).node("rewrite.decode").kind is Kind.DECODE
    b = GraphBuilder()  # a window read only by local code: streaming would only delay it
    q = b.input("q")
    queries = b.llm("rewrite", ["Rewrite: ", Slot("q")], {"q": q}, split="lines")
    b.output(b.add(Kind.CALL, "window", inputs={"value": queries}, attrs={"batchable": True, "batch_port": "value"},
                   op=GetItemOp(itemgetter(slice(0, 2)), (0, 2))))
    assert decode_pipeline(b.build(), PassContext()).node("rewrite.decode").kind is Kind.DECODE


# ---- registry ----------------------------------------------------------------------------


@pytest.fixture
def custom_pass():
    seen: list[list[str]] = []

    def tag(graph: Graph, context: PassContext) -> Graph:
        g = graph.copy()
        seen.append(list(g.meta["passes"]))
        g.note("tag", "looked")
        return g

    register_pass("tag", tag, after="prune_dependencies")
    yield seen
    unregister_pass("tag")


def test_custom_pass_runs_in_its_place(custom_pass):
    assert list(PASSES)[:2] == ["prune_dependencies", "tag"]
    g = optimize(expand_embed_score())
    assert custom_pass == [["prune_dependencies"]]
    assert g.meta["passes"] == ["prune_dependencies", "tag", "stage_decompose", "prefill_split", "decode_pipeline",
                                "share_requests", "share_prefixes", "deduce_objectives"]
    assert "tag: looked" in g.meta["notes"]
    optimize(expand_embed_score(), disabled=["tag"])
    assert len(custom_pass) == 1


def test_registry_errors_are_typed():
    with pytest.raises(PassError):
        register_pass("prune_dependencies", lambda g, c: g.copy())
    with pytest.raises(PassError):
        register_pass("x", lambda g, c: g.copy(), after="nope")
    with pytest.raises(PassError, match="unknown pass"):
        optimize(expand_embed_score(), passes=["nope"])
    register_pass("lazy", lambda g, c: g)
    try:
        with pytest.raises(PassError, match="returned its input"):
            optimize(expand_embed_score(), passes=["lazy"])
    finally:
        unregister_pass("lazy")


def test_disabled_passes_are_skipped():
    g = optimize(expand_embed_score(), disabled=["decode_pipeline"])
    assert g.node("rewrite.decode").kind is Kind.DECODE
    assert "decode_pipeline" not in g.meta["passes"]


# ---- everything together -----------------------------------------------------------------


async def test_all_passes_on_advanced_rag_keep_answers_and_requests(rag_template, rag_inputs, run, fake_ctx):
    before = rag_template.transform({"synth": {"n": 3}})
    context = PassContext(profiles={"embed": 2, "vectordb": 2}, safety_tail=2,
                          llm=lambda engine: LLMInfo(fake_ctx.llm(engine).tokenize, block_size=4))
    after = optimize(before, context=context)
    kinds = {n.kind for n in after.nodes()}
    assert {Kind.PARTIAL_DECODE, Kind.PARTIAL_PREFILL, Kind.FULL_PREFILL, Kind.AGGREGATE} <= kinds
    assert not [e for e in after.edges() if not e[2] and not after.is_pinned(e[0], e[1]) and e != ("index.ingest", "retrieve.search", False)]
    for seed in range(3):
        out_before, eng_before = await run(before, rag_inputs, seed)
        out_after, eng_after = await run(after, rag_inputs, seed)
        assert out_after == out_before
        for engine in ("embed", "vectordb", "rerank"):
            assert sorted(map(repr, eng_after.requests[engine])) == sorted(map(repr, eng_before.requests[engine]))
        prompts = [r for r in eng_after.requests["llm"] if r.prompt_token_ids is None]
        assert prompts == eng_before.requests["llm"]


async def test_an_op_that_streams_itself_is_pipelined_by_the_pass(run):
    """A framework's own parser (LlamaIndex's query lines) stays the op's: the adapter marks a
    plain Decode splittable and the pass swaps in the op's `streamed()` form."""
    from dataclasses import dataclass

    from accel.ir import DecodeOp

    @dataclass(frozen=True)
    class Upper:
        inner: DecodeOp

        async def requests(self, values):
            return await self.inner.requests(values)

        def output(self, values, results):
            return [line.upper() for line in self.inner.output(values, results)]

        def streamed(self):
            return UpperStream(self)

    @dataclass(frozen=True)
    class UpperStream:
        plain: Upper

        async def requests(self, values):
            return await self.plain.requests(values)

        async def stream(self, values, chunks):
            async for item in StreamDecodeOp(self.plain.inner, "lines").stream(values, chunks):
                yield [line.upper() for line in item]

        def output(self, values, results):
            return [[line] for line in self.plain.output(values, results)]

    before = expand_embed_score()
    node = before.node("rewrite.decode")
    before.replace(node.replace(op=Upper(node.op), attrs={**node.attrs, "splittable": "upper lines"}))
    after = decode_pipeline(before, PassContext())
    decode = after.node("rewrite.decode")
    assert decode.kind is Kind.PARTIAL_DECODE and isinstance(decode.op, UpperStream)
    assert after.node("embed").map_port == "texts"
    out_before, eng_before = await run(before, {"question": "why?"})
    out_after, eng_after = await run(after, {"question": "why?"})
    assert out_after == out_before and eng_after.requests == eng_before.requests
