"""Capture reaches engines through the `EngineRegistry` protocol (issue 10), not the session:
any registry drives it, and the session is one such registry."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from accel.adapters.langchain.capture import Capture
from accel.ir import Kind, TemplateCache
from accel.registry import EngineRegistry, TemplateCompiler
from accel.session import Session


class DictRegistry:
    """Engines by (kind, key) in a dict; nothing is started."""

    def __init__(self) -> None:
        self.made: dict[tuple[str, Hashable], str] = {}
        self.engines: dict[str, Any] = {}
        self.templates = TemplateCache()

    def engine(self, kind: str, key: Hashable, factory: Callable[[], Any], *, limits: Any = None) -> str:
        if (kind, key) not in self.made:
            name = self.made[(kind, key)] = f"{kind}-{len(self.made)}"
            self.engines[name] = factory()
        return self.made[(kind, key)]

    def get_engine(self, name: str) -> Any:
        return self.engines[name]

    def pass_profiles(self) -> Mapping[str, int]:
        return {}

    def template(self, structure_key: Hashable, build: Callable[[], Any], *, context: Any = None,
                 disabled_passes: Iterable[str] = (), passes: bool = True) -> Any:
        return self.templates.get(structure_key, (), build, None)


def test_the_session_is_a_template_compiler() -> None:
    assert isinstance(Session(), TemplateCompiler)
    assert isinstance(DictRegistry(), EngineRegistry)


def test_any_registry_drives_capture() -> None:
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableBranch, RunnableLambda
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="EMPTY", model="m", temperature=0, max_tokens=4)
    answer = ChatPromptTemplate.from_messages([("human", "{question}")]) | model | StrOutputParser()
    chain = RunnableBranch((RunnableLambda(lambda x: bool(x)), answer), RunnableLambda(lambda x: "empty"))
    registry = DictRegistry()
    capture = Capture(registry)
    graph = capture.build(capture.lower_root(RunnableLambda(lambda q: {"question": q}) | chain))
    assert list(registry.made) == [("llm", ("http://127.0.0.1:9/v1", "m"))]  # one engine for the model, made once
    (branch,) = [n for n in graph.nodes() if n.kind is Kind.EXPAND]
    decodes = [n for t in branch.op.templates for n in t.nodes if n.kind is Kind.DECODE]
    assert [d.engine for d in decodes] == ["llm-0"]
