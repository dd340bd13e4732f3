"""Lowering response synthesis to Prefill/Decode pairs.

How many LLM calls a synthesizer makes depends on the retrieved text (repacking into the
context window), so synthesis is planned per query with LlamaIndex's own repacking code and
run as small cached graphs keyed by their shape:

- `calls(n)`: n independent pairs (one call; accumulate; one tree_summarize level) — siblings
  at the same depth, so the engine scheduler batches them;
- `chain(n)`: compact / refine as n chained pairs, each prompt holding the previous answer;
  the static part before the answer is prefilled early by the prefill-split pass.

`steps(...)` is a generator that yields `(template, inputs)` and receives each result, so one
plan serves both the sync and the async entry points. A streaming synthesizer (compact, refine,
simple_summarize) yields one `StreamedRun` instead: a graph whose output is the final call's
text, which the driver turns into the response's token generator.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from accel.engines.base import GenerationRequest
from accel.ir import CallOp, DecodeOp, GatherOp, GraphBuilder, Kind, Ref

from . import events
from .bindings import LLMBinding, Unbound
from .prompts import QUERY_PORT, LlamaPromptOp, PlanMismatch, RefinePromptOp, prompt_parts
from .streaming import StreamedRun

EMPTY = "Empty Response"
LOWERED_SYNTHESIZERS = ("CompactAndRefine", "Refine", "SimpleSummarize", "TreeSummarize", "Accumulate")
STREAMED_SYNTHESIZERS = ("CompactAndRefine", "Refine", "SimpleSummarize")

Step = Generator[tuple[Any, dict[str, Any]] | StreamedRun, Any, Any]
TemplateFor = Callable[[tuple[Any, ...], Callable[[], Any]], Any]


@dataclass(frozen=True)
class FillDecodeOp:
    """Decode for an app that sends no `max_tokens`: the server then generates up to the end
    of the context window, so the request asks for exactly that many tokens."""

    inner: DecodeOp
    engine: Any

    async def requests(self, values: dict[str, Any]) -> list[GenerationRequest]:
        (request,) = self.inner.requests(values)
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
    llm: Any
    binding: LLMBinding
    engine_name: str
    engine: Callable[[], Any]

    @property
    def kind(self) -> str:
        return type(self.synthesizer).__name__

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

    def calls_graph(self, template: Any, n: int, port: str) -> Any:
        """n independent calls of `template`, call i reading chunks[i] into `port`."""
        b = GraphBuilder()
        query, chunks = b.input(QUERY_PORT), b.input("chunks")
        op = LlamaPromptOp(self.llm, template, self.binding.chat)
        answers = {f"a{i}": self._pair(b, f"call{i}", op, template, {QUERY_PORT: query, port: Ref(chunks.node, i)})
                   for i in range(n)}
        b.output(b.add(Kind.AGGREGATE, "answers", inputs=answers, op=GatherOp("list")))
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
        if not streaming:
            answer = b.add(Kind.CALL, "answer0", inputs={"new": answer}, op=CallOp(_first_answer, blocking=False))
        for i in range(1, n):  # (a single call needs no refine template: simple_summarize has none)
            refine = RefinePromptOp(self.llm, synth._refine_template, synth._prompt_helper, self.binding.chat)
            inputs = {QUERY_PORT: query, "existing_answer": answer, "context_msg": Ref(chunks.node, i)}
            new = self._pair(b, f"refine{i}", refine, synth._refine_template, inputs)
            answer = new if streaming else b.add(Kind.CALL, f"answer{i}", inputs={"prev": answer, "new": new},
                                                 op=CallOp(_keep_answer, blocking=False))
        b.output(answer)
        return b.build()

    # ---- per-query plans ----------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        return bool(getattr(self.synthesizer, "_streaming", False))

    def steps(self, query: str, texts: list[str], template_for: TemplateFor) -> Step:
        """Yield graph runs; return the response text exactly as the synthesizer's get_response
        (for a streaming synthesizer: the token generator the driver sends back)."""
        synth, llm, kind = self.synthesizer, self.llm, self.kind
        if self.streaming:
            chunks = [self._summary_text(query, texts)] if kind == "SimpleSummarize" else self._refine_chunks(query, texts)
            if not chunks:
                return EMPTY
            graph = template_for(("stream", len(chunks)), lambda: self.chain_graph(len(chunks), streaming=True))
            return (yield StreamedRun(graph, {QUERY_PORT: query, "chunks": chunks},
                                      lambda: synth.get_response(query, texts), lambda: synth.aget_response(query, texts)))
        if kind in ("CompactAndRefine", "Refine"):
            chunks = self._refine_chunks(query, texts)
            if not chunks:
                return EMPTY
            answer = yield template_for(("chain", len(chunks)), lambda: self.chain_graph(len(chunks))), \
                {QUERY_PORT: query, "chunks": chunks}
            return answer or EMPTY
        if kind == "SimpleSummarize":
            template = synth._text_qa_template
            chunk = self._summary_text(query, texts)
            [answer] = yield self._calls(template, 1, "context_str", template_for), {QUERY_PORT: query, "chunks": [chunk]}
            return answer or EMPTY
        if kind == "Accumulate":
            template = synth._text_qa_template
            partial = template.partial_format(query_str=query)
            chunks = [c for text in texts for c in synth._prompt_helper.repack(partial, [text], llm=llm)]
            outputs = yield self._calls(template, len(chunks), "context_str", template_for), {QUERY_PORT: query, "chunks": chunks}
            return synth._format_response(outputs, "\n---------------------\n")
        if kind == "TreeSummarize":
            template = synth._summary_template
            while True:
                chunks = synth._prompt_helper.repack(template.partial_format(query_str=query), text_chunks=texts, llm=llm)
                outputs = yield self._calls(template, len(chunks), "context_str", template_for), {QUERY_PORT: query, "chunks": chunks}
                if len(chunks) == 1:
                    return outputs[0]
                texts = outputs
                events.level_started(synth, query, texts)
        raise PlanMismatch("llamaindex", f"no lowering for {kind}", "answered by stock code")

    def _refine_chunks(self, query: str, texts: list[str]) -> list[str]:
        """The chunks compact / refine answer over, packed by the synthesizer's own code."""
        from llama_index.core.prompts.prompt_utils import get_biggest_prompt

        synth = self.synthesizer
        if self.kind == "CompactAndRefine":
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


def _first_answer(new: str) -> str:
    if not new:  # stock refine would answer the next chunk with the QA prompt again
        raise PlanMismatch("llamaindex", "the first refine answer is empty", "answered by stock code")
    return new


def _keep_answer(prev: str, new: str) -> str:
    """Refine keeps the previous answer when a step returns an empty one."""
    return new or prev


def check_synthesizer(synth: Any) -> Unbound | None:
    kind = type(synth).__name__
    if kind not in LOWERED_SYNTHESIZERS:
        return Unbound(kind, f"response mode not lowered (supported: {', '.join(LOWERED_SYNTHESIZERS)})")
    if getattr(synth, "_streaming", False) and kind not in STREAMED_SYNTHESIZERS:
        return Unbound(kind, f"streaming {kind} runs as-is (streamed: {', '.join(STREAMED_SYNTHESIZERS)})")
    if getattr(synth, "_output_cls", None) is not None:
        return Unbound(kind, "structured output runs as-is")
    if getattr(synth, "_multimodal", False) or getattr(synth, "_structured_answer_filtering", False):
        return Unbound(kind, "multimodal synthesis or structured answer filtering runs as-is")
    return None
