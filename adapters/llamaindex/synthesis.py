"""Lowering response synthesis to Prefill/Decode pairs that run inside the query's graph.

How many LLM calls a synthesizer makes depends on the retrieved text (LlamaIndex repacks it
into the context window), so a query's graph ends in

    nodes -> Call(plan: the synthesizer's own repacking code) -> Expand(synthesize) -> Call(finish)

and the Expand node runs the sub-template the plan picks, inside the same query run (same
query id, engine schedulers, trace and cancellation). Sub-templates are cached by shape:

- `calls(n)`: n independent pairs (one call; accumulate) -- siblings at the same depth, so the
  engine scheduler batches them;
- `chain(n)`: compact / refine as n chained pairs, each prompt holding the previous answer (the
  static part before the answer is prefilled early by the prefill-split pass);
- `level(n)`: one tree_summarize level, n pairs side by side; with n > 1 it ends in a plan of
  the next level and an Expand running it, so every level stays inside the query.

The Expand node carries the parts of the synthesizer's first prompt (`prompt_parts`, and the
LLM engine in `prefill_engine`): the prefill-split pass then warms that prompt's static head
(instructions, the query) while retrieval runs, Teola's retrieval/prefill overlap.

A streaming synthesizer (compact, refine, simple_summarize) is planned by `streamed` into one
`StreamedRun`: a graph whose output is the final call's text, streamed as the response's tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from accel.adapters.common.classes import is_exactly
from accel.engines.base import GenerationRequest
from accel.ir import CallOp, DecodeOp, GatherOp, GraphBuilder, Kind, Ref

from . import events, query_trace
from .bindings import LLMBinding, Unbound
from .prompts import QUERY_PORT, LlamaPromptOp, PlanMismatch, RefinePromptOp, prompt_parts
from .streaming import StreamedRun

EMPTY = "Empty Response"


class SynthKind(Enum):
    """A LlamaIndex synthesizer class the lowering reproduces; the value is its class name."""

    COMPACT_AND_REFINE = "CompactAndRefine"
    REFINE = "Refine"
    SIMPLE_SUMMARIZE = "SimpleSummarize"
    TREE_SUMMARIZE = "TreeSummarize"
    ACCUMULATE = "Accumulate"

    @property
    def path(self) -> tuple[str, str]:
        """The class's defining module and name, for `is_exactly`."""
        return f"llama_index.core.response_synthesizers.{_SYNTH_MODULES[self]}", self.value

    @classmethod
    def of(cls, synth: Any) -> SynthKind | None:
        """The kind of `synth`'s exact class: None for any other class, a subclass or a user
        class that shares the name included (its own code may answer otherwise)."""
        return next((kind for kind in cls if is_exactly(synth, kind.path)), None)


_SYNTH_MODULES = {SynthKind.COMPACT_AND_REFINE: "compact_and_refine", SynthKind.REFINE: "refine",
                  SynthKind.SIMPLE_SUMMARIZE: "simple_summarize", SynthKind.TREE_SUMMARIZE: "tree_summarize",
                  SynthKind.ACCUMULATE: "accumulate"}
STREAMED_SYNTHESIZERS = frozenset({SynthKind.COMPACT_AND_REFINE, SynthKind.REFINE, SynthKind.SIMPLE_SUMMARIZE})

TemplateFor = Callable[[tuple[Any, ...], Callable[[], Any]], Any]


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class SubRun:
    """A synthesis sub-graph to run: its template and inputs, and how the synthesizer turns
    the graph's value into its response text (`finish`)."""

    template: Any
    inputs: dict[str, Any]
    finish: Callable[[Any], Any] = _same


