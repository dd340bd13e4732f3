"""Compiled graphs' warm-ups (pass 3's partial prefills) go through the LLM engine's spare-capacity
gate, as learned prefill's do: sent while the engine has room, refused (and counted) when its
batch is full, not sent (and counted) when their prefix is too short to pay for a request, and
the answers and the real requests are the same either way. Fake engines (named so) on a
virtual clock."""

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


def run_three(virtual, spare: int, least: int = 0, tokenized: list[str] | None = None) -> tuple[list[str], list, int]:
    template = split_rag_template()

    async def main():
        llm = FakeLLMEngine(latency=1.0)
        engines = {"llm": llm, "embed": FakeEngine("embed", latency=2.0)}
        async with Runtime(engines, llm_spare=lambda: spare, warm_min_tokens=lambda: least) as rt:
            answers = await asyncio.gather(*(rt.run(template, {"question": f"question {i}", "docs": ["a", "b"]})
                                             for i in range(3)))
            assert rt.programs.refused() == ({"llm": rt.programs.gate("llm").refused} if rt.programs.gate("llm").refused else {})
            assert rt.programs.too_short() == ({"llm": 3} if least > PREFIX_TOKENS else {})
            return list(answers), llm.requests, rt.programs.gate("llm").refused

    return virtual(main())


@pytest.mark.parametrize(("spare", "sent", "refused"), [(8, 3, 0), (2, 2, 1), (1, 1, 2), (0, 0, 3)])
def test_warm_ups_go_only_while_the_llm_has_spare_capacity(virtual, spare: int, sent: int, refused: int) -> None:
    """A warm-up whose request is queued counts once, as load (spare 2: the second query's
    warm-up goes beside the first's; counted as a group too, it was refused)."""
    answers, requests, gate_refused = run_three(virtual, spare)
    warm_ups = [r for r in requests if r.prompt_token_ids is not None]
    real = [r for r in requests if r.prompt_token_ids is None]
    assert len(warm_ups) == sent and gate_refused == refused
    assert all(r.params.max_tokens == 1 for r in warm_ups)
    reference, reference_requests, _ = run_three(virtual, 8)
    assert answers == reference  # a refused warm-up changes no answer
    assert sorted(r.prompt for r in real) == sorted(r.prompt for r in reference_requests if r.prompt_token_ids is None)


PREFIX_TOKENS = 36
"""The warm-up's cut: the head (1 special + 33 instruction + "Question:" + 2 question +
"Context:" tokens, whitespace-tokenized) less the safety tail of 2, down to a block of 4."""


@pytest.mark.parametrize("least", [0, PREFIX_TOKENS, PREFIX_TOKENS + 1, 10_000])
def test_warm_ups_too_short_to_pay_for_a_request_are_not_sent(virtual, least: int) -> None:
    answers, requests, refused = run_three(virtual, spare=8, least=least)
    warm_ups = [r for r in requests if r.prompt_token_ids is not None]
    assert refused == 0
    if least <= PREFIX_TOKENS:
        assert len(warm_ups) == 3 and all(len(r.prompt_token_ids) == PREFIX_TOKENS + 1 for r in warm_ups)
    else:
        assert warm_ups == []
    reference, reference_requests, _ = run_three(virtual, 8)
    assert answers == reference
    assert sorted(r.prompt for r in requests if r.prompt_token_ids is None) == \
        sorted(r.prompt for r in reference_requests if r.prompt_token_ids is None)


def test_a_prefix_surely_under_the_minimum_costs_no_tokenize_round_trip() -> None:
    """Its bytes bound its tokens: a head of ~250 bytes cannot reach 10,000 tokens, so it is
    not tokenized (on a server, a /tokenize request) for a warm-up that would send nothing."""
    from accel.ir.ops import WarmupOp

    calls: list[str] = []

    async def counting_tokenize(text: str, *, add_special_tokens: bool = True) -> list[int]:
        calls.append(text)
        return await whitespace_tokenize(text, add_special_tokens=add_special_tokens)

    op = WarmupOp(prefix=(INSTRUCTION, "Question: ", Slot("question"), "\nContext: "), tokenize=counting_tokenize, block_size=4,
                  safety_tail=2)
    values = {"question": "question 1"}
    assert asyncio.run(op.requests(values, 10_000)) == [] and calls == []
    assert asyncio.run(op.requests(values, PREFIX_TOKENS + 1)) == [] and len(calls) == 1  # not surely: tokenized
    assert len(asyncio.run(op.requests(values, PREFIX_TOKENS))[0].prompt_token_ids) == PREFIX_TOKENS + 1


def test_a_shared_static_head_shorter_than_the_minimum_is_not_warmed() -> None:
    """`share_prefixes`' warm-up of a head every query shares is tokenized once and sent only
    where it carries at least the minimum."""
    from accel.passes.prefixes import StaticWarmupOp

    op = StaticWarmupOp(prefix=(INSTRUCTION,), tokenize=whitespace_tokenize, block_size=4, safety_tail=2)
    (sent,) = asyncio.run(op.requests({}))
    warmed = len(sent.prompt_token_ids) - 1  # less the one token past the cut
    assert warmed == 32  # 1 special + 33 words, less the tail, down to a block
    assert len(asyncio.run(op.requests({}, warmed))) == 1
    assert asyncio.run(op.requests({}, warmed + 1)) == []
