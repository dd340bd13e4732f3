"""Framework classes are compared by identity, looked up only once their module is imported."""

from __future__ import annotations

import sys
import types

from accel.adapters.common.classes import is_exactly, loaded_class


def test_a_class_of_the_same_name_elsewhere_does_not_match(monkeypatch) -> None:
    real = types.ModuleType("fake_framework.chains.llm")
    impostor = types.ModuleType("user_code")
    real.LLMChain = type("LLMChain", (), {})
    impostor.LLMChain = type("LLMChain", (), {})
    path = ("fake_framework.chains.llm", "LLMChain")
    assert loaded_class(*path) is None and not is_exactly(real.LLMChain(), path)  # not imported: nothing matches
    monkeypatch.setitem(sys.modules, "fake_framework.chains.llm", real)
    assert is_exactly(real.LLMChain(), path) and is_exactly(real.LLMChain, path)
    assert not is_exactly(impostor.LLMChain(), path)  # same name, another class
    subclass = type("MyChain", (real.LLMChain,), {})
    assert not is_exactly(subclass(), path)  # a subclass may behave otherwise
