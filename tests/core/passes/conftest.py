"""A tiny sequential reference interpreter for the IR contract, fake engine functions, and
sample graphs. Equivalence tests run a graph before and after a pass and compare outputs."""

from __future__ import annotations

import hashlib
import inspect
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest

from accel.engines.base import Generation, GenerationChunk, GenerationRequest, SamplingParams
from accel.ir import (
    CallOp,
    Graph,
    GraphBuilder,
    ItemsOp,
    Kind,
    Ref,
    Slot,
    Streams,
)
from accel.ir.getters import ITEM_OFFSET
from accel.testing.templates import ModuleTemplate, refine


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:6]


@dataclass
class FakeEngines:
    """Deterministic fake engine functions (no latency) that record every request."""

    seed: int = 0
    requests: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    store: list[tuple[list[float], str]] = field(default_factory=list)

    def call(self, engine: str, request: Any) -> Any:
        self.requests[engine].append(request)
        return getattr(self, f"_{engine}")(request)

    def _llm(self, req: GenerationRequest) -> Generation:
        if req.prompt_token_ids is not None:
            return Generation("", len(req.prompt_token_ids), 1)
        prompt = req.prompt if req.prompt is not None else str(req.messages)
        if "Rewrite" in prompt:
            text = "\n".join(f"variant {i} of {_digest(prompt)}" for i in range(3)) + "\n"
        else:
            text = f"answer {_digest(prompt)}"
        return Generation(text, len(prompt), len(text))

    def _embed(self, text: str) -> list[float]:
        return [float(len(text)), float(sum(map(ord, text)) % 97)]

    def _vectordb(self, request: Any) -> Any:
        if request[0] == "ingest":
            self.store.append((request[1], request[2]))
            return True
        _, vector, k = request
        ranked = sorted(self.store, key=lambda e: (abs(e[0][0] - vector[0]) + abs(e[0][1] - vector[1]), e[1]))
        return [text for _, text in ranked[:k]]

    def _rerank(self, pair: tuple[str, str]) -> float:
        return int(_digest(pair[0] + pair[1]), 16) / 16**6

    def chunks(self, text: str) -> list[str]:
        """Cut a text into random small deltas, as an engine stream would."""
        rng = random.Random(self.seed)
        out, i = [], 0
        while i < len(text):
            j = i + rng.randint(1, 5)
            out.append(text[i:j])
            i = j
        return out


async def _engine_value(node, values: dict[str, Any], engines: FakeEngines) -> Any:
    op = node.op
    requests = await op.requests(values)
    if node.schedule.streams is Streams.DECODE:
        (request,) = requests
        generation = engines.call(node.engine, request)

        async def chunks():
            for delta in engines.chunks(generation.text):
                yield GenerationChunk(delta)
            yield GenerationChunk("", finished=True, generation=generation)

        return [item async for item in op.stream(values, chunks())]
    results = [engines.call(node.engine, r) for r in requests]
    return op.output(values, results)


async def _node_value(node, values: dict[str, Any], engines: FakeEngines) -> Any:
    if node.kind is Kind.OUTPUT and node.op is None:
        return values["value"]
    if not node.is_engine:
        compute = node.op.compute
        return await compute(values) if inspect.iscoroutinefunction(compute) else compute(values)
    m = node.schedule.micro_batch
    if m:
        port = node.batch_port
        items = list(values[port])
        return [
            await _engine_value(node, {**values, port: items[i : i + m]}, engines) for i in range(0, len(items), m)
        ]
    return await _engine_value(node, values, engines)


async def interpret(graph: Graph, inputs: dict[str, Any], engines: FakeEngines) -> Any:
    """Run `graph` one node at a time in topological order, following the streaming contract:
    a streaming node's value is its list of items; a mapped node runs once per item (a
    positional op with the item's element offset)."""
    graph.validate()
    values: dict[str, Any] = {}
    for name in graph.topo_order():
        node = graph.node(name)
        if node.kind is Kind.INPUT:
            values[name] = inputs[name]
            continue
        resolved = {port: ref.resolve(values[ref.node]) for port, ref in node.inputs.items()}
        if node.map_port is not None:
            items = resolved[node.map_port]
            offsets = [sum(map(len, items[:k])) for k in range(len(items))]
            at = (lambda k: {ITEM_OFFSET: offsets[k]}) if getattr(node.op, "positional", False) else (lambda k: {})
            values[name] = [
                await _node_value(node, {**resolved, node.map_port: item, **at(k)}, engines) for k, item in enumerate(items)
            ]
        else:
            values[name] = await _node_value(node, resolved, engines)
    return values[graph.output.name]


async def fake_tokenize(text: str, *, add_special_tokens: bool = True) -> list[int]:
    """Whitespace 'tokenizer' standing in for the engine's (async, like LLMEngine.tokenize)."""
    return ([1] if add_special_tokens else []) + [len(word) for word in text.split()]


