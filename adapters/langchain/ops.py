"""Ops of the LangChain lowering: opaque invocations, LCEL plumbing, retrieval primitives and
result shaping. Each rebuilds exactly the object the stock component returns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from accel.adapters.common.rerank_ahead import using
from accel.caller import in_user_pool
from accel.engines.base import Generation, SamplingParams, SearchHit, TableLayout, VectorQuery
from accel.engines.embed_server import ServerEmbedRequest
from accel.engines.embeddings import EmbedRequest
from accel.engines.errors import InvalidRequest

from .messages import plain_message, stock_answer, streamed_metadata

# ---- opaque framework code ---------------------------------------------------------------


@dataclass(frozen=True)
class InvokeOp:
    """Run a component as-is, where stock would run it: `invoke` on the caller's thread for
    sync entry points, `ainvoke` on the caller's loop for async ones (`accel.caller`), with the
    query's child config (a child of the chain's run, tagged as stock tags the step's run) set
    as the current config.
    `first`: the component is the chain's first step, which receives `invoke`'s kwargs.
    `parent`: the run spec (`runs.RunSpec`) of the lowered component it is a step of."""

    runnable: Any
    tag: str | None = None
    first: bool = False
    parent: int = 0

    async def compute(self, values: dict[str, Any]) -> Any:
        kwargs = values["kwargs"] if self.first else {}
        return await run_as_stock(self.runnable, values["value"], values, self.tag, kwargs, self.parent)


def step_config(values: dict[str, Any], tag: str | None, parent: int) -> Any:
    """The config stock hands a step tagged `tag`: a child of its lowered parent's run when
    the query rebuilds runs (`values["runs"]`, a `runs.RunTree`), else of the query's run."""
    from langchain_core.runnables.config import patch_config

    tree = values.get("runs")
    if tree is not None:
        return tree.child_config(parent, tag)
    return patch_config(values["config"], callbacks=values["run"].get_child(tag))


async def run_as_stock(runnable: Any, value: Any, values: dict[str, Any], tag: str | None, kwargs: dict[str, Any],
                       parent: int = 0) -> Any:
    """`runnable` on `value` as a stock sequence runs a step: `ainvoke` on the caller's loop for
    async callers, `invoke` on the caller's thread otherwise, a child run tagged `tag` of its
    parent (`step_config`) with its config as the current one (`set_config_context`)."""
    from langchain_core.runnables.config import set_config_context

    config = step_config(values, tag, parent)
    caller = values["caller"]
    if caller is not None and caller.asynchronous:
        async def step() -> Any:
            with set_config_context(config) as context:
                return await asyncio.create_task(runnable.ainvoke(value, config, **kwargs), context=context)

        return await caller.acall(step)

    def call() -> Any:
        with set_config_context(config) as context:
            return context.run(runnable.invoke, value, config, **kwargs)

    if caller is None:  # a query started without a caller (accel's own runs, benchmarks)
        return await in_user_pool(call)
    return await caller.call(call)


