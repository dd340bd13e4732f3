"""`accel.wrap` never refuses a LlamaIndex object with an entry point: each comes back as an
instance of its own class (chat engines, retrievers, routers, sub-question engines, workflows,
agents, the app's own subclasses), sharing the original's state; only objects of no registered
framework raise `TypeError`, naming what is supported. Uses MockLLM and the in-memory index
with the packaged MiniLM (no LLM server needed)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import accel
from accel.session import get_session

from .conftest import text_nodes


@pytest.fixture(scope="module")
def index(embed_model: Any) -> Any:
    from llama_index.core import VectorStoreIndex

    return VectorStoreIndex(text_nodes(), embed_model=embed_model)


@pytest.fixture(scope="module")
def mock_llm() -> Any:
    from llama_index.core.llms import MockLLM

    return MockLLM(max_tokens=8)


def objects(index: Any, llm: Any) -> dict[str, Any]:
    from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
    from llama_index.core.chat_engine import SimpleChatEngine
    from llama_index.core.query_engine import RouterQueryEngine, SubQuestionQueryEngine
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.selectors import LLMSingleSelector
    from llama_index.core.tools import QueryEngineTool, ToolMetadata
    from llama_index.core.workflow import StartEvent, StopEvent, Workflow, step

    class Echo(Workflow):
        @step
        async def echo(self, ev: StartEvent) -> StopEvent:
            return StopEvent(result=ev.text)

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    engine = index.as_query_engine(llm=llm)
    tools = [QueryEngineTool(query_engine=engine, metadata=ToolMetadata(name="docs", description="the docs"))]
    return {
        "simple": SimpleChatEngine.from_defaults(llm=llm),
        "context": index.as_chat_engine(chat_mode="context", llm=llm),
        "condense_question": index.as_chat_engine(chat_mode="condense_question", llm=llm),
        "condense_plus_context": index.as_chat_engine(chat_mode="condense_plus_context", llm=llm),
        "retriever": index.as_retriever(similarity_top_k=2),
        "fusion": QueryFusionRetriever([index.as_retriever()], llm=llm, num_queries=1, use_async=False),
        "router": RouterQueryEngine(selector=LLMSingleSelector.from_defaults(llm=llm), query_engine_tools=tools, llm=llm),
        "sub_question": SubQuestionQueryEngine.from_defaults(query_engine_tools=tools, llm=llm,
                                                             question_gen=_question_gen(llm)),
        "workflow": Echo(),
        "function_agent": FunctionAgent(tools=[add], llm=llm),
        "react_agent": ReActAgent(tools=[add], llm=llm),
        "agent_workflow": AgentWorkflow(agents=[FunctionAgent(name="adder", description="adds", tools=[add], llm=llm)]),
    }


def _question_gen(llm: Any) -> Any:
    from llama_index.core.question_gen import LLMQuestionGenerator

    return LLMQuestionGenerator.from_defaults(llm=llm)


def test_every_object_is_wrapped_as_an_instance_of_its_class(index: Any, mock_llm: Any) -> None:
    for name, obj in objects(index, mock_llm).items():
        fast = accel.wrap(obj)
        assert isinstance(fast, type(obj)), name
        assert type(fast).__name__ == type(obj).__name__, name  # span names stay stock's
        assert "accel.wrap(" in fast.explain(), name
        assert accel.wrap(fast) is fast or isinstance(accel.wrap(fast), type(obj)), name


def test_wrapped_chat_engine_shares_the_original_memory(index: Any, mock_llm: Any) -> None:
    engine = index.as_chat_engine(chat_mode="condense_plus_context", llm=mock_llm)
    fast = accel.wrap(engine)
    answer = fast.chat("which animal sleeps?")
    assert [m.content for m in engine.chat_history] == ["which animal sleeps?", answer.response]
    assert fast.chat_history == engine.chat_history
    fast.reset()
    assert engine.chat_history == []


def test_workflow_and_agent_runs_are_wrapped_runs(index: Any, mock_llm: Any) -> None:
    found = objects(index, mock_llm)
    fast = accel.wrap(found["workflow"])

    async def run() -> Any:
        return await fast.run(text="hello")

    assert asyncio.run(run()) == "hello"


def test_chat_engines_built_per_session_share_one_retriever_template(index: Any, mock_llm: Any) -> None:
    """`as_chat_engine` makes a new retriever per engine; wrapping one per session must not
    build (and keep) a template per session."""
    accel.wrap(index.as_chat_engine(chat_mode="context", llm=mock_llm))
    templates = len(get_session()._templates)
    for _ in range(3):
        fast = accel.wrap(index.as_chat_engine(chat_mode="context", llm=mock_llm))
    assert len(get_session()._templates) == templates
    assert "retriever: VectorIndexRetriever -> HuggingFaceEmbedding -> Embed" in fast.explain()


def test_objects_of_no_framework_raise_type_error_naming_what_is_supported() -> None:
    with pytest.raises(TypeError) as raised:
        accel.wrap(object())
    message = str(raised.value)
    assert "chat engines" in message and "Workflow" in message and "retrievers" in message
