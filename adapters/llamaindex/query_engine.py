"""`WrappedQueryEngine`: a `RetrieverQueryEngine` replayed on accel's shared runtime.

It is a `BaseQueryEngine`, so `query` / `aquery` keep LlamaIndex's own entry points (query
spans, QueryStart/End events, callback traces); the spans and events of retrieval, embedding,
reranking, synthesis and LLM calls are reported by the lowered stages as they run (`events`).
Inputs accel does not lower (a QueryBundle with its own embedding or embedding strings) and
plans that do not fit a query (`PlanMismatch`) are answered by the stock engine's code.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Hashable
from typing import Any

import llama_index.core.instrumentation as instrument
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.schema import MetadataMode, QueryBundle

from accel.ir import GraphBuilder
from accel.passes import PassContext

from accel.scope import WrappedRun, wrapped_run
from accel.engines.errors import PromptTooLong

from . import events
from .bindings import Unbound, bind_llm
from .errors import stock_error
from .prompts import PlanMismatch
from .retrieval import RetrievalPlan, plan_retrieval
from .streaming import StreamedRun
from .synthesis import SynthesisPlan, check_synthesizer

dispatcher = instrument.get_dispatcher(__name__)
_wrap_ids = itertools.count()  # template keys: ids of collected wrappers can be reused, these cannot


class WrappedQueryEngine(BaseQueryEngine):
    """Drop-in for the wrapped query engine; attributes it does not define come from it."""

    def __init__(self, original: Any, *, policy: str = "topology", disabled_passes: tuple[str, ...] = ()) -> None:
        from accel.session import get_session

        self._original = original
        self._session = get_session(policy=policy, disabled_passes=disabled_passes)
        self._retrieval: RetrievalPlan = plan_retrieval(original._retriever, original._node_postprocessors)
        self._synthesis, self._synth_opaque = self._plan_synthesis(original._response_synthesizer)
        self._templates: dict[Hashable, Any] = {}
        self._wrap_id = next(_wrap_ids)
        super().__init__(callback_manager=original.callback_manager)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_original":
            raise AttributeError(name)
        return getattr(self._original, name)

    # ---- planning -----------------------------------------------------------------------------

    def _plan_synthesis(self, synth: Any) -> tuple[SynthesisPlan | None, Unbound | None]:
        reason = check_synthesizer(synth)
        if reason is not None:
            return None, reason
        binding = bind_llm(synth._llm)
        if isinstance(binding, Unbound):
            return None, binding
        name = binding.engine.bind(self._session)
        return SynthesisPlan(synth, synth._llm, binding, name, lambda: self._session.get_engine(name)), None

    def _pass_context(self) -> PassContext:
        if self._synthesis is None:
            return PassContext(profiles=self._session.pass_profiles())
        engine = self._session.get_engine(self._synthesis.engine_name)
        return PassContext(profiles=self._session.pass_profiles(), tokenize=engine.tokenize, render_chat=engine.render_chat, block_size=lambda: engine.block_size)  # read once the engine runs

    def _template(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        found = self._templates.get(key)
        if found is None:
            found = self._session.template(("llamaindex", self._wrap_id, *key), build, context=self._pass_context())
            self._templates[key] = found
        return found

    def _retrieval_template(self) -> Any:
        def build() -> Any:
            self._retrieval.lowered.clear()
            self._retrieval.opaque.clear()
            b = GraphBuilder()
            b.output(self._retrieval.build(b, self._session))
            return b.build()

        return self._template(("retrieve",), build)

    # ---- queries ------------------------------------------------------------------------------

    def _lowerable(self, bundle: QueryBundle) -> bool:
        # an empty query has no embedding strings: stock then searches with no vector (and fails its own way)
        return bundle.embedding is None and bundle.custom_embedding_strs is None and bool(bundle.query_str)

    @dispatcher.span
    def _query(self, query_bundle: QueryBundle) -> Any:
        try:
            with wrapped_run(self._new_run()), events.traced(query_bundle, asynchronous=False):
                return self._query_lowered(query_bundle)
        except PromptTooLong as err:
            raise stock_error(err) from err

    @dispatcher.span
    async def _aquery(self, query_bundle: QueryBundle) -> Any:
        try:
            with wrapped_run(self._new_run()), events.traced(query_bundle, asynchronous=True):
                return await self._aquery_lowered(query_bundle)
        except PromptTooLong as err:
            raise stock_error(err) from err

    def _new_run(self) -> WrappedRun:
        return WrappedRun(app=type(self._original).__name__, session=self._session)

    def _query_lowered(self, query_bundle: QueryBundle) -> Any:
        if not self._lowerable(query_bundle):
            return self._original._query(query_bundle)
        nodes = self._session.run(self._retrieval_template(), {"query": query_bundle.query_str})
        return self._drive_sync(query_bundle, nodes)

    async def _aquery_lowered(self, query_bundle: QueryBundle) -> Any:
        if not self._lowerable(query_bundle):
            return await self._original._aquery(query_bundle)
        nodes = await self._session.arun(self._retrieval_template(), {"query": query_bundle.query_str})
        return await self._drive_async(query_bundle, nodes)

    def _synthesis_steps(self, query_bundle: QueryBundle, nodes: list[Any]) -> Generator[Any, Any, Any] | None:
        if self._synthesis is None or not nodes:
            return None
        texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]
        return self._synthesis.steps(query_bundle.query_str, texts, self._template)

    def _drive_sync(self, query_bundle: QueryBundle, nodes: list[Any]) -> Any:
        synth = self._original._response_synthesizer
        steps = self._synthesis_steps(query_bundle, nodes)
        if steps is None:
            return synth.synthesize(query=query_bundle, nodes=nodes)
        events.synthesis_started(synth, query_bundle, nodes)
        try:
            text = _run_steps(steps, self._run_step)
        except PlanMismatch as err:
            events.synthesis_abandoned(err)
            return synth.synthesize(query=query_bundle, nodes=nodes)
        return self._respond(query_bundle, text, nodes)

    async def _drive_async(self, query_bundle: QueryBundle, nodes: list[Any]) -> Any:
        synth = self._original._response_synthesizer
        steps = self._synthesis_steps(query_bundle, nodes)
        if steps is None:
            return await synth.asynthesize(query=query_bundle, nodes=nodes)
        events.synthesis_started(synth, query_bundle, nodes)
        try:
            step = next(steps)
            while True:
                step = steps.send(await self._arun_step(step))
        except StopIteration as done:
            text = done.value
        except PlanMismatch as err:
            events.synthesis_abandoned(err)
            return await synth.asynthesize(query=query_bundle, nodes=nodes)
        return self._respond(query_bundle, text, nodes)

    def _run_step(self, step: Any) -> Any:
        """A synthesis graph run, or for a streaming synthesizer the final call's token generator
        (the response then is a StreamingResponse, as stock's)."""
        if isinstance(step, StreamedRun):
            return step.tokens(self._session)
        return self._session.run(*step)

    async def _arun_step(self, step: Any) -> Any:
        if isinstance(step, StreamedRun):
            return step.atokens(self._session)
        return await self._session.arun(*step)

    def _respond(self, query_bundle: QueryBundle, text: Any, nodes: list[Any]) -> Any:
        response = self._original._response_synthesizer._prepare_response_output(text, list(nodes))
        events.synthesis_ended(query_bundle, response)
        return response

    # ---- prompts and explain --------------------------------------------------------------------

    def _get_prompt_modules(self) -> dict[str, Any]:
        return {}

    def get_prompts(self) -> dict[str, Any]:
        return self._original.get_prompts()

    def update_prompts(self, prompts_dict: dict[str, Any]) -> None:
        raise NotImplementedError("accel.wrap: update the prompts on the original query engine, then wrap it again")

    def explain(self) -> str:
        """What runs as primitives, what stays opaque and why, and the retrieval e-graph."""
        template = self._retrieval_template()
        lines = [f"accel.wrap({type(self._original).__name__})", "lowered:"]
        lines += [f"  - {item}" for item in self._retrieval.lowered]
        if self._synthesis is not None:
            lines.append(f"  - {self._synthesis.kind} on {type(self._synthesis.llm).__name__} -> Prefill/Decode pairs "
                         "(planned per query from the retrieved text; refine chained, tree levels batched)"
                         + ("; the final call's tokens stream from the runtime" if self._synthesis.streaming else ""))
        opaque = [*self._retrieval.opaque, *([self._synth_opaque] if self._synth_opaque else [])]
        lines.append("opaque (run as-is):" if opaque else "opaque: none")
        lines += [f"  - {u.component}: {u.reason}" for u in opaque]
        graph = template.graph
        lines.append(f"retrieval e-graph: {len(graph)} nodes, passes {graph.meta['passes']}")
        lines += [f"  {name} [{template.nodes[i].kind}] depth {template.depth[i]}" for i, name in enumerate(template.order)]
        lines += [f"  note: {note}" for note in graph.meta["notes"]]
        return "\n".join(lines)


def _run_steps(steps: Generator[Any, Any, Any], run: Callable[[Any], Any]) -> Any:
    try:
        step = next(steps)
        while True:
            step = steps.send(run(step))
    except StopIteration as done:
        return done.value