@dataclass(frozen=True)
class RunPlanned:
    """Expand op: run the sub-template of the `SubRun` on port `plan`. `templates` lists one
    the plan may pick, so the session starts its engine before the query."""

    templates: tuple[Any, ...] = field(default=())

    async def expand(self, values: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        run: SubRun = values["plan"]
        return run.template, run.inputs


@dataclass(frozen=True)
class FillDecodeOp:
    """Decode for an app that sends no `max_tokens`: the server then generates up to the end
    of the context window, so the request asks for exactly that many tokens."""

    inner: DecodeOp
    engine: Any

    async def requests(self, values: dict[str, Any]) -> list[GenerationRequest]:
        (request,) = await self.inner.requests(values)
        if request.messages is not None:
            text = await self.engine.render_chat(request.messages)
            tokens = await self.engine.tokenize(text, add_special_tokens=False)
        else:
            tokens = await self.engine.tokenize(request.prompt or "")
        left = max(1, self.engine.max_model_len - len(tokens))
        request.params = type(request.params)(**{**request.params.__dict__, "max_tokens": left})
        return [request]

    def output(self, values: dict[str, Any], results: list[Any]) -> Any:
        return self.inner.output(values, results)

    @property
    def streams_text(self) -> bool:
        return self.inner.streams_text


@dataclass
class SynthesisPlan:
    synthesizer: Any
    kind: SynthKind  # the synthesizer's class (`check_synthesizer`)
    llm: Any
    binding: LLMBinding
    engine_name: str
    engine: Callable[[], Any]

    @property
    def streaming(self) -> bool:
        return bool(getattr(self.synthesizer, "_streaming", False))

    # ---- the query graph's synthesis part ----------------------------------------------------

    def first_template(self) -> Any:
        """The prompt template of the synthesizer's first LLM call(s)."""
        synth = self.synthesizer
        return synth._summary_template if self.kind is SynthKind.TREE_SUMMARIZE else synth._text_qa_template

    def expand_attrs(self) -> dict[str, Any]:
        """The Expand node's attributes: its first prompt's parts, for the prefill-split pass."""
        parts = prompt_parts(self.llm, self.first_template(), self.binding.chat)
        return {} if parts is None else {"prompt_parts": parts, "prefill_engine": self.engine_name}

    def representative(self, template_for: TemplateFor) -> Any:
        """A sub-template the plan may pick (one call of the first prompt): the Expand op lists
        it so that the LLM engine is started before the query."""
        return self._calls(self.first_template(), 1, "context_str", template_for)

    # ---- graphs -------------------------------------------------------------------------------

    def _pair(self, b: GraphBuilder, name: str, op: Any, template: Any, inputs: dict[str, Ref]) -> Ref:
        attrs: dict[str, Any] = {}
        parts = prompt_parts(self.llm, template, self.binding.chat)
        if parts is not None:
            attrs["prompt_parts"] = parts
        prompt = b.add(Kind.PREFILL, f"{name}.prefill", inputs=inputs, attrs=attrs, op=op)
        decode: Any = events.PredictDecodeOp(params=self.binding.params)
        if self.binding.fill_max_tokens:
            decode = FillDecodeOp(decode, self.engine())
        return b.add(Kind.DECODE, f"{name}.decode", engine=self.engine_name, inputs={"prompt": prompt},
                     attrs={"params": self.binding.params}, op=decode)

    def _answers(self, b: GraphBuilder, template: Any, n: int, port: str) -> Ref:
        query, chunks = b.input(QUERY_PORT), b.input("chunks")
        op = LlamaPromptOp(self.llm, template, self.binding.chat)
        answers = {f"a{i}": self._pair(b, f"call{i}", op, template, {QUERY_PORT: query, port: Ref(chunks.node, i)})
                   for i in range(n)}
        return b.add(Kind.AGGREGATE, "answers", inputs=answers, op=GatherOp("list"))

    def calls_graph(self, template: Any, n: int, port: str) -> Any:
        """n independent calls of `template`, call i reading chunks[i] into `port`."""
        b = GraphBuilder()
        b.output(self._answers(b, template, n, port))
        return b.build()

    def level_graph(self, n: int, template_for: TemplateFor) -> Any:
        """One tree_summarize level over n chunks: the summaries side by side; the last level's
        one summary is the answer, otherwise the next level is planned from the summaries (the
        synthesizer's own repacking) and run by an Expand node."""
        b = GraphBuilder()
        answers = self._answers(b, self.synthesizer._summary_template, n, "context_str")
        if n == 1:
            b.output(b.add(Kind.CALL, "answer", inputs={"answers": answers}, op=CallOp(lambda answers: answers[0], blocking=False)))
            return b.build()
        query = Ref(QUERY_PORT)

        def next_level(query: str, answers: list[str]) -> SubRun:
            events.level_started(self.synthesizer, query, answers)
            with query_trace.under("get_response"):
                return self._level(query, answers, template_for)

        plan = b.add(Kind.CALL, "next", inputs={QUERY_PORT: query, "answers": answers}, op=CallOp(next_level))
        b.output(b.add(Kind.EXPAND, "level", inputs={"plan": plan}, op=RunPlanned()))
        return b.build()

    def chain_graph(self, n: int, *, streaming: bool = False) -> Any:
        """Refine over n chunks: a QA call, then n-1 refine calls each reading the answer so far.
        Streaming refine takes every answer as it is, empty too (stock joins each step's token
        stream into the next prompt), so the output is the last decode and its tokens stream."""
        synth = self.synthesizer
        b = GraphBuilder()
        query, chunks = b.input(QUERY_PORT), b.input("chunks")
        qa = LlamaPromptOp(self.llm, synth._text_qa_template, self.binding.chat)
        answer = self._pair(b, "qa", qa, synth._text_qa_template, {QUERY_PORT: query, "context_str": Ref(chunks.node, 0)})
        if not streaming:  # an empty answer from the only chunk is stock's "Empty Response"
            first = _first_answer if n > 1 else _only_answer
            answer = b.add(Kind.CALL, "answer0", inputs={"new": answer}, op=CallOp(first, blocking=False))
        for i in range(1, n):  # (a single call needs no refine template: simple_summarize has none)
            refine = RefinePromptOp(self.llm, synth._refine_template, synth._prompt_helper, self.binding.chat)
            inputs = {QUERY_PORT: query, "existing_answer": answer, "context_msg": Ref(chunks.node, i)}
            new = self._pair(b, f"refine{i}", refine, synth._refine_template, inputs)
            answer = new if streaming else b.add(Kind.CALL, f"answer{i}", inputs={"prev": answer, "new": new},
                                                 op=CallOp(_keep_answer, blocking=False))
        b.output(answer)
        return b.build()

    @staticmethod
    def const_graph() -> Any:
        """A sub-graph that answers its input `value` (a synthesis with nothing to call)."""
        b = GraphBuilder()
        b.output(b.input("value"))
        return b.build()

    # ---- per-query plans ----------------------------------------------------------------------

    def plan(self, query: str, texts: list[str], template_for: TemplateFor) -> SubRun:
        """The sub-graph answering `query` from `texts` as the synthesizer's `get_response` would
        (its `finish` gives the response text exactly as stock's)."""
        synth, llm, kind = self.synthesizer, self.llm, self.kind
        if kind in (SynthKind.COMPACT_AND_REFINE, SynthKind.REFINE):
            chunks = self._refine_chunks(query, texts)
            if not chunks:
                return SubRun(template_for(("const",), self.const_graph), {"value": EMPTY})
            return SubRun(template_for(("chain", len(chunks)), lambda: self.chain_graph(len(chunks))),
                          {QUERY_PORT: query, "chunks": chunks}, _or_empty)
        if kind is SynthKind.SIMPLE_SUMMARIZE:
            chunk = self._summary_text(query, texts)
            return SubRun(self._calls(synth._text_qa_template, 1, "context_str", template_for),
                          {QUERY_PORT: query, "chunks": [chunk]}, _first_or_empty)
        if kind is SynthKind.ACCUMULATE:
            template = synth._text_qa_template
            partial = template.partial_format(query_str=query)
            chunks = [c for text in texts for c in synth._prompt_helper.repack(partial, [text], llm=llm)]
            return SubRun(self._calls(template, len(chunks), "context_str", template_for),
                          {QUERY_PORT: query, "chunks": chunks}, lambda outputs: synth._format_response(outputs, "\n---------------------\n"))
        if kind is SynthKind.TREE_SUMMARIZE:
            return self._level(query, texts, template_for)
        raise PlanMismatch("llamaindex", f"no lowering for {kind.value}", "answered by stock code")

    def _level(self, query: str, texts: list[str], template_for: TemplateFor) -> SubRun:
        synth = self.synthesizer
        chunks = synth._prompt_helper.repack(synth._summary_template.partial_format(query_str=query), text_chunks=texts, llm=self.llm)
        n = len(chunks)
        return SubRun(template_for(("level", n), lambda: self.level_graph(n, template_for)), {QUERY_PORT: query, "chunks": chunks})

    def streamed(self, query: str, texts: list[str], template_for: TemplateFor) -> StreamedRun | str:
        """A streaming synthesizer's plan: the run whose final call's tokens are the response's
        (or the empty response when there is nothing to answer from)."""
        synth = self.synthesizer
        chunks = [self._summary_text(query, texts)] if self.kind is SynthKind.SIMPLE_SUMMARIZE else self._refine_chunks(query, texts)
        if not chunks:
            return EMPTY
        graph = template_for(("stream", len(chunks)), lambda: self.chain_graph(len(chunks), streaming=True))
        return StreamedRun(graph, {QUERY_PORT: query, "chunks": chunks},
                           lambda: synth.get_response(query, texts), lambda: synth.aget_response(query, texts))

    def _refine_chunks(self, query: str, texts: list[str]) -> list[str]:
        """The chunks compact / refine answer over, packed by the synthesizer's own code."""
        from llama_index.core.prompts.prompt_utils import get_biggest_prompt

        synth = self.synthesizer
        if self.kind is SynthKind.COMPACT_AND_REFINE:
            texts = synth._make_compact_text_chunks(query, texts)
        events.response_started(synth, query, texts)
        max_prompt = get_biggest_prompt([synth._text_qa_template, synth._refine_template])
        return [tc for text in texts for tc in synth._prompt_helper.repack(
            max_prompt, [text], llm=self.llm, padding=synth._response_padding_size)]

    def _summary_text(self, query: str, texts: list[str]) -> Any:
        """simple_summarize's context: all texts joined, truncated to fit (its own code)."""
        synth = self.synthesizer
        return synth._prompt_helper.truncate(prompt=synth._text_qa_template.partial_format(query_str=query),
                                             text_chunks=["\n".join(texts)], llm=self.llm)

    def _calls(self, template: Any, n: int, port: str, template_for: TemplateFor) -> Any:
        return template_for(("calls", id(template), n), lambda: self.calls_graph(template, n, port))


def _or_empty(answer: Any) -> Any:
    return answer or EMPTY


def _first_or_empty(answers: list[Any]) -> Any:
    return answers[0] or EMPTY


def _first_answer(new: str) -> str:
    if not new:  # stock refine answers the next chunk with the QA prompt again
        raise PlanMismatch("llamaindex", "the first refine answer is empty", "answered by stock code")
    return new


def _only_answer(new: str) -> str:
    return new or EMPTY


def _keep_answer(prev: str, new: str) -> str:
    """Refine keeps the previous answer when a step returns an empty one."""
    return new or prev


def check_synthesizer(synth: Any) -> SynthKind | Unbound:
    """The kind of synthesizer to lower, or why `synth` runs as-is."""
    kind, label = SynthKind.of(synth), type(synth).__name__
    if kind is None:
        return Unbound(label, f"response mode not lowered (supported: {', '.join(k.value for k in SynthKind)})")
    if getattr(synth, "_streaming", False) and kind not in STREAMED_SYNTHESIZERS:
        streamed = ", ".join(k.value for k in SynthKind if k in STREAMED_SYNTHESIZERS)
        return Unbound(label, f"streaming {label} runs as-is (streamed: {streamed})")
    if getattr(synth, "_output_cls", None) is not None:
        return Unbound(label, "structured output runs as-is")
    if getattr(synth, "_multimodal", False) or getattr(synth, "_structured_answer_filtering", False):
        return Unbound(label, "multimodal synthesis or structured answer filtering runs as-is")
    return kind