async def fake_render_chat(messages: list[dict[str, str]]) -> str:
    return "".join(f"<|{m['role']}|> {m['content']} <|end|> " for m in messages)


# ---- sample graphs ---------------------------------------------------------------------

QA = ("Context: ", Slot("context"), "\nQuestion: ", Slot("question"), "\nAnswer:")
REFINE = ("Question: ", Slot("question"), "\nExisting answer: ", Slot("answer"), "\nMore context: ", Slot("context"))
REWRITE = ("Rewrite the question in three ways, one per line. " * 4, "Question: ", Slot("question"))


def _index(b: GraphBuilder, inputs: dict[str, Ref], config: dict[str, Any]) -> Ref:
    vectors = b.add(Kind.EMBED, "embed", engine="embed", inputs={"texts": inputs["docs"]}, op=ItemsOp("texts"), attrs=dict(config))
    rows = b.add(
        Kind.CALL, "rows", inputs={"vectors": vectors, "docs": inputs["docs"]},
        op=CallOp(lambda vectors, docs: list(zip(vectors, docs)), blocking=False),
    )
    return b.add(
        Kind.INGEST, "ingest", engine="vectordb", inputs={"rows": rows},
        op=ItemsOp("rows", request=lambda row, _: ("ingest", row[0], row[1])),
    )


def _expand(b: GraphBuilder, inputs: dict[str, Ref], config: dict[str, Any]) -> Ref:
    return b.llm("rewrite", REWRITE, {"question": inputs["question"]}, split="lines", params=SamplingParams(max_tokens=64))


def _retrieve(b: GraphBuilder, inputs: dict[str, Ref], config: dict[str, Any]) -> Ref:
    vectors = b.add(Kind.EMBED, "embed", engine="embed", inputs={"texts": inputs["expand"]}, op=ItemsOp("texts"))
    hits = b.add(
        Kind.SEARCH, "search", engine="vectordb", inputs={"vectors": vectors},
        op=ItemsOp("vectors", request=lambda v, _: ("search", v, config.get("k", 2))),
    )
    return b.add(
        Kind.CALL, "merge", inputs={"hits": hits},
        op=CallOp(lambda hits: list(dict.fromkeys(h for hs in hits for h in hs)), blocking=False),
    )


def _rerank(b: GraphBuilder, inputs: dict[str, Ref], config: dict[str, Any]) -> Ref:
    scores = b.add(
        Kind.RERANK, "score", engine="rerank", inputs={"docs": inputs["retrieve"], "question": inputs["question"]},
        op=ItemsOp("docs", request=lambda doc, values: (values["question"], doc)), attrs={"batch_port": "docs"},
    )
    return b.add(
        Kind.CALL, "top", inputs={"docs": inputs["retrieve"], "scores": scores},
        op=CallOp(lambda docs, scores: [d for _, d in sorted(zip(scores, docs), reverse=True)][:3] + ["", "", ""], blocking=False),
    )


def _synthesize(b: GraphBuilder, inputs: dict[str, Ref], config: dict[str, Any]) -> Ref:
    return refine(b, question=inputs["question"], chunks=inputs["rerank"], n=config.get("n", 3), qa_prompt=QA, refine_prompt=REFINE)


def advanced_rag() -> ModuleTemplate:
    """Teola Fig. 2d/3: indexing, query expansion, retrieval, reranking, refine synthesis."""
    t = ModuleTemplate("advanced_rag", ["question", "docs"])
    t.component("index", _index, reads=["docs"])
    t.component("expand", _expand, reads=["question"])
    t.component("retrieve", _retrieve, reads=["expand"])
    t.component("rerank", _rerank, reads=["retrieve", "question"])
    t.component("synth", _synthesize, reads=["rerank", "question"])
    return t


DOCS = [f"document number {i} about topic {i % 4} " + "x" * i for i in range(10)]


@pytest.fixture
def rag_template() -> ModuleTemplate:
    return advanced_rag()


@pytest.fixture
def rag_inputs() -> dict[str, Any]:
    return {"question": "what is topic 2 about?", "docs": list(DOCS)}


@pytest.fixture
def run():
    """`await run(graph, inputs)` -> (output, engines with their recorded requests)."""

    async def _run(graph: Graph, inputs: dict[str, Any], seed: int = 0):
        engines = FakeEngines(seed=seed)
        return await interpret(graph, inputs, engines), engines

    return _run


@pytest.fixture
def fake_ctx():
    """A pass context with the fake tokenizer / chat template and a small block size."""
    from accel.passes import LLMInfo, PassContext

    llm = LLMInfo(fake_tokenize, fake_render_chat, block_size=4)
    return PassContext(safety_tail=2, llm=lambda engine: llm)
