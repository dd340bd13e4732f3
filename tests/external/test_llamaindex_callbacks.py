"""LlamaIndex's observability callbacks as its docs use them (tests/external/apps/li_token_counting.py:
a `TokenCountingHandler` and a `LlamaDebugHandler` on `Settings.callback_manager`), stock vs
`accel.wrap` on the real engines: the same token counts (totals and every event's prompt,
completion and counts), the same callback events (type, and the LLM's and embedder's payloads)
in the same order, and the same engine requests, for indexing (`from_documents`, the ingestion
pipeline guide), a query engine (the page's query and streamed query, refine, `aquery`) and a
retriever wrapped alone. And an instrumentation handler on a streamed response sees stock's LLM
events, which fire while its tokens are read.

Before the fix a wrapped compact query's counter read 0 LLM and 0 embedding tokens where stock's
read 788 + 32 and 10: lowered stages do the engine work without the component methods that
report to callback managers. Indexing reports stock's EMBEDDING events from the lowered Embed;
queries and retrievals with a listening handler run the stock code (its engine calls captured),
counted in `explain()`; with no handler they are lowered again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import accel
from accel.adapters.llamaindex import callbacks

from .apps import li_ingestion_pipeline, li_starter, li_token_counting
from .fidelity import assert_same_requests, record

pytestmark = [pytest.mark.engines, pytest.mark.slow]


@pytest.fixture
def counted(llama_settings, base_url, model_name, minilm_path) -> tuple[Any, Any]:
    li_starter.configure(base_url, model_name, minilm_path)
    return li_token_counting.install()


@pytest.fixture
def configured(llama_settings, base_url, model_name, minilm_path) -> None:
    """The starter tutorial's local stand-ins, and no callback handler."""
    li_starter.configure(base_url, model_name, minilm_path)


def events(debug: Any) -> list[tuple[Any, ...]]:
    """The debug handler's event pairs: each type, and what the LLM and embedding events carry."""
    from llama_index.core.callbacks import CBEventType, EventPayload

    seen = []
    for start, end in debug.get_event_pairs():
        payload = {**(start.payload or {}), **(end.payload or {})}
        if start.event_type is CBEventType.LLM:
            sent = payload.get(EventPayload.PROMPT) or [(m.role.value, m.content) for m in payload.get(EventPayload.MESSAGES, [])]
            answer = payload.get(EventPayload.COMPLETION) or payload.get(EventPayload.RESPONSE)
            seen.append(("llm", sent, str(answer)))
        elif start.event_type is CBEventType.EMBEDDING:
            seen.append(("embedding", payload.get(EventPayload.CHUNKS)))
        else:
            seen.append((start.event_type.value,))
    return seen


def nesting(debug: Any) -> list[tuple[str, str]]:
    """Each event's type and its parent's (the debug handler's trace map of the last trace):
    how the events nest."""
    types = {event.id_: event.event_type.value for event in debug.get_events()}
    return sorted((types.get(child, "?"), types.get(parent, parent))
                  for parent, children in debug._trace_map.items() for child in children)


def difference(stock: Any, ours: Any) -> tuple[Any, Any]:
    """The first items where two lists (or dicts' values) differ, for a readable failure."""
    if isinstance(stock, dict):
        key = next((k for k in stock if stock[k] != ours.get(k)), None)
        return key, difference(stock[key], ours.get(key)) if key is not None else None
    if isinstance(stock, list) and isinstance(ours, list):
        i = next((i for i, (a, b) in enumerate(zip(stock, ours)) if a != b), min(len(stock), len(ours)))
        return i, (stock[i:i + 2], ours[i:i + 2])
    return stock, ours


def observed(counter: Any, debug: Any) -> tuple[dict[str, Any], list[tuple[Any, ...]], list[tuple[str, str]]]:
    seen = li_token_counting.counts(counter), events(debug), nesting(debug)
    counter.reset_counts()
    debug.flush_event_logs()
    debug._trace_map = {}
    return seen


