"""Drop-ins for the two ways LlamaIndex apps index documents:

    pipeline = accel.wrap(IngestionPipeline(transformations=[SentenceSplitter(), embed_model],
                                            vector_store=store))
    nodes = pipeline.run(documents=docs)                  # same rows in `store` as stock

    index = accel.wrap(VectorStoreIndex).from_documents(docs, storage_context=ctx, embed_model=embed_model)

Both are drop-ins (`accel.adapters.common.dropin`): the pipeline's is a copy of it whose class
is a subclass of `IngestionPipeline` with `run` / `arun` lowered; `accel.wrap(VectorStoreIndex)`
is a subclass of the class whose `from_documents` is lowered, so the call an app already makes
keeps its name, arguments and result (a real `VectorStoreIndex`, as calling the subclass
makes); only the embedding runs on accel's shared embedder. The index's own constructor then
stores the pre-embedded nodes (it embeds only nodes without an embedding), so its docstore,
index struct and vector-store rows are the stock ones. A pipeline is lowered whole, its rows
written by the Ingest primitive. Flows accel does not lower (a docstore for de-duplication,
worker processes, an unbound embedding) run the stock code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from accel.adapters.common.dropin import DropInState, dropin_class, make_dropin
from accel.types import Identity, TemplateBuild

from .bindings import Unbound
from .ingestion import IngestPlan, build_ingest_graph, plan_ingestion, stage_nodes
from .lowered import _span

T = TypeVar("T")


class _Lowered:
    """Session, plan and cached template shared by the two drop-ins' lowerings."""

    def __init__(self, policy: str, disabled_passes: tuple[str, ...]) -> None:
        from accel.session import get_session

        self._session = get_session(policy=policy)
        self._disabled = disabled_passes
        self._templates: dict[Any, Any] = {}

    def _template(self, key: Any, plan: IngestPlan) -> Any:
        found = self._templates.get(key)
        if found is None:
            def run_prefix(documents: list[Any], options: dict[str, Any]) -> Any:
                return stage_nodes(documents, plan, options["cache"], options["collection"], options["kwargs"])

            def build() -> Any:
                return build_ingest_graph(plan, self._session, run_prefix)

            found = self._session.template(TemplateBuild(("llamaindex-ingest", Identity(self), key), build, self._disabled))
            self._templates[key] = found
        return found

    def _describe(self, title: str, plan: IngestPlan | Unbound, template: Any | None) -> str:
        if isinstance(plan, Unbound):
            return f"{title}: opaque, run as-is ({plan.component}: {plan.reason})"
        names = [type(t).__name__ for t in plan.prefix] or ["none"]
        lines = [title, "lowered:",
                 f"  - transformations {', '.join(names)} -> Call (run as-is)",
                 f"  - {type(plan.embed_model).__name__} -> Embed "
                 + ("(whole: stage_decompose disabled)" if "stage_decompose" in self._disabled else "(micro-batched)")]
        lines.append(f"  - {type(plan.store).__name__}.add -> Ingest" if plan.store is not None
                     else "  - the index constructor stores the embedded nodes (its own code)")
        if template is not None:
            lines += [f"  {name} [{template.nodes[i].kind}] depth {template.depth[i]}" for i, name in enumerate(template.order)]
            lines += [f"  note: {note}" for note in template.graph.meta["notes"]]
        return "\n".join(lines)