@dataclass(frozen=True)
class BranchOp:
    """RunnableBranch (an Expand node): its conditions run as-is, in order, until one is true;
    the matching branch's sub-template (the default's when none is) runs inside the query, as
    stock runs only the taken branch. Runs are tagged `condition:N` as stock tags them, children
    of the branch's own run (`spec`); the taken branch's runs hang under it (`scopes`)."""

    conditions: tuple[Any, ...]
    templates: tuple[Any, ...]  # one per condition, then the default's
    scopes: tuple[int, ...] = ()  # their run scopes (`runs.RunPlan.scope`), in the same order
    spec: int = 0

    async def expand(self, values: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        taken = len(self.conditions)
        for i, condition in enumerate(self.conditions):
            if await run_as_stock(condition, values["value"], values, f"condition:{i + 1}", {}, self.spec):
                taken = i
                break
        if values.get("runs") is not None:
            values["runs"].attach(self.scopes[taken], self.spec)
        inputs = {name: values[name] for name in ("config", "run", "caller", "runs")}
        return self.templates[taken], {"input": values["value"], "kwargs": {}, **inputs}


@dataclass(frozen=True)
class EachOp:
    """RunnableEach (`runnable.map()`, an Expand node): its bound runnable's sub-template once
    per item of the input list, side by side, where stock hands the items to the bound's
    `batch` (a thread pool sized by the CPU count when called synchronously). Each item's runs
    hang under the RunnableEach's own run (`spec`), untagged, as stock's `get_child()` makes
    them: one `runs.RunTree` per item, rooted there."""

    templates: tuple[Any, ...]  # the bound runnable's sub-template
    scope: int  # its run scope
    spec: int = 0

    async def expand_each(self, values: dict[str, Any]) -> list[Any]:
        from accel.ir.expand import Expansion

        items = list(values["value"])  # stock's `list(inputs)`: same result, same errors
        shared = {name: values[name] for name in ("config", "run", "caller")}
        tree = values.get("runs")
        expansions = []
        for item in items:
            runs = tree.nested(self.scope, self.spec) if tree is not None else None
            inputs = {"input": item, "kwargs": {}, "runs": runs, **shared}
            expansions.append(Expansion(self.templates[0], inputs, watcher=runs, on_end=None if runs is None else runs.end))
        return expansions

    def max_concurrency(self, values: dict[str, Any]) -> int | None:
        """The call's `max_concurrency`, which stock's `batch` of the items keeps to (its
        thread pool's size, or `abatch`'s gather limit): a cap the user set binds here too."""
        config = values.get("config") or {}
        return config.get("max_concurrency")


@dataclass(frozen=True)
class FnOp:
    """Cheap deterministic plumbing run inline on the loop: `fn(**values)`."""

    fn: Callable[..., Any]
    blocking: bool = False

    def compute(self, values: dict[str, Any]) -> Any:
        return self.fn(**values)


def require_dict(value: Any) -> dict[str, Any]:
    """RunnableAssign's check of its input, before its mapper runs (stock's error)."""
    if not isinstance(value, dict):
        raise ValueError("The input to RunnablePassthrough.assign() must be a dict.")
    return value


@dataclass(frozen=True)
class RequireDictOp:
    """`require_dict` on port "value": the value itself, so its parts stream through."""

    blocking: ClassVar[bool] = False
    value_port: ClassVar[str] = "value"

    def compute(self, values: dict[str, Any]) -> Any:
        return require_dict(values["value"])


@dataclass(frozen=True)
class AssignMergeOp:
    """RunnableAssign: the input dict ("value") updated with the mapper's outputs ("mapped");
    streamed as stock streams it, the input's keys the mapper leaves, then the mapper's."""

    blocking: ClassVar[bool] = False

    def compute(self, values: dict[str, Any]) -> Any:
        return {**require_dict(values["value"]), **values["mapped"]}

    def dict_parts(self, ports: tuple[str, ...]) -> tuple[tuple[str, str | None], ...]:
        return (("value", None), ("mapped", None))


# ---- retrieval -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbedTextsOp:
    """Embed: one request per distinct text of `values[port]`; the value lists one vector per
    input text. Identical texts of one query are embedded once. A plain string is treated as a
    one-text list. HuggingFaceEmbeddings replaces newlines by spaces first; a server client
    (`server`: the fields its requests carry beside `input`, OpenAIEmbeddings) sends the
    text as it is."""

    port: str
    normalize: bool = False
    single: bool = False
    elementwise: bool = True
    server: tuple[tuple[str, Any], ...] | None = None

    def _texts(self, values: dict[str, Any]) -> list[Any]:
        texts = values[self.port]
        return [self._sent(t) for t in ([texts] if self.single else list(texts))]

    def _sent(self, text: Any) -> Any:
        """The text as the client sends it."""
        if self.server is None:
            return _clean(text)
        if not isinstance(text, str):  # the stock client's request would not be a text's
            raise InvalidRequest("embed-server", f"cannot embed a {type(text).__name__}", "pass the query as a str")  # stock answers
        return text

    async def requests(self, values: dict[str, Any]) -> list[EmbedRequest | ServerEmbedRequest]:
        unique = dict.fromkeys(self._texts(values))
        if self.server is not None:
            return [ServerEmbedRequest(text, self.server) for text in unique]
        return [EmbedRequest(text, normalize=self.normalize) for text in unique]

    def output(self, values: dict[str, Any], results: list[list[float]]) -> Any:
        texts = self._texts(values)
        by_text = dict(zip(dict.fromkeys(texts), results, strict=True))
        vectors = [by_text[t] for t in texts]
        return vectors[0] if self.single else vectors


def _clean(text: Any) -> Any:
    """HuggingFaceEmbeddings' own cleaning, with its error for a non-str (AttributeError)."""
    return text.replace("\n", " ")


@dataclass(frozen=True)
class SearchOp:
    """Search: one nearest-neighbour query per vector of `values[port]`; the value is one list
    of `Document`s per vector, as the vector store's `similarity_search_by_vector` returns."""

    port: str
    collection: TableLayout
    k: int
    metric: str = "cosine"
    filter: dict[str, Any] | None = None
    single: bool = False
    elementwise: bool = True

    async def requests(self, values: dict[str, Any]) -> list[VectorQuery]:
        vectors = [values[self.port]] if self.single else list(values[self.port])
        return [VectorQuery(vector=v, k=self.k, collection=self.collection, metric=self.metric, filter=self.filter) for v in vectors]

    def output(self, values: dict[str, Any], results: list[list[SearchHit]]) -> Any:
        docs = [[to_document(hit) for hit in hits] for hits in results]
        return docs[0] if self.single else docs


def to_document(hit: SearchHit) -> Any:
    from langchain_core.documents import Document

    return Document(id=hit.id, page_content=hit.text, metadata=dict(hit.metadata))


@dataclass(frozen=True)
class RerankOp:
    """CrossEncoderReranker.compress_documents: score (query, page_content) pairs, keep the
    `top_n` best in descending score (stable for ties, as `sorted` is)."""

    top_n: int
    elementwise: bool = False

    async def requests(self, values: dict[str, Any]) -> list[tuple[str, str]]:
        return [(values["query"], doc.page_content) for doc in values["docs"]]

    def output(self, values: dict[str, Any], results: list[float]) -> list[Any]:
        return top_n_by_score(values["docs"], results, self.top_n)


def top_n_by_score(docs: list[Any], scores: list[float], top_n: int) -> list[Any]:
    """CrossEncoderReranker's selection: the `top_n` best in descending score, stable for ties."""
    ranked = sorted(zip(docs, scores, strict=True), key=lambda pair: pair[1], reverse=True)
    return [doc for doc, _ in ranked[:top_n]]


@dataclass(frozen=True)
class CompressOp:
    """ContextualCompressionRetriever's compression after its (lowered) base retrieval, run as
    stock's `_get_relevant_documents` / `_aget_relevant_documents` run it: no documents, no
    call (`[]`); else `list(compressor.compress_documents(docs, query, callbacks=...))` on
    the caller's thread, or `acompress_documents` on the caller's loop for async callers, with
    `callbacks` the child manager of the retriever's run (`spec`), so the compressor's own runs
    hang under it, and as current config the one the retriever was invoked with. With a score
    sheet (`values["sheet"]`, rerank ahead) its reranker calls may be answered from it."""

    compressor: Any
    spec: int = 0
    alone: bool = False
    """The retriever is the wrapped object itself (no parent step sets its config)."""

    async def compute(self, values: dict[str, Any]) -> Any:
        from langchain_core.runnables.config import set_config_context

        docs, query = values["docs"], values["query"]
        if not docs:
            return []
        context_config, callbacks = _compression_config(values, self.spec, self.alone)
        compressor, caller, sheet = self.compressor, values["caller"], values.get("sheet")
        if caller is not None and caller.asynchronous:
            compress = compressor.acompress_documents

            async def step() -> Any:
                managers = _async_manager(callbacks)
                with using(sheet):
                    if context_config is None:
                        return list(await compress(docs, query, callbacks=managers))
                    with set_config_context(context_config) as context:
                        return list(await asyncio.create_task(compress(docs, query, callbacks=managers), context=context))

            return await caller.acall(step)

        def call() -> Any:
            with using(sheet):
                if context_config is None:
                    return list(compressor.compress_documents(docs, query, callbacks=callbacks))
                with set_config_context(context_config) as context:
                    return list(context.run(compressor.compress_documents, docs, query, callbacks=callbacks))

        if caller is None:  # a query started without a caller (accel's own runs, benchmarks)
            return await in_user_pool(call)
        return await caller.call(call)


def _compression_config(values: dict[str, Any], spec: int, alone: bool) -> tuple[Any, Any]:
    """(the current config stock's compressor runs under, None to leave the caller's as it
    is; the callback manager it is handed). Stock's retriever sets no config of its own: in a
    chain the current one is the config its parent step handed it (its run's config); wrapped
    alone (`alone`), whatever the caller's context holds."""
    config = step_config(values, None, spec)
    tree = values.get("runs")
    if alone:
        return None, config["callbacks"]
    return (config if tree is None else tree._run_of(spec).config), config["callbacks"]


def _async_manager(manager: Any) -> Any:
    """The AsyncCallbackManager stock's async retriever run hands out as its child (same
    handlers, parent, tags and metadata as the sync `manager`)."""
    from langchain_core.callbacks import AsyncCallbackManager

    return AsyncCallbackManager(handlers=list(manager.handlers), inheritable_handlers=list(manager.inheritable_handlers),
                                parent_run_id=manager.parent_run_id, tags=list(manager.tags), inheritable_tags=list(manager.inheritable_tags),
                                metadata=dict(manager.metadata), inheritable_metadata=dict(manager.inheritable_metadata))


# ---- models --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatResult:
    """Shape a chat model's Generation as the `AIMessage` the stock model returns, or as what
    StrOutputParser returns for it (`text=True`: the message's `.text`, a str subclass)."""

    model_name: str
    text: bool = False
    stream_usage: bool = False
    """Whether the stock model's `stream` reports usage (its `stream_usage` setting)."""
    model: Any = field(default=None, compare=False, repr=False)
    """The stock model, whose own response parser builds the message (`messages.stock_result`)."""
    blocking: bool = False
    text_port: ClassVar[str] = "generation"  # the message carries the generated text as is

    def compute(self, values: dict[str, Any]) -> Any:
        if self.text:  # the parser keeps the text alone: no need for the metadata (~0.1 ms a call)
            return plain_message(self.model_name, values["generation"]).text
        return self.message(values["generation"])

    def message(self, generation: Generation, run_id: Any = None) -> Any:
        """The stock model's answer (metadata and id included) for `generation`."""
        return stock_answer(self.model, self.model_name, generation, run_id)[0].message

    def chunk(self, delta: str, stream_id: str | None = None) -> Any:
        """One streamed piece as the stock model streams it: an `AIMessageChunk` (every chunk
        of one stream carrying its run's id, `stream_id`), or its `.text` once StrOutputParser
        has parsed it."""
        from langchain_core.messages import AIMessageChunk

        chunk = AIMessageChunk(content=delta, response_metadata={"model_provider": "openai"}, id=stream_id)
        return chunk.text if self.text else chunk

    def closing_chunks(self, message: Any, rest: str, stream_id: str | None = None) -> list[Any]:
        """How langchain-openai's stream ends: the last text (`rest`, the text not streamed yet:
        the piece that came with the finish reason, or none) with the finish metadata; where
        the model streams usage, an empty chunk with it; an empty `chunk_position="last"` one."""
        from langchain_core.messages import AIMessageChunk

        metadata = streamed_metadata(message, self.model_name, stream_usage=self.stream_usage)
        chunks = [AIMessageChunk(content=rest, response_metadata=metadata, id=stream_id)]
        if self.stream_usage:
            chunks.append(AIMessageChunk(content="", usage_metadata=message.usage_metadata, id=stream_id))
        chunks.append(AIMessageChunk(content="", chunk_position="last", id=stream_id))
        return chunks


def sampling_params(payload: dict[str, Any]) -> SamplingParams:
    """The request fields a stock OpenAI client sends, as SamplingParams whose `extra` makes
    the accel request body carry the same fields: absent ones are sent as null (vLLM's
    default, like omitting them), others unchanged."""
    body = {k: v for k, v in payload.items() if k not in ("messages", "prompt", "model", "stream", "stream_options")}
    body.update(body.pop("extra_body", None) or {})  # the openai SDK merges it into the JSON body
    extra: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    for key in ("max_tokens", "temperature", "top_p"):
        if body.get(key) is not None:
            fields[key] = body.pop(key)
        else:
            body.pop(key, None)
            extra[key] = None
    stop = body.pop("stop", None)
    if stop:
        fields["stop"] = (stop,) if isinstance(stop, str) else tuple(stop)
    seed = body.pop("seed", None)
    if seed is not None:
        fields["seed"] = seed
    extra.update({k: v for k, v in body.items() if v is not None})
    return SamplingParams(**fields, extra=extra)
