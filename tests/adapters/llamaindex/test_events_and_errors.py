"""LlamaIndex instrumentation sees what it sees on the stock engine: the same events, with the
same payloads, in spans named and nested as stock's (every span closed); bad input fails as
stock fails, without hanging and without touching other queries."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import pytest

import accel

from .conftest import Recorder, make_llm

QUESTION = "music at dawn"
TREE_WINDOW = 110


@dataclass(frozen=True)
class Fired:
    """An event, the methods of its span and that span's ancestors (outermost first), and the
    id of the outermost one (its query's)."""

    event: Any
    path: tuple[str, ...]
    root: str

    @property
    def key(self) -> tuple[str, str]:
        return self.event.class_name(), self.path[-1]


def _method(span_id: str) -> str:
    """`Class.method` of a span id (`Class.method-<uuid>`)."""
    return span_id[: -len("-00000000-0000-0000-0000-000000000000")]


def event_tree(log: list[tuple[Any, ...]]) -> list[Fired]:
    """The events of a query with their span paths, checking that the tree is coherent: a span
    enters under an open parent, an event fires in an open span, every span exits."""
    open_spans: dict[str, str | None] = {}
    fired = []
    for entry in log:
        if entry[0] == "enter":
            assert entry[2] is None or entry[2] in open_spans, f"{entry[1]} entered under a closed span"
            open_spans[entry[1]] = entry[2]
        elif entry[0] in ("exit", "drop"):
            assert entry[0] == "exit", f"{entry[1]} dropped"
            del open_spans[entry[1]]
        else:
            event, path, span, root = entry[1], [], entry[1].span_id, entry[1].span_id
            assert span in open_spans, f"{event.class_name()} fired outside an open span"
            while span is not None:
                path.append(_method(span))
                root, span = span, open_spans[span]
            fired.append(Fired(event, tuple(reversed(path)), root))
    assert not open_spans, f"spans left open: {list(open_spans)}"
    return fired


def nests_like(ours: tuple[str, ...], stock: tuple[str, ...]) -> bool:
    """Our span path is stock's with some of its inner spans left out (e.g. `_retrieve`)."""
    remaining = iter(stock)
    return all(method in remaining for method in ours)


def per_span(fired: list[Fired]) -> Counter:
    """Each span's events in order: the ordering that holds when accel runs side by side what
    stock runs one after the other."""
    spans: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in fired:
        spans[(f.event.span_id, f.path[-1])].append(f.key[0])
    return Counter((method, tuple(names)) for (_, method), names in spans.items())


class Close(float):
    """A score or vector component equal to another within 1e-4: batched embedding moves them
    by float noise, which rounding turns into a difference whenever a value sits on a rounding
    boundary (a fresh-clone run failed so on another test's scores: 0.4285 against 0.4284)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and abs(self - other) <= 1e-4

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]  # equal values may differ: never a key


def same_items(ours: list[Any], stock: list[Any]) -> bool:
    """The same items in any order, each matched once with `==` (payloads hold `Close` values,
    so they cannot be sorted or counted)."""
    left = list(stock)
    for item in ours:
        match = next((i for i, other in enumerate(left) if other == item), None)
        if match is None:
            return False
        del left[match]
    return not left


def usage(response: Any) -> tuple[Any, ...]:
    """What observability handlers read token usage from: the SDK response's `usage` (cached
    tokens aside: the prefix cache holds what the other system's requests left) and the token
    counts in `additional_kwargs`."""
    raw = response.raw
    sent = None if raw is None else (type(raw).__name__, raw.usage.prompt_tokens, raw.usage.completion_tokens, raw.model)
    return sent, response.additional_kwargs


def payload(event: Any) -> Any:
    """What a handler reads from each event, in comparable form (vectors and scores `Close`)."""
    name = event.class_name()
    nodes = [(n.node.node_id, Close(n.score or 0)) for n in getattr(event, "nodes", None) or []]
    fields: dict[str, Any] = {
        "QueryStartEvent": lambda: str(event.query),
        "QueryEndEvent": lambda: str(event.response),
        "RetrievalStartEvent": lambda: str(event.str_or_query_bundle),
        "RetrievalEndEvent": lambda: (str(event.str_or_query_bundle), nodes),
        "EmbeddingStartEvent": lambda: event.model_dict,
        "EmbeddingEndEvent": lambda: (event.chunks, [[Close(x) for x in v] for v in event.embeddings]),
        "SynthesizeStartEvent": lambda: str(event.query),
        "SynthesizeEndEvent": lambda: (str(event.query), str(event.response)),
        "GetResponseStartEvent": lambda: (event.query_str, event.text_chunks),
        "LLMPredictStartEvent": lambda: (event.template.format(**event.template_args), event.template_args),
        "LLMPredictEndEvent": lambda: event.output,
        "LLMCompletionStartEvent": lambda: (event.prompt, event.additional_kwargs, event.model_dict),
        "LLMCompletionEndEvent": lambda: (event.prompt, event.response.text, usage(event.response)),
        "LLMChatStartEvent": lambda: ([(m.role, m.content) for m in event.messages], event.model_dict),
        "LLMChatEndEvent": lambda: ([(m.role, m.content) for m in event.messages], event.response.message.content,
                                    usage(event.response)),
    }
    return name, fields.get(name, lambda: None)()


def _engine(pattern: str, index: Any, llm: Any, reranker_dir: Any, make: Any, memory_index: Any = None) -> Any:
    """The app of `pattern`; `make(**options)` makes an LLM with other options."""
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import QueryFusionRetriever

    if pattern == "compact_rerank":
        rerank = SentenceTransformerRerank(model=str(reranker_dir), top_n=2, device="cpu")
        return index.as_query_engine(llm=llm, similarity_top_k=3, node_postprocessors=[rerank])
    if pattern == "in_memory":  # the store searched by its own code, inside the lowered retriever
        return memory_index.as_query_engine(llm=llm, similarity_top_k=2)
    if pattern == "chat_compact":
        return index.as_query_engine(llm=make(is_chat_model=True), similarity_top_k=2)
    if pattern == "tree_levels":  # a window too small for all chunks: summaries of summaries
        return index.as_query_engine(llm=make(context_window=TREE_WINDOW), similarity_top_k=5, response_mode="tree_summarize")
    if pattern == "fusion":
        fusion = QueryFusionRetriever([index.as_retriever(similarity_top_k=3)], llm=llm, num_queries=3,
                                      similarity_top_k=3, use_async=False)
        return RetrieverQueryEngine.from_args(fusion, llm=llm)
    if pattern == "fusion_rerank":  # every chunk kept: the rerank scores ahead
        fusion = QueryFusionRetriever([index.as_retriever(similarity_top_k=3)], llm=llm, num_queries=3,
                                      similarity_top_k=9, use_async=False)
        rerank = SentenceTransformerRerank(model=str(reranker_dir), top_n=2, device="cpu")
        return RetrieverQueryEngine.from_args(fusion, llm=llm, node_postprocessors=[rerank])
    return index.as_query_engine(llm=llm, similarity_top_k=3, response_mode=pattern)


async def _traces(pattern: str, pg_index: Any, llm: Any, reranker_dir: Any, llm_proxy: Any, vllm_server: Any,
                  recorder: Recorder, memory_index: Any = None) -> list[tuple[str, list[Fired], list[Fired]]]:
    """(entry point, stock's events, accel's events) for `query` and `aquery` of one app."""
    engine = _engine(pattern, pg_index, llm, reranker_dir, lambda **options: make_llm(llm_proxy, vllm_server, **options),
                     memory_index)
    fast = accel.wrap(engine)
    fast.query(QUESTION)  # warm: the first query builds templates and starts engines
    recorder.take_log()
    runs = []
    for entry in ("query", "aquery"):
        logs = []
        for app in (engine, fast):
            result = app.query(QUESTION) if entry == "query" else await app.aquery(QUESTION)
            assert result.response
            logs.append(event_tree(recorder.take_log()))
        runs.append((entry, *logs))
    return runs


@pytest.mark.engines
@pytest.mark.parametrize("pattern", ["compact_rerank", "chat_compact", "refine", "tree_summarize", "in_memory"])
async def test_events_and_spans_as_stock(pattern: str, pg_index: Any, memory_index: Any, llm: Any, reranker_dir: Any,
                                         llm_proxy: Any, vllm_server: Any, recorder: Recorder) -> None:
    """One LLM call at a time, as stock: the same events in the same order, each in a span of
    the same method, nested as stock's (some inner spans left out), with the same payloads."""
    traces = await _traces(pattern, pg_index, llm, reranker_dir, llm_proxy, vllm_server, recorder, memory_index)
    for entry, stock, ours in traces:
        assert [f.key for f in ours] == [f.key for f in stock], entry
        for mine, theirs in zip(ours, stock, strict=True):
            assert nests_like(mine.path, theirs.path), (entry, mine.path, theirs.path)
            assert payload(mine.event) == payload(theirs.event), entry
    assert {"EmbeddingEndEvent", "LLMPredictEndEvent", "SynthesizeEndEvent"} <= {f.key[0] for f in ours}


@pytest.mark.engines
@pytest.mark.parametrize("pattern", ["fusion", "fusion_rerank", "tree_levels"])
async def test_events_and_spans_as_stock_up_to_overlap(pattern: str, pg_index: Any, llm: Any, reranker_dir: Any,
                                                       llm_proxy: Any, vllm_server: Any, recorder: Recorder) -> None:
    """Calls stock makes one after the other and accel side by side: a fusion retriever's
    sub-retrievals run while the next queries decode, a tree level's summaries together. The
    same events in spans of the same methods, nested as stock's, each span's events in stock's
    order, the same payloads; the query generation's end event carries the text decoded until
    the retriever had all its queries (the rest is not generated)."""
    for entry, stock, ours in await _traces(pattern, pg_index, llm, reranker_dir, llm_proxy, vllm_server, recorder):
        assert Counter(f.key for f in ours) == Counter(f.key for f in stock), entry
        assert per_span(ours) == per_span(stock), entry
        for mine in ours:
            assert any(nests_like(mine.path, t.path) for t in stock if t.key == mine.key), (entry, mine.path)
        ended = [f.event for f in ours if f.key[0] == "LLMCompletionEndEvent" and "QueryFusionRetriever" in f.path[-2]]
        stock_ended = [f.event for e in ended for f in stock if f.key[0] == "LLMCompletionEndEvent" and f.event.prompt == e.prompt]
        assert len(ended) == len(stock_ended) == pattern.startswith("fusion")
        assert all(theirs.response.text.startswith(mine.response.text) for mine, theirs in zip(ended, stock_ended))
        assert same_items([payload(f.event) for f in ours if f.event not in ended],
                          [payload(f.event) for f in stock if f.event not in stock_ended]), entry
    if pattern == "tree_levels":
        assert sum(f.key[0] == "LLMPredictEndEvent" for f in ours) > 2  # two levels at least


@pytest.mark.engines
async def test_concurrent_queries_keep_their_own_span_trees(pg_index: Any, llm: Any, reranker_dir: Any,
                                                            recorder: Recorder) -> None:
    """Queries batched together report into their own trees: every event in an open span of its
    own query, every span closed, each query's events those of one stock query."""
    engine = _engine("compact_rerank", pg_index, llm, reranker_dir, None)
    await engine.aquery(QUESTION)
    stock = Counter(f.key for f in event_tree(recorder.take_log()))
    fast = accel.wrap(engine)
    questions = [QUESTION, "baking bread", "a bridge over water at night"]
    await asyncio.gather(*(fast.aquery(q) for q in questions))
    trees: dict[str, Counter] = defaultdict(Counter)
    for f in event_tree(recorder.take_log()):
        trees[f.root][f.key] += 1
    assert list(trees.values()) == [stock] * len(questions)


@pytest.mark.engines
async def test_bad_input_fails_like_stock_and_spares_others(pg_index: Any, llm: Any) -> None:
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=2)
    fast = accel.wrap(engine)
    with pytest.raises(Exception) as stock:
        await engine.aquery(None)
    good = asyncio.ensure_future(fast.aquery("music at dawn"))
    with pytest.raises(Exception) as ours:
        await asyncio.wait_for(fast.aquery(None), 120)
    assert type(ours.value) is type(stock.value)
    assert (await asyncio.wait_for(good, 120)).response == (await engine.aquery("music at dawn")).response


@pytest.mark.engines
@pytest.mark.parametrize("context_window", [2048, 100_000])
def test_prompt_longer_than_the_context_raises_the_stock_error(pg_index: Any, llm_proxy: Any, vllm_server: Any,
                                                               context_window: int) -> None:
    """A window the app knows is too small: LlamaIndex's prompt helper raises ValueError. A
    window larger than the server's: the server's 400, which the stock OpenAI client raises as
    `openai.BadRequestError`; accel raises that same type (its PromptTooLong as the cause)."""
    from accel.engines.errors import PromptTooLong

    llm = make_llm(llm_proxy, vllm_server, context_window=context_window, max_retries=0)
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=2)
    question = "bread " * 3000
    with pytest.raises(Exception) as stock:
        engine.query(question)
    with pytest.raises(Exception) as ours:
        accel.wrap(engine).query(question)
    assert type(ours.value) is type(stock.value)
    assert str(ours.value) == str(stock.value) or isinstance(ours.value.__cause__, PromptTooLong)
    if context_window > 2048:
        import openai

        assert isinstance(ours.value, openai.BadRequestError) and ours.value.status_code == 400
