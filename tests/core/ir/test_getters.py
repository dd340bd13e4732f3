"""`operator.itemgetter` as a local op: the stock getter on whole values, and a window counted
from the front that gives the same list when run on any cut of it into slices."""

from __future__ import annotations

import random
from operator import itemgetter

import pytest

from accel.ir.getters import ITEM_OFFSET, GetItemOp, getter_keys, prefix_window


@pytest.mark.parametrize(("window", "expected"), [
    (slice(0, 2), (0, 2)), (slice(None, 3), (0, 3)), (slice(1, None), (1, None)), (slice(2, 5, 1), (2, 5)),
    (slice(-1, None), None), (slice(0, -1), None), (slice(0, 4, 2), None), (slice(0, 2.0), None),
])
def test_a_window_is_a_slice_counted_from_the_front(window, expected):
    assert prefix_window(getter_keys(itemgetter(window))) == expected


def test_only_a_single_slice_of_an_itemgetter_is_a_window():
    assert getter_keys(lambda xs: xs[:2]) is None
    assert getter_keys(itemgetter("question")) == ("question",)
    assert prefix_window(("question",)) is None
    assert prefix_window((slice(0, 2), slice(0, 1))) is None


@pytest.mark.parametrize("window", [slice(0, 2), slice(1, None), slice(None, 1), slice(3, 7), slice(2, 2)])
def test_any_cut_of_the_list_gives_the_getters_value(window):
    getter = itemgetter(window)
    op = GetItemOp(getter, prefix_window(getter_keys(getter)))
    rng = random.Random(0)
    for n in range(9):
        items = [f"line {i}" for i in range(n)]
        for _ in range(5):
            cuts = sorted(rng.sample(range(1, n), rng.randint(0, n - 1))) if n > 1 else []
            slices = [items[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
            offsets = [sum(map(len, slices[:k])) for k in range(len(slices))]
            parts = [op.compute({"value": part, ITEM_OFFSET: at}) for part, at in zip(slices, offsets, strict=True)]
            assert [x for part in parts for x in part] == getter(items)


def test_the_whole_value_goes_through_the_stock_getter():
    op = GetItemOp(itemgetter(slice(0, 2)), (0, 2))
    assert op.compute({"value": "abc"}) == "ab" and op.compute({"value": (1, 2, 3)}) == (1, 2)
    with pytest.raises(TypeError):  # the error stock's getter raises
        op.compute({"value": 5})
    assert op.describe() == "operator.itemgetter(slice(0, 2, None))"