class PipelineLowering(_Lowered):
    """The lowered `run` / `arun` of one `IngestionPipeline` drop-in (`wrap_pipeline`); the
    pipeline it is handed is the drop-in (a copy sharing the original's components)."""

    def __init__(self, pipeline: Any, *, policy: str = "topology", disabled_passes: tuple[str, ...] = ()) -> None:
        super().__init__(policy, disabled_passes)
        self._plan = plan_ingestion(pipeline.transformations, None, pipeline.vector_store)

    def lowerable(self, pipeline: Any, num_workers: int | None) -> bool:
        return not isinstance(self._plan, Unbound) and pipeline.docstore is None and not (num_workers and num_workers > 1)

    def _inputs(self, pipeline: Any, documents: Any, nodes: Any, cache_collection: str | None,
                kwargs: dict[str, Any]) -> dict[str, Any]:
        cache = None if pipeline.disable_cache else pipeline.cache
        inputs = list(pipeline._prepare_inputs(documents, nodes))
        return {"documents": inputs, "options": {"cache": cache, "collection": cache_collection, "kwargs": kwargs}}

    def run(self, pipeline: Any, documents: Any, nodes: Any, cache_collection: str | None,
            kwargs: dict[str, Any]) -> Sequence[Any]:
        assert isinstance(self._plan, IngestPlan)
        return self._session.run(self._template("pipeline", self._plan),
                                 self._inputs(pipeline, documents, nodes, cache_collection, kwargs))

    async def arun(self, pipeline: Any, documents: Any, nodes: Any, cache_collection: str | None,
                   kwargs: dict[str, Any]) -> Sequence[Any]:
        assert isinstance(self._plan, IngestPlan)
        return await self._session.arun(self._template("pipeline", self._plan),
                                        self._inputs(pipeline, documents, nodes, cache_collection, kwargs))

    def explain(self, pipeline: Any) -> str:
        """What runs as primitives, what stays opaque and why, and the e-graph."""
        template = None if isinstance(self._plan, Unbound) else self._template("pipeline", self._plan)
        title = "accel.wrap(IngestionPipeline)"
        if pipeline.docstore is not None:
            return f"{title}: opaque, run as-is (a docstore de-duplicates documents)"
        return self._describe(title, self._plan, template)


def wrap_pipeline(pipeline: T, *, policy: str = "topology", disabled_passes: tuple[str, ...] = ()) -> T:
    """The drop-in for an `IngestionPipeline`: `run` / `arun` lowered where the pipeline can be
    (else the class's own), everything else the pipeline's own."""
    base = type(pipeline)
    lowering = PipelineLowering(pipeline, policy=policy, disabled_passes=disabled_passes)

    def run(self: Any, show_progress: bool = False, documents: Sequence[Any] | None = None,
            nodes: Sequence[Any] | None = None, cache_collection: str | None = None, in_place: bool = True,
            store_doc_text: bool = True, num_workers: int | None = None, **kwargs: Any) -> Sequence[Any]:
        """`IngestionPipeline.run`, with embedding and the store write on accel's engines."""
        if not lowering.lowerable(self, num_workers):
            return base.run(self, show_progress=show_progress, documents=documents, nodes=nodes,
                            cache_collection=cache_collection, in_place=in_place,
                            store_doc_text=store_doc_text, num_workers=num_workers, **kwargs)
        return lowering.run(self, documents, nodes, cache_collection, kwargs)

    async def arun(self: Any, show_progress: bool = False, documents: Sequence[Any] | None = None,
                   nodes: Sequence[Any] | None = None, cache_collection: str | None = None, in_place: bool = True,
                   store_doc_text: bool = True, num_workers: int | None = None, **kwargs: Any) -> Sequence[Any]:
        """`IngestionPipeline.arun`, lowered as `run` (the store is written by its sync `add`)."""
        if not lowering.lowerable(self, num_workers):
            return await base.arun(self, show_progress=show_progress, documents=documents, nodes=nodes,
                                   cache_collection=cache_collection, in_place=in_place,
                                   store_doc_text=store_doc_text, num_workers=num_workers, **kwargs)
        return await lowering.arun(self, documents, nodes, cache_collection, kwargs)

    def explain(self: Any) -> str:
        return lowering.explain(self)

    state = DropInState(base.__name__, lowering._session, helper=lowering)
    return make_dropin(pipeline, state, namespace={"run": _span(base, "run", run), "arun": _span(base, "arun", arun),
                                                    "explain": explain})


