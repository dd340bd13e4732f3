"""`LoweredQuery`: a `RetrieverQueryEngine`'s query replayed on accel's shared runtime.

It answers for the engine's drop-in (`lowered.lower_query_engine`), a `RetrieverQueryEngine`
whose `_query` / `_aquery` call `answer` / `aanswer`, so `query` / `aquery` keep LlamaIndex's
own entry points (query spans, QueryStart/End events, callback traces); the spans and events
of retrieval, embedding, reranking, synthesis and LLM calls are reported by the lowered stages
as they run (`events`).

A query is one graph run: retrieval, then the synthesis plan (the synthesizer's own repacking
of the retrieved text) and an Expand node running the synthesis sub-graph it picks
(`synthesis.py`), so the runtime sees the whole query and the passes can overlap, e.g., the
answer prompt's static prefill with retrieval. A streaming synthesizer's tokens come from a run
of their own after retrieval (`streaming.py`); a synthesizer accel does not lower runs as-is
on the retrieved nodes. Inputs accel does not lower (a QueryBundle with its own embedding or
embedding strings) and plans that do not fit a query (`PlanMismatch`) are answered by the
stock engine's code.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from llama_index.core.schema import MetadataMode, QueryBundle

from accel.adapters.common.explain import rerank_miss_lines
from accel.ir import CallOp, GraphBuilder, Kind, Ref

from accel.scope import WrappedRun, wrapped_run
from accel.types import Identity, TemplateBuild
from accel.engines.errors import EngineError, PromptTooLong

from . import callbacks, events, query_trace
from .bindings import Unbound, bind_llm
from .errors import stock_embed_error, stock_error, stock_llm_error, stock_vectordb_error
from .prompts import QUERY_PORT, PlanMismatch
from .retrieval import RetrievalPlan, plan_retrieval
from .streaming import StreamedRun
from .synthesis import RunPlanned, SubRun, SynthesisPlan, check_synthesizer

STOCK = object()
"""The synthesis graph's answer when stock code synthesizes (no retrieved node)."""


@dataclass
class QueryState:
    """One query's bundle, and its retrieved nodes once known (the response's source nodes,
    and what stock synthesis answers from when a plan does not fit)."""

    bundle: QueryBundle
    nodes: list[Any] | None = None


