"""A chain of plain Python (lambdas, passthroughs, picks, prompts, parsers in sequences,
parallels, assigns and branches) has no engine work: `accel.wrap` takes it without a capture
(ACCEL_AUTO wraps each new chain at its first call, and the capture cost more than the call),
and every entry point answers as stock. No engines needed."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableBranch, RunnableLambda, RunnableParallel, RunnablePassthrough

import accel
from accel.adapters.langchain.structure import python_only

PROMPT = ChatPromptTemplate.from_template("Q: {question}")
CHAINS = {
    "lambdas": RunnableLambda(lambda x: x + 1) | RunnableLambda(lambda x: x * 2),
    "parallel-assign": (RunnableParallel(a=RunnableLambda(lambda x: x), b=RunnablePassthrough())
                        | RunnablePassthrough.assign(c=lambda d: d["a"] + d["b"]) | RunnableLambda(lambda d: d["c"])),
    "branch-pick": (RunnablePassthrough.assign(double=lambda x: x["n"] * 2).pick("double")
                    | RunnableBranch((lambda v: v > 4, RunnableLambda(lambda v: v - 4)), RunnableLambda(lambda v: -v))),
    "prompt-parser": {"question": RunnablePassthrough()} | PROMPT | RunnableLambda(lambda p: p.to_string()) | StrOutputParser(),
}
INPUTS = {"lambdas": [1, 2], "parallel-assign": [3, 4], "branch-pick": [{"n": 1}, {"n": 5}], "prompt-parser": ["a", "b"]}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_a_plain_python_chain_answers_as_stock_on_every_entry_point(name: str) -> None:
    chain, inputs = CHAINS[name], INPUTS[name]
    assert python_only(chain)
    fast = accel.wrap(chain)
    assert not fast.lowered
    assert [fast.invoke(x) for x in inputs] == [chain.invoke(x) for x in inputs]
    assert fast.batch(inputs) == chain.batch(inputs)
    assert [list(fast.stream(x)) for x in inputs] == [list(chain.stream(x)) for x in inputs]

    async def both() -> tuple[list, list]:
        ours = [await fast.ainvoke(x) for x in inputs] + [await fast.abatch(inputs)]
        theirs = [await chain.ainvoke(x) for x in inputs] + [await chain.abatch(inputs)]
        return ours, theirs

    ours, theirs = asyncio.run(both())
    assert ours == theirs
    assert "no engine work" in fast.explain() or "opaque" in fast.explain()


def test_a_chain_with_a_model_is_not_plain_python() -> None:
    model = FakeListChatModel(responses=["hi"])
    assert not python_only(PROMPT | model | StrOutputParser())
    assert not python_only(RunnableParallel(a=RunnablePassthrough(), b=PROMPT | model))


def test_what_streams_its_own_way_when_run_as_is() -> None:
    """`has_own_stream`: where a stock `stream` of an opaque part yields what its `invoke` does
    not (a model's chunks, a JSON parser's growing objects, a generator's pieces), looking
    through sequences, parallels, assigns, branches and fallbacks; lambdas, prompts and picks
    answer once, as `invoke` does."""
    from langchain_core.output_parsers import JsonOutputParser
    from langchain_core.runnables import RunnableGenerator

    from accel.adapters.langchain.structure import has_own_stream

    def pieces(chunks):
        yield from chunks

    model = FakeListChatModel(responses=["x"])
    once = [*CHAINS.values(), PROMPT.with_fallbacks([PROMPT]), RunnableLambda(lambda x: x).pick("a")]
    own = [model, PROMPT | model, JsonOutputParser(), RunnableGenerator(pieces), RunnableParallel(a=PROMPT, b=PROMPT | model),
           RunnablePassthrough.assign(j=JsonOutputParser()), RunnableBranch((lambda v: v, PROMPT), model),
           PROMPT.with_fallbacks([model]), model.bind(stop=["\n"])]
    assert [has_own_stream(chain) for chain in once] == [False] * len(once)
    assert [has_own_stream(chain) for chain in own] == [True] * len(own)