def wrap_index_class(cls: type[T], *, policy: str = "topology", disabled_passes: tuple[str, ...] = ()) -> type[T]:
    """`accel.wrap(VectorStoreIndex)`: a subclass of the class whose `from_documents` is lowered;
    calling it, or any other classmethod, makes an index of the class itself."""
    lowering = IndexLowering(cls, policy=policy, disabled_passes=disabled_passes)

    def __new__(klass: type, *args: Any, **kwargs: Any) -> Any:  # noqa: N807
        return cls(*args, **kwargs)  # not an instance of `klass`: no second `__init__`

    def from_documents(klass: type, *args: Any, **kwargs: Any) -> Any:
        return lowering.from_documents(*args, **kwargs)

    def explain(klass: type) -> str:
        return lowering.explain()

    from_documents.__doc__ = lowering.from_documents.__doc__
    state = DropInState(cls.__name__, lowering._session, helper=lowering)
    return dropin_class(cls, state, {"__new__": __new__, "from_documents": classmethod(from_documents),
                                     "explain": classmethod(explain)})


class IndexLowering(_Lowered):
    """The lowered `from_documents` of one `accel.wrap(VectorStoreIndex)` (`wrap_index_class`)."""

    def __init__(self, cls: type, *, policy: str = "topology", disabled_passes: tuple[str, ...] = ()) -> None:
        super().__init__(policy, disabled_passes)
        self._cls = cls

    def _plan(self, transformations: list[Any], kwargs: dict[str, Any]) -> IngestPlan | Unbound:
        from llama_index.core import Settings
        from llama_index.core.base.embeddings.base import BaseEmbedding

        embed_model = kwargs.get("embed_model")
        if embed_model is None and not any(isinstance(t, BaseEmbedding) for t in transformations):
            try:
                embed_model = Settings.embed_model  # what the constructor would use
            except Exception as err:  # e.g. the default OpenAI model without a key: stock raises it
                return Unbound("Settings.embed_model", f"cannot be resolved ({type(err).__name__})")
        if embed_model is not None and not isinstance(embed_model, BaseEmbedding):
            return Unbound(type(embed_model).__name__, "an embed_model given by name is resolved by the index itself")
        return plan_ingestion(transformations, embed_model, None)

    def from_documents(self, documents: Sequence[Any], storage_context: Any = None, show_progress: bool = False,
                       callback_manager: Any = None, transformations: list[Any] | None = None, **kwargs: Any) -> Any:
        """`VectorStoreIndex.from_documents`, with the chunks embedded on accel's shared embedder."""
        from llama_index.core import Settings, StorageContext

        transformations = transformations or Settings.transformations
        plan = self._plan(transformations, kwargs)
        if isinstance(plan, Unbound):
            return self._cls.from_documents(documents, storage_context=storage_context, show_progress=show_progress,
                                            callback_manager=callback_manager, transformations=transformations, **kwargs)
        storage_context = storage_context or StorageContext.from_defaults()
        callback_manager = callback_manager or Settings.callback_manager
        with callback_manager.as_trace("index_construction"):
            for doc in documents:
                storage_context.docstore.set_document_hash(doc.id_, doc.hash)
            key = ("index", tuple(Identity(t) for t in transformations), Identity(plan.embed_model))
            inputs = {"documents": list(documents), "options": {"cache": None, "collection": None, "kwargs": kwargs}}
            nodes = self._session.run(self._template(key, plan), inputs)
            return self._cls(nodes=nodes, storage_context=storage_context, callback_manager=callback_manager,
                             show_progress=show_progress, transformations=transformations, **kwargs)

    def explain(self) -> str:
        from llama_index.core import Settings

        plan = self._plan(Settings.transformations, {})
        return self._describe(f"accel.wrap({self._cls.__name__}).from_documents (Settings' transformations)", plan, None)
