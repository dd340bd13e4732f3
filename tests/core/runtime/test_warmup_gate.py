"""Compiled graphs' warm-ups (pass 3's partial prefills) go through the LLM engine's spare-capacity
gate, as learned prefill's do: sent while the engine has room, refused (and counted) when its
batch is full, and the answers and the real requests are the same either way. Fake engines
(named so) on a virtual clock."""

from __future__ import annotations

import asyncio

import pytest

from accel.engines.base import SamplingParams
from accel.ir import CallOp, GraphBuilder, ItemsOp, Kind, Slot, Template
from accel.passes import LLMInfo, PassContext, prefill_split
from accel.runtime.runtime import Runtime
from accel.testing.fakes import FakeEngine, FakeLLMEngine

INSTRUCTION = "You are a careful assistant. Answer only from the context below. " * 3


async def whitespace_tokenize(text: str, *, add_special_tokens: bool = True) -> list[int]:
    return ([1] if add_special_tokens else []) + [len(word) for word in text.split()]


def split_rag_template() -> Template:
    """An answer prompt whose head (instruction, question) is ready at once and whose context
    comes from an engine: pass 3 puts a warm-up of the head before the answer's prefill."""
    b = GraphBuilder()
    question, docs = b.input("question"), b.input("docs")
    vectors = b.add(Kind.EMBED, "embed", engine="embed", inputs={"texts": docs}, op=ItemsOp("texts"))
    context = b.add(Kind.CALL, "context", inputs={"v": vectors}, op=CallOp(lambda v: " | ".join(map(str, v)), blocking=False))
    parts = [INSTRUCTION, "Question: ", Slot("question"), "\nContext: ", Slot("context"), "\nAnswer:"]
    b.output(b.llm("answer", parts, {"question": question, "context": context}, params=SamplingParams(max_tokens=8)))
    context_for_pass = PassContext(safety_tail=2, llm=lambda engine: LLMInfo(whitespace_tokenize, None, block_size=4))
    graph = prefill_split(b.build(), context_for_pass)
    assert [n.kind for n in graph.nodes() if n.kind is Kind.PARTIAL_PREFILL] == [Kind.PARTIAL_PREFILL]
    return Template.from_graph(graph)


def run_three(virtual, spare: int) -> tuple[list[str], list, int]:
    template = split_rag_template()

    async def main():
        llm = FakeLLMEngine(latency=1.0)
        engines = {"llm": llm, "embed": FakeEngine("embed", latency=2.0)}
        async with Runtime(engines, llm_spare=lambda: spare) as rt:
            answers = await asyncio.gather(*(rt.run(template, {"question": f"question {i}", "docs": ["a", "b"]})
                                             for i in range(3)))
            assert rt.programs.refused() == ({"llm": rt.programs.gate("llm").refused} if rt.programs.gate("llm").refused else {})
            return list(answers), llm.requests, rt.programs.gate("llm").refused

    return virtual(main())


@pytest.mark.parametrize(("spare", "sent", "refused"), [(8, 3, 0), (1, 1, 2), (0, 0, 3)])
def test_warm_ups_go_only_while_the_llm_has_spare_capacity(virtual, spare: int, sent: int, refused: int) -> None:
    answers, requests, gate_refused = run_three(virtual, spare)
    warm_ups = [r for r in requests if r.prompt_token_ids is not None]
    real = [r for r in requests if r.prompt_token_ids is None]
    assert len(warm_ups) == sent and gate_refused == refused
    assert all(r.params.max_tokens == 1 for r in warm_ups)
    reference, reference_requests, _ = run_three(virtual, 8)
    assert answers == reference  # a refused warm-up changes no answer
    assert sorted(r.prompt for r in real) == sorted(r.prompt for r in reference_requests if r.prompt_token_ids is None)