def test_token_counting_guide_index(counted, pydoc_dir) -> None:
    """The page's first count: the embedding tokens of building the index, the chunks embedded
    on accel's embedder, reported as stock's `get_text_embedding_batch` reports them."""
    from llama_index.core import VectorStoreIndex

    counter, debug = counted
    wrapped = accel.wrap(VectorStoreIndex)
    assert "Embed (micro-batched)" in wrapped.explain(), wrapped.explain()
    seen = []
    for cls in (VectorStoreIndex, wrapped):
        observed(counter, debug)
        li_token_counting.build_index(str(pydoc_dir), cls)
        seen.append(observed(counter, debug))
    assert seen[1] == seen[0]
    assert seen[0][0]["embedding"] > 0 and any(event[0] == "embedding" for event in seen[0][1])


def test_ingestion_pipeline_guide_counted(counted, minilm_path) -> None:
    """The ingestion guide's pipeline (splitter, title extractor on the LLM, embedding), lowered
    whole: the same embedding and LLM counts and events as stock's run."""
    from llama_index.core import Document

    counter, debug = counted
    seen = []
    for wrap in (lambda p: p, accel.wrap):
        pipeline = wrap(li_ingestion_pipeline.pipeline(minilm_path))
        observed(counter, debug)
        pipeline.run(documents=[Document.example()])
        seen.append(observed(counter, debug))
    assert "Embed" in pipeline.explain(), pipeline.explain()
    assert seen[1] == seen[0]
    assert seen[0][0]["embedding"] > 0 and seen[0][0]["prompt"] > 0


@pytest.mark.parametrize("variant", ["query", "streaming", "refine", "aquery"])
def test_token_counting_guide_queries(counted, pydoc_dir, llm_proxy, questions, variant) -> None:
    counter, debug = counted
    index = li_token_counting.build_index(str(pydoc_dir))
    options = {"streaming": True} if variant == "streaming" else {"response_mode": "refine"} if variant == "refine" else {}
    engine = index.as_query_engine(similarity_top_k=4, **options)
    fast = accel.wrap(engine)
    name = type(engine).__name__

    def ask(app: Any) -> list[Any]:
        seen = []
        for question in questions:
            observed(counter, debug)
            if variant == "aquery":
                text = asyncio.run(app.aquery(question)).response
            elif variant == "streaming":
                text = "".join(app.query(question).response_gen)  # the page finishes the stream
            else:
                text = app.query(question).response
            seen.append((text, *observed(counter, debug)))
        return seen

    counters = callbacks.stock_calls if variant == "streaming" else callbacks.reported_calls
    before = counters[name]
    stock = record(lambda: ask(engine), llm_proxy)
    ours = record(lambda: ask(fast), llm_proxy)
    assert ours.outputs == stock.outputs
    assert all(counts["embedding"] > 0 and counts["prompt"] > 0 and counts["completion"] > 0
               for _, counts, _, _ in stock.outputs)
    assert_same_requests(stock, ours)
    assert counters[name] == before + len(questions)  # lowered, but a streamed response: stock code
    assert "LlamaIndex callback handlers listened" in fast.explain()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_fusion_rerank_refine_counted(counted, pydoc_dir, pg_dsn, reranker_dir, llm_proxy, questions, asynchronous) -> None:
    """The token counter on an advanced RAG composed from the docs' parts (the simple fusion
    retriever's page over the Postgres guide's store, the SentenceTransformerRerank page's
    postprocessor, refine, and the Postgres store): query generation, the sub-query retrievals and embeddings, the
    rerank and the refine calls all lowered, each firing stock's event where stock's method
    would, nested as stock's; the same counts, events, nesting and engine requests."""
    import uuid

    from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex, get_response_synthesizer
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.vector_stores.postgres import PGVectorStore

    from .apps import li_pgvector

    counter, debug = counted
    store = PGVectorStore.from_params(**li_pgvector.connection_strings(pg_dsn), table_name=f"counted_{uuid.uuid4().hex[:8]}",
                                      embed_dim=384)  # the guide's store, without its HNSW settings (run by the store itself)
    index = VectorStoreIndex.from_documents(SimpleDirectoryReader(str(pydoc_dir)).load_data(),
                                            storage_context=StorageContext.from_defaults(vector_store=store))
    fusion = QueryFusionRetriever([index.as_retriever(similarity_top_k=4)], similarity_top_k=8, num_queries=3, use_async=False)
    engine = RetrieverQueryEngine(fusion, response_synthesizer=get_response_synthesizer(response_mode="refine"),
                                  node_postprocessors=[SentenceTransformerRerank(model=reranker_dir, top_n=2)])
    fast = accel.wrap(engine)
    explained = fast.explain()
    assert "QueryFusionRetriever(3 queries" in explained and "SentenceTransformerRerank(top_n=2) -> Rerank" in explained, explained

    loop = asyncio.new_event_loop()  # one loop: PGVectorStore's async engine stays on the loop it first ran on

    def ask(app: Any) -> list[Any]:
        seen = []
        for question in questions[:2]:
            observed(counter, debug)
            response = loop.run_until_complete(app.aquery(question)) if asynchronous else app.query(question)
            counts, fired, nested = observed(counter, debug)
            if asynchronous:  # stock's `_aretrieve` gathers the sub-retrievals: their embeddings end in any order
                counts["embedding_events"].sort()
            seen.append((response.response, counts, fired, nested))
        return seen

    before = callbacks.reported_calls[type(engine).__name__]
    try:
        stock = record(lambda: ask(engine), llm_proxy)
        ours = record(lambda: ask(fast), llm_proxy)
    finally:
        loop.close()
    for theirs, mine in zip(stock.outputs, ours.outputs, strict=True):
        for part, (a, b) in zip(("answer", "counts", "events", "nesting"), zip(theirs, mine, strict=True), strict=True):
            assert b == a, (part, *difference(a, b))
    kinds = [event[0] for event in stock.outputs[0][2]]
    assert {"query", "retrieve", "embedding", "reranking", "synthesize", "templating", "llm"} <= set(kinds), kinds
    # stock's PGVectorStore queries are not recorded (accel's lowered searches are)
    assert (ours.llm, ours.embedded, ours.scored) == (stock.llm, stock.embedded, stock.scored) and ours.searched
    assert callbacks.reported_calls[type(engine).__name__] == before + 2


