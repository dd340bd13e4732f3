"""Adapters lower, passes optimise: no p-graph an adapter emits carries a scheduling decision.

Every example app of both frameworks is wrapped and asked one question (so graphs built while
a query runs, such as LlamaIndex's synthesis sub-templates and LangChain's branch
sub-templates, exist too), a LlamaIndex ingestion pipeline is wrapped and run, and then every
template the process-wide session holds (those of any test app run earlier in this process
included) is checked: its p-graph, the graph before the passes, has no micro-batch, stream,
map, warm-up, partial prefill / decode or objective in it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import accel
from accel.adapters.common.dropin import state_of
from accel.benchmarks.apps import EXAMPLES
from accel.benchmarks.drivers import driver_for
from accel.benchmarks.workload import build_workload
from accel.examples.stack import StackConfig

from ..adapters.plain_graphs import assert_plain, scheduling_in

pytestmark = [pytest.mark.engines, pytest.mark.slow]

CASES = sorted((name, framework) for name, spec in EXAMPLES.items() for framework in spec.modules)


@pytest.fixture(scope="module")
def workload() -> Any:
    return build_workload(1, modules=("heapq",), max_chars=800)


@pytest.mark.parametrize(("name", "framework"), CASES, ids=[f"{n}-{f}" for n, f in CASES])
def test_example_p_graphs_carry_no_scheduling(stack: StackConfig, workload: Any, name: str, framework: str) -> None:
    from accel.session import get_session

    spec = EXAMPLES[name]
    module = spec.module(framework)
    index = module.build_index(stack, workload.documents, f"t_{uuid.uuid4().hex[:8]}")
    fast = accel.wrap(module.build_app(stack, index, **spec.app_options))
    driver = driver_for(framework)
    try:
        assert driver.call(fast, workload.questions[0])
    finally:
        driver.close()
    assert assert_plain(get_session()._templates._templates.values()) > 0


def test_llamaindex_ingestion_p_graph_is_plain_and_the_pass_cuts_it(stack: StackConfig) -> None:
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import Document
    from llama_index.core.vector_stores import SimpleVectorStore

    from accel.examples.llamaindex.models import embed_model

    def pipeline_of(**options: Any) -> Any:
        return accel.wrap(IngestionPipeline(transformations=[SentenceSplitter(chunk_size=64, chunk_overlap=8), embed_model(stack)],
                                            vector_store=SimpleVectorStore()), **options)

    pipeline = pipeline_of()
    nodes = pipeline.run(documents=[Document(text="heaps keep the smallest item first. " * 40)])
    assert len(nodes) > 2 and all(n.embedding for n in nodes)
    lowering = state_of(pipeline).helper  # the drop-in's PipelineLowering
    template = lowering._template("pipeline", lowering._plan)
    assert not scheduling_in(template.p_graph)
    assert template.graph.node("embed").schedule.micro_batch  # stage_decompose's doing
    whole = pipeline_of(disabled_passes=["stage_decompose"])
    whole_lowering = state_of(whole).helper
    assert whole_lowering._template("pipeline", whole_lowering._plan).graph.node("embed").schedule.micro_batch is None
    assert [n.embedding for n in whole.run(documents=[Document(text="heaps keep the smallest item first. " * 40)])] == \
        [n.embedding for n in nodes]
