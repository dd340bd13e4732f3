"""ExpandEachOp in the graph scheduler, on a fake engine and a virtual clock: one sub-run per
item side by side, outputs in item order, each sub-run's end reported, and a failing item
raising its own error (the lowest failing item's) while the other sub-runs are cancelled."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from accel.ir import GraphBuilder, Kind, Template
from accel.ir.expand import Expansion
from accel.runtime.runtime import Runtime
from accel.testing.fakes import FakeEngine


@dataclass(frozen=True)
class Echo:
    """One request per sub-run: the item; the fake engine fails on items starting with "bad"."""

    async def requests(self, values):
        return [values["item"]]

    def output(self, values, results):
        return results[0]


def per_item() -> Template:
    b = GraphBuilder()
    item = b.input("item")
    b.output(b.add(Kind.SEARCH, "echo", engine="e", inputs={"item": item}, op=Echo()))
    return Template.from_graph(b.graph)


@dataclass
class Each:
    templates: tuple
    ends: list = field(default_factory=list)

    async def expand_each(self, values):
        return [Expansion(self.templates[0], {"item": item}, on_end=lambda err, k=k: self.ends.append((k, err)))
                for k, item in enumerate(values["items"])]


def mapped(op: Each) -> Template:
    b = GraphBuilder()
    items = b.input("items")
    b.output(b.add(Kind.EXPAND, "each", inputs={"items": items}, op=op))
    return Template.from_graph(b.graph)


def compute(request):
    if request.startswith("bad"):
        raise ValueError(request)
    return request.upper()


def latency(n: int) -> float:
    return 1.0


def run_each(virtual, op: Each, *item_lists: list[str], together: bool = False):
    """Each item list as one query (one after another, or `together`); returns the outcomes
    (an exception for a failed query), the virtual time taken and the engine's batches."""
    template = mapped(op)

    async def main():
        engine = FakeEngine("e", latency=latency, compute=compute)
        async with Runtime({"e": engine}) as rt:
            if together:
                outcomes = await asyncio.gather(*(rt.run(template, {"items": items}) for items in item_lists), return_exceptions=True)
            else:
                outcomes = [await rt.run(template, {"items": items}) for items in item_lists]
            return outcomes, asyncio.get_running_loop().time(), engine.batches

    return virtual(main())


def test_items_run_side_by_side_and_return_in_order(virtual):
    op = Each((per_item(),))
    (out, empty), elapsed, batches = run_each(virtual, op, ["a", "b", "c", "d"], [])
    assert out == ["A", "B", "C", "D"] and empty == []
    assert elapsed == pytest.approx(1.0)  # one batch for all four items, not four in a row
    assert sorted(sum(batches, [])) == ["a", "b", "c", "d"]
    assert sorted(op.ends) == [(0, None), (1, None), (2, None), (3, None)]


def test_the_lowest_failing_item_raises_and_other_queries_go_on(virtual):
    op = Each((per_item(),))
    (failed, ok), _, _ = run_each(virtual, op, ["a", "bad-1", "b", "bad-2"], ["x", "y"], together=True)
    assert isinstance(failed, ValueError) and str(failed) == "bad-1"
    assert ok == ["X", "Y"]
    failed_ends = sorted(k for k, err in op.ends if isinstance(err, ValueError))
    assert failed_ends in ([1], [1, 3])  # item 3 failed too, or was cancelled first
    assert len(op.ends) == 4 + 2  # every sub-run of both queries reported its end


@dataclass
class Capped(Each):
    """An op with a user's cap on how many items run at once."""

    limit: int | None = None

    def max_concurrency(self, values):
        return self.limit


def test_a_cap_runs_the_items_that_many_at_once_in_item_order(virtual):
    op = Capped((per_item(),), limit=2)
    (out,), elapsed, batches = run_each(virtual, op, ["a", "b", "c", "d", "e"])
    assert out == ["A", "B", "C", "D", "E"]
    assert batches == [["a", "b"], ["c", "d"], ["e"]]  # never more than 2 in flight, items in order
    assert elapsed == pytest.approx(3.0)
    (out,), elapsed, batches = run_each(virtual, Capped((per_item(),), limit=None), ["a", "b", "c"])
    assert out == ["A", "B", "C"] and batches == [["a", "b", "c"]] and elapsed == pytest.approx(1.0)