@pytest.mark.parametrize("mode", ["context", "condense_question", "condense_plus_context"])
def test_chat_engine_guides_counted(counted, pydoc_dir, llm_proxy, mode) -> None:
    """The chat engine guides with the counter: the lowered retriever or query engine inside a
    stock chat engine fires its events under the chat engine's own, as stock's; the same counts,
    events, nesting and engine requests, turn by turn."""
    from llama_index.core import Settings

    from .apps import li_chat_engines

    counter, debug = counted
    index = li_token_counting.build_index(str(pydoc_dir))

    def ask(engine: Any) -> list[Any]:
        seen = []
        for turn in li_chat_engines.CONVERSATIONS[mode]:
            if turn is None:
                engine.reset()
                continue
            observed(counter, debug)
            seen.append((engine.chat(turn).response, *observed(counter, debug)))
        return seen

    before = sum(callbacks.reported_calls.values())
    stock = record(lambda: ask(li_chat_engines.chat_engine(mode, index, Settings.llm)), llm_proxy)
    ours = record(lambda: ask(accel.wrap(li_chat_engines.chat_engine(mode, index, Settings.llm))), llm_proxy)
    for theirs, mine in zip(stock.outputs, ours.outputs, strict=True):
        for part, (a, b) in zip(("answer", "counts", "events", "nesting"), zip(theirs, mine, strict=True), strict=True):
            assert b == a, (part, *difference(a, b))
    assert_same_requests(stock, ours)
    assert sum(callbacks.reported_calls.values()) == before + len(stock.outputs)  # every turn's retrieval lowered