class LoweredQuery:
    """The lowered query of one `RetrieverQueryEngine` (`original`), planned once per wrap."""

    def __init__(self, original: Any, *, policy: str = "topology", disabled_passes: tuple[str, ...] = ()) -> None:
        from accel.session import get_session

        self._original = original
        self._session = get_session(policy=policy)
        self._disabled = tuple(disabled_passes)
        self._retrieval: RetrievalPlan = plan_retrieval(original._retriever, original._node_postprocessors)
        self._synthesis, self._synth_opaque = self._plan_synthesis(original._response_synthesizer)
        self._templates: dict[Hashable, Any] = {}
        self._components = callbacks.components(original)

    # ---- planning -----------------------------------------------------------------------------

    def _plan_synthesis(self, synth: Any) -> tuple[SynthesisPlan | None, Unbound | None]:
        kind = check_synthesizer(synth)
        if isinstance(kind, Unbound):
            return None, kind
        binding = bind_llm(synth._llm)
        if isinstance(binding, Unbound):
            return None, binding
        name = self._session.engine(binding.engine)
        return SynthesisPlan(synth, kind, synth._llm, binding, name, lambda: self._session.get_engine(name)), None

    @property
    def _one_graph(self) -> bool:
        """Whether synthesis runs inside the query's graph (lowered, not streaming)."""
        return self._synthesis is not None and not self._synthesis.streaming

    def _template(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        found = self._templates.get(key)
        if found is None:
            # the wrapper's own: its templates' ops hold its plans
            found = self._session.template(TemplateBuild(("llamaindex", Identity(self), *key), build, self._disabled))
            self._templates[key] = found
        return found

    def _retrieval_template(self) -> Any:
        """Retrieval alone (a streaming or opaque synthesizer answers after it)."""
        def build() -> Any:
            b = GraphBuilder()
            b.output(self._build_retrieval(b))
            return b.build()

        return self._template(("retrieve",), build)

    def _build_retrieval(self, b: GraphBuilder) -> Any:
        self._retrieval.lowered.clear()
        self._retrieval.opaque.clear()
        return self._retrieval.build(b, self._session)

    def _query_template(self) -> Any:
        """The whole query: retrieval, the synthesis plan, and an Expand node running it."""
        synthesis = self._synthesis
        assert synthesis is not None
        representative = synthesis.representative(self._template)  # built first: templates do not nest builds

        def build() -> Any:
            b = GraphBuilder()
            nodes = self._build_retrieval(b)
            state = b.input("state")
            plan = b.add(Kind.CALL, "synthesis.plan", inputs={"state": state, "nodes": nodes}, op=CallOp(self._plan, cpu_bound=True))
            answer = b.add(Kind.EXPAND, "synthesize", inputs={"plan": plan, QUERY_PORT: Ref(QUERY_PORT)},
                           attrs=synthesis.expand_attrs(), op=RunPlanned((representative,)))
            b.output(b.add(Kind.CALL, "synthesis.finish", inputs={"plan": plan, "answer": answer},
                           op=CallOp(_finish, blocking=False)))
            return b.build()

        return self._template(("query",), build)

    def _plan(self, state: QueryState, nodes: list[Any]) -> SubRun:
        """The synthesis plan node: the synthesizer's own repacking of the retrieved text picks
        the sub-graph (run in a compute thread, in the query's context: it only tokenises)."""
        state.nodes = nodes
        synthesis = self._synthesis
        assert synthesis is not None
        if not nodes:
            return SubRun(self._template(("const",), synthesis.const_graph), {"value": STOCK})
        events.synthesis_started(synthesis.synthesizer, state.bundle, nodes)
        with query_trace.under("get_response"):
            return synthesis.plan(state.bundle.query_str, _texts(nodes), self._template)

    # ---- queries ------------------------------------------------------------------------------

    def _lowerable(self, bundle: QueryBundle) -> bool:
        # an empty query has no embedding strings: stock then searches with no vector (and fails its own way)
        if bundle.embedding is not None or bundle.custom_embedding_strs is not None or not bundle.query_str:
            return False
        return not self._heard_by_stock_listeners()

    def _heard_by_stock_listeners(self) -> bool:
        """Whether a listener needs stock code's own reports: a handler, legacy (`callbacks`) or
        instrumentation, on a streamed response (its LLM events fire while the tokens are read,
        after the query returned; the lowered stream reports none). Counted; the stock engine
        then answers, its engine calls captured."""
        if self._synthesis is None or not self._synthesis.streaming:
            return False
        handlers = callbacks.listeners(self._components)
        if not handlers and query_trace.listening():
            handlers = ["an instrumentation handler on a streamed response"]
        return callbacks.stock_answers(type(self._original).__name__, handlers)

    @contextmanager
    def _query_event(self, bundle: QueryBundle) -> Iterator[Callable[[Any], Any] | None]:
        """Where a legacy callback handler listens: the QUERY event of stock's `_query` around
        the lowered query (whose stages fire the rest under it); yields what ends it with the
        response. Else None."""
        from llama_index.core.callbacks import CBEventType, EventPayload

        if not callbacks.reports_to(type(self._original).__name__, callbacks.listeners(self._components)):
            yield None
            return
        with self._original.callback_manager.event(CBEventType.QUERY, payload={EventPayload.QUERY_STR: bundle.query_str}) as event:
            def respond(response: Any) -> Any:
                event.on_end(payload={EventPayload.RESPONSE: response})
                return response

            yield respond

    def answer(self, query_bundle: QueryBundle) -> Any:
        """The response to `query_bundle`, as the engine's own `_query` makes it."""
        with wrapped_run(self._new_run()):
            if not self._lowerable(query_bundle):
                with self._stock_errors(asynchronous=False):
                    return self._original._query(query_bundle)
            with self._query_event(query_bundle) as respond:
                # the stock error is what the dropped spans and callback events report, as stock's
                with query_trace.traced(query_bundle, asynchronous=False, reported=respond is not None), \
                        self._stock_errors(asynchronous=False):
                    response = self._query_lowered(query_bundle)
                return response if respond is None else respond(response)

    async def aanswer(self, query_bundle: QueryBundle) -> Any:
        """The response to `query_bundle`, as the engine's own `_aquery` makes it."""
        with wrapped_run(self._new_run()):
            if not self._lowerable(query_bundle):
                with self._stock_errors(asynchronous=True):
                    return await self._original._aquery(query_bundle)
            with self._query_event(query_bundle) as respond:
                # the stock error is what the dropped spans and callback events report, as stock's
                with query_trace.traced(query_bundle, asynchronous=True, reported=respond is not None), \
                        self._stock_errors(asynchronous=True):
                    response = await self._aquery_lowered(query_bundle)
                return response if respond is None else respond(response)

    @contextmanager
    def _stock_errors(self, *, asynchronous: bool) -> Iterator[None]:
        """Engine errors raised as the stock engine raises them (inside the QUERY event, as stock's)."""
        try:
            yield
        except PromptTooLong as err:
            raise stock_error(err) from err
        except EngineError as err:
            raise self._stock_error(err, asynchronous=asynchronous) from err

    def _stock_error(self, err: EngineError, *, asynchronous: bool) -> Exception:
        """What the stock engine raises for an engine that is down: its OpenAI client's error
        for the LLM and for a lowered server embedding, its PGVectorStore's for Postgres
        (asyncpg on the async path)."""
        llm = {self._session.get_engine(self._synthesis.engine_name).name} if self._synthesis else set()
        stock = stock_llm_error(err, llm)
        if stock is err:
            stock = stock_vectordb_error(err, asyncpg=asynchronous)
        return stock if stock is not err else stock_embed_error(err)

    def _new_run(self) -> WrappedRun:
        return WrappedRun(app=type(self._original).__name__, session=self._session)

    def _query_lowered(self, query_bundle: QueryBundle) -> Any:
        synth = self._original._response_synthesizer
        if not self._one_graph:
            nodes = self._session.run(self._retrieval_template(), {QUERY_PORT: query_bundle.query_str})
            return self._after_retrieval(query_bundle, nodes, self._run_streamed)
        state = QueryState(query_bundle)
        try:
            text = self._session.run(self._query_template(), {QUERY_PORT: query_bundle.query_str, "state": state})
        except PlanMismatch as err:
            if state.nodes is None:
                raise
            events.synthesis_abandoned(err)
            text = STOCK
        if text is STOCK:
            return synth.synthesize(query=query_bundle, nodes=state.nodes)
        return self._respond(query_bundle, text, state.nodes)

    async def _aquery_lowered(self, query_bundle: QueryBundle) -> Any:
        synth = self._original._response_synthesizer
        if not self._one_graph:
            nodes = await self._session.arun(self._retrieval_template(), {QUERY_PORT: query_bundle.query_str})
            if self._synthesis is None or not nodes:
                return await synth.asynthesize(query=query_bundle, nodes=nodes)
            return self._after_retrieval(query_bundle, nodes, self._arun_streamed)
        state = QueryState(query_bundle)
        try:
            text = await self._session.arun(self._query_template(), {QUERY_PORT: query_bundle.query_str, "state": state})
        except PlanMismatch as err:
            if state.nodes is None:
                raise
            events.synthesis_abandoned(err)
            text = STOCK
        if text is STOCK:
            return await synth.asynthesize(query=query_bundle, nodes=state.nodes)
        return self._respond(query_bundle, text, state.nodes)

    def _after_retrieval(self, query_bundle: QueryBundle, nodes: list[Any], tokens: Callable[[StreamedRun], Any]) -> Any:
        """A synthesizer outside the query graph: stock code (not lowered, or nothing
        retrieved), else a streaming plan whose final call's tokens are the response's."""
        synth = self._original._response_synthesizer
        if self._synthesis is None or not nodes:
            return synth.synthesize(query=query_bundle, nodes=nodes)
        events.synthesis_started(synth, query_bundle, nodes)
        with query_trace.under("get_response"):
            run = self._synthesis.streamed(query_bundle.query_str, _texts(nodes), self._template)
        return self._respond(query_bundle, run if isinstance(run, str) else tokens(run), nodes)

    def _run_streamed(self, run: StreamedRun) -> Any:
        return run.tokens(self._session)

    def _arun_streamed(self, run: StreamedRun) -> Any:
        return run.atokens(self._session)

    def _respond(self, query_bundle: QueryBundle, text: Any, nodes: list[Any]) -> Any:
        response = self._original._response_synthesizer._prepare_response_output(text, list(nodes))
        events.synthesis_ended(query_bundle, response)
        return response

    # ---- explain ------------------------------------------------------------------------------

    def explain(self) -> str:
        """What runs as primitives, what stays opaque and why, and the query's e-graph."""
        template = self._query_template() if self._one_graph else self._retrieval_template()
        lines = [f"accel.wrap({type(self._original).__name__})", "lowered:"]
        lines += [f"  - {item}" for item in self._retrieval.lowered]
        if self._synthesis is not None:
            lines.append(f"  - {self._synthesis.kind.value} on {type(self._synthesis.llm).__name__} -> Prefill/Decode pairs "
                         + ("(planned per query from the retrieved text; refine chained, tree levels batched), run inside "
                            "the query by an Expand node" if self._one_graph else
                            "after retrieval; the final call's tokens stream from the runtime"))
        opaque = [*self._retrieval.opaque, *([self._synth_opaque] if self._synth_opaque else [])]
        lines.append("opaque (run as-is):" if opaque else "opaque: none")
        lines += [f"  - {u.component}: {u.reason}" for u in opaque]
        graph = template.graph
        lines.append(f"{'query' if self._one_graph else 'retrieval'} e-graph: {len(graph)} nodes, passes {graph.meta['passes']}")
        lines += [f"  {name} [{template.nodes[i].kind}] depth {template.depth[i]}" for i, name in enumerate(template.order)]
        lines += [f"  note: {note}" for note in graph.meta["notes"]]
        lines += [*self._session.warmup_lines(), *self._session.speculation_lines(), *rerank_miss_lines(),
                  *callbacks.explain_lines()]
        return "\n".join(lines)


def _texts(nodes: list[Any]) -> list[str]:
    return [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]


def _finish(plan: SubRun, answer: Any) -> Any:
    """The response text from the synthesis sub-graph's value, as the synthesizer makes it."""
    return answer if answer is STOCK else plan.finish(answer)
