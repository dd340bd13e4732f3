"""The template cache (issue 28 §6): a lock per key, bounded, least recently used out; and the
`Identity` key parts that name objects."""

from __future__ import annotations

import gc
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from accel.ir import CallOp, GraphBuilder, Kind, TemplateCache
from accel.ir.graph import Graph
from accel.types import Identity


def graph() -> Graph:
    b = GraphBuilder()
    x = b.input("x")
    b.output(b.add(Kind.CALL, "f", inputs={"x": x}, op=CallOp(str)))
    return b.build()


def test_least_recently_used_leaves_first() -> None:
    cache = TemplateCache(size=2)
    built: list[str] = []

    def get(key: str) -> object:
        return cache.get(key, (), lambda: (built.append(key), graph())[1])

    a = get("a")
    get("b")
    assert get("a") is a  # a is now the most recently used
    get("c")  # evicts b
    assert len(cache) == 2 and built == ["a", "b", "c"]
    assert get("a") is a
    get("b")
    assert built == ["a", "b", "c", "b"]


def test_a_failed_build_caches_nothing() -> None:
    cache = TemplateCache()
    tries: list[int] = []

    def build() -> Graph:
        tries.append(1)
        if len(tries) == 1:
            raise ValueError("first build fails")
        return graph()

    with pytest.raises(ValueError):
        cache.get("k", (), build)
    assert len(cache) == 0
    assert cache.get("k", (), build) is cache.get("k", (), build)
    assert len(tries) == 2


def test_keys_build_side_by_side_and_one_key_builds_once() -> None:
    cache = TemplateCache()
    slow_started, release = threading.Event(), threading.Event()
    slow_builds: list[int] = []

    def slow() -> Graph:
        slow_builds.append(1)
        slow_started.set()
        assert release.wait(30)
        return graph()

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(cache.get, "slow", (), slow)
        assert slow_started.wait(30)
        waiting = [pool.submit(cache.get, "slow", (), slow) for _ in range(2)]
        # another key builds while "slow" is still building (one global build lock would block)
        assert cache.get("fast", (), graph) is not None
        assert not first.done()
        release.set()
        templates = {id(f.result(30)) for f in [first, *waiting]}
    assert len(templates) == 1 and slow_builds == [1]


def test_identity_is_equal_only_for_the_same_live_object() -> None:
    class Thing:
        pass

    one, two = Thing(), Thing()
    assert Identity(one) == Identity(one) and hash(Identity(one)) == hash(Identity(one))
    assert Identity(one) != Identity(two)
    key = Identity(one)
    del one
    gc.collect()
    later = [Thing() for _ in range(1000)]  # some may reuse the dead object's id
    assert all(key != Identity(obj) for obj in later)