def test_a_failed_query_reports_as_stock(counted, pydoc_dir, base_url, model_name) -> None:
    """A prompt longer than the server's window: the server's 400, raised as the OpenAI
    client's `BadRequestError` by both. The callback events end as stock's do: the LLM's with the
    exception, then an EXCEPTION event from the LLM call's own trace; the enclosing events
    (SYNTHESIZE, QUERY) without it, the exception marked reported; the same nesting."""
    import openai
    from llama_index.core.callbacks import EventPayload
    from llama_index.llms.openai_like import OpenAILike

    counter, debug = counted
    llm = OpenAILike(model=model_name, api_base=base_url, api_key="EMPTY", is_chat_model=True, temperature=0.0,
                     max_tokens=16, context_window=100_000, max_retries=0)
    engine = li_token_counting.build_index(str(pydoc_dir)).as_query_engine(similarity_top_k=2, llm=llm)
    seen = []
    for app in (engine, accel.wrap(engine)):
        debug.flush_event_logs()
        debug._trace_map = {}
        with pytest.raises(openai.BadRequestError):
            app.query("bread " * 3000)
        fired = [(e.event_type.value, type((e.payload or {}).get(EventPayload.EXCEPTION)).__name__) for e in debug.get_events()]
        seen.append((fired, nesting(debug)))
    assert seen[1] == seen[0]
    assert ("llm", "BadRequestError") in seen[0][0] and ("exception", "BadRequestError") in seen[0][0]


def test_retriever_alone_counted(counted, pydoc_dir, questions) -> None:
    counter, debug = counted
    index = li_token_counting.build_index(str(pydoc_dir))
    retriever = index.as_retriever(similarity_top_k=4)
    fast = accel.wrap(retriever)
    assert type(fast) is not type(retriever)  # a lowered drop-in, not the original
    seen = []
    for app in (retriever, fast):
        observed(counter, debug)
        found = [[(n.node.node_id, round(n.score, 4)) for n in app.retrieve(q)] for q in questions]
        seen.append((found, *observed(counter, debug)))
    assert seen[1] == seen[0]
    assert seen[0][1]["embedding"] > 0


def test_queries_are_lowered_again_once_no_handler_listens(counted, pydoc_dir, questions) -> None:
    from llama_index.core import Settings

    counter, debug = counted
    index = li_token_counting.build_index(str(pydoc_dir))
    engine = index.as_query_engine(similarity_top_k=4)
    fast = accel.wrap(engine)
    name = type(engine).__name__
    before = callbacks.reported_calls[name]
    fast.query(questions[0])
    assert callbacks.reported_calls[name] == before + 1
    for handler in (counter, debug):
        Settings.callback_manager.remove_handler(handler)
    assert fast.query(questions[0]).response == engine.query(questions[0]).response
    assert callbacks.reported_calls[name] == before + 1


def collapsed(fired: list[Any]) -> list[str]:
    """Event names, a run of one name counted once."""
    names = [type(e).__name__ for e in fired]
    return [name for i, name in enumerate(names) if i == 0 or name != names[i - 1]]


def test_instrumentation_on_a_streamed_response(configured, pydoc_dir, questions) -> None:
    """An event handler (OpenInference-style) on the page's streamed query: the LLM's start,
    in-progress and end events fire while the tokens are read, after the query returned, as
    stock's (in-progress events counted as a run: the server may coalesce tokens), their deltas
    the response's tokens; the earlier refine calls' events before the query returns."""
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler

    fired: list[Any] = []

    class Handler(BaseEventHandler):
        def handle(self, event: Any, **kwargs: Any) -> None:
            fired.append(event)

    index = li_token_counting.build_index(str(pydoc_dir))
    engine = index.as_query_engine(similarity_top_k=4, streaming=True)
    fast = accel.wrap(engine)
    assert not callbacks.listeners(callbacks.components(engine))
    root = get_dispatcher()
    handler = Handler()
    root.add_event_handler(handler)
    try:
        seen = []
        for app in (engine, fast):
            for question in questions:
                fired.clear()
                response = app.query(question)
                returned = len(fired)
                tokens = list(response.response_gen)
                late = fired[returned:]
                deltas = "".join(e.response.delta or "" for e in late if type(e).__name__.endswith("InProgressEvent"))
                seen.append((collapsed(fired[:returned]), collapsed(late), "".join(tokens), deltas))
    finally:
        root.event_handlers.remove(handler)
    stock, ours = seen[:len(questions)], seen[len(questions):]
    assert ours == stock
    assert all("LLMPredictStartEvent" in late and text and text == deltas for _, late, text, deltas in stock)
