"""Capture reaches engines through the `EngineRegistry` protocol (issue 10), not the session:
any registry drives it, and the session is one such registry."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from accel.adapters.langchain.capture import Capture
from accel.ir import Kind, Template, TemplateCache
from accel.registry import EngineRegistry, TemplateCompiler
from accel.session import Session
from accel.types import EngineSpec, TemplateBuild


class DictRegistry:
    """Engines by (kind, key) in a dict; nothing is started; templates are not optimised."""

    def __init__(self) -> None:
        self.made: dict[tuple[str, Hashable], str] = {}
        self.engines: dict[str, Any] = {}
        self.templates = TemplateCache()

    def engine(self, spec: EngineSpec) -> str:
        if (spec.kind, spec.key) not in self.made:
            name = self.made[(spec.kind, spec.key)] = f"{spec.kind}-{len(self.made)}"
            self.engines[name] = spec.factory()
        return self.made[(spec.kind, spec.key)]

    def get_engine(self, name: str) -> Any:
        return self.engines[name]

    def template(self, build: TemplateBuild) -> Template:
        return self.templates.get(build.key, (), build.graph, None)


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
