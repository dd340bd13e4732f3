"""The engine catalogue (`accel.engines.catalogue`) is the one place that makes the engines
apps reach: no engine class of engines/ is constructed elsewhere but in tests and benchmarks,
and each kind's spec keeps the key and the limits its bindings gave it."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from accel.engines import catalogue
from accel.engines.limits import EngineLimits

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("accel", "adapters", "patches", "tracer", "examples", "scripts")
"""Everything but engines/, tests/ and benchmarks/ (which measure engines directly)."""
NOT_YET: dict[str, str] = {}
"""Sites still allowed to make engines themselves, with the reason (none left)."""


def _py_files(top: Path) -> list[Path]:
    found: list[Path] = []
    for folder, _, names in os.walk(top):  # does not follow accel/engines etc., links to the top folders
        found += [Path(folder) / n for n in names if n.endswith(".py")]
    return found


def engine_classes() -> set[str]:
    """Names of the classes in engines/ that derive, through engines/ classes, from `Engine`."""
    bases: dict[str, set[str]] = {}
    for path in _py_files(ROOT / "engines"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names = {b.value.id if isinstance(b, ast.Subscript) and isinstance(b.value, ast.Name) else
                         getattr(b, "id", None) or getattr(b, "attr", None) for b in node.bases}
                bases.setdefault(node.name, set()).update(n for n in names if n)
    engines = {"Engine"}
    while True:
        more = {name for name, parents in bases.items() if parents & engines} - engines
        if not more:
            return engines - {"Engine", "LLMEngine"}  # the abstract bases
        engines |= more


def constructions(source: str, engines: set[str]) -> list[tuple[int, str]]:
    """(line, class) of each engine class of accel.engines that `source` constructs."""
    tree = ast.parse(source)
    classes: dict[str, str] = {}  # local name -> engine class
    modules: set[str] = set()  # local names of accel.engines modules
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("accel.engines", "accel")):
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name in engines and (node.module or "").startswith("accel.engines"):
                    classes[local] = alias.name
                elif node.module == "accel" or (node.module or "").startswith("accel.engines"):
                    modules.add(local)
        elif isinstance(node, ast.Import):
            modules |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("accel")}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in classes:
            found.append((node.lineno, classes[func.id]))
        elif isinstance(func, ast.Attribute) and func.attr in engines:
            root = func.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in modules:
                found.append((node.lineno, func.attr))
    return found


def test_engines_are_made_only_by_the_catalogue() -> None:
    engines = engine_classes()
    assert {"OpenAIServerEngine", "HostedServerEngine", "SentenceTransformerEmbedder", "CrossEncoderReranker",
            "PgVectorEngine", "EmbeddingServerEngine", "RerankServerEngine", "SearchEngine", "VLLMEngine"} <= engines
    offenders, waived = [], set()
    for top in SCANNED:
        for path in _py_files(ROOT / top):
            rel = str(path.relative_to(ROOT))
            for line, cls in constructions(path.read_text(), engines):
                if rel in NOT_YET:
                    waived.add(rel)
                else:
                    offenders.append(f"{rel}:{line} {cls}(...)")
    assert offenders == [], f"engines made outside engines/catalogue.py: {offenders}"
    assert waived == set(NOT_YET), "a waived site no longer makes engines: drop it from NOT_YET"


def test_the_scan_finds_each_way_of_naming_an_engine_class() -> None:
    engines = engine_classes()
    for source in ("from accel.engines.reranker import CrossEncoderReranker\nCrossEncoderReranker('m')",
                   "from accel.engines.reranker import CrossEncoderReranker as R\nR('m')",
                   "from accel.engines import search\nsearch.SearchEngine()",
                   "import accel.engines.llm.openai_client\naccel.engines.llm.openai_client.OpenAIServerEngine('u', 'm')"):
        assert constructions(source, engines), source
    # LangChain's own CrossEncoderReranker (examples/) is not accel's engine
    assert constructions("from langchain_classic.retrievers.document_compressors import CrossEncoderReranker\n"
                         "CrossEncoderReranker(model=m, top_n=3)", engines) == []


def test_specs_keep_their_keys_and_limits() -> None:
    llm = catalogue.openai_server("http://h:1/v1/", "m")
    assert (llm.kind, llm.key, llm.limits) == ("llm", ("http://h:1/v1", "m"), EngineLimits(use_priority=True))
    hosted = catalogue.hosted_server("http://h:1/v1", None)
    assert (hosted.kind, hosted.key) == ("llm", ("hosted", "http://h:1/v1"))
    embed = catalogue.embedder("/m/e")
    assert (embed.kind, embed.key, embed.limits.max_call_s, embed.limits.max_batch_size) == \
        ("embed", "/m/e", catalogue.EMBED_CALL_S, catalogue.MAX_ITEMS_PER_CALL)
    rerank = catalogue.reranker("/m/r")
    assert (rerank.kind, rerank.key, rerank.limits.max_call_s) == ("rerank", "/m/r", catalogue.RERANK_CALL_S)
    assert catalogue.embed_server("http://e/v1/").key == ("server", "http://e/v1", "EMPTY")
    assert catalogue.embed_server("http://e/v1").limits.max_batch_size == catalogue.EMBED_CALLS_PER_RUN
    assert catalogue.rerank_server("http://r/v1", "x").limits.max_batch_size == catalogue.RERANK_PAIRS_PER_RUN
    assert (catalogue.pgvector("postgresql://d").kind, catalogue.pgvector("postgresql://d").limits) == ("vectordb", None)
    # two apps naming one server get equal specs, so a session makes one engine for both
    assert catalogue.embed_server("http://e/v1").key == catalogue.embed_server("http://e/v1/").key


def test_factories_make_the_engines_without_starting_them() -> None:
    from accel.engines.embed_server import EmbeddingServerEngine
    from accel.engines.llm.openai_client import OpenAIServerEngine
    from accel.engines.rerank_server import RerankServerEngine
    from accel.engines.search import SearchEngine
    from accel.engines.vectordb import PgVectorEngine

    assert isinstance(catalogue.openai_server("http://127.0.0.1:1/v1", "m").factory(), OpenAIServerEngine)
    assert isinstance(catalogue.embed_server("http://127.0.0.1:1/v1").factory(), EmbeddingServerEngine)
    assert isinstance(catalogue.rerank_server("http://127.0.0.1:1/v1", "m").factory(), RerankServerEngine)
    assert isinstance(catalogue.search().factory(), SearchEngine)
    assert isinstance(catalogue.pgvector("postgresql://127.0.0.1:1/x").factory(), PgVectorEngine)


def test_bindings_choose_the_hosted_engine_for_a_hosted_base_url() -> None:
    import accel
    from accel.adapters.common import bindings

    url = "http://127.0.0.1:9/v1"
    assert bindings.openai_server(url, "m").key == (url, "m")
    accel.host_llm(url)
    try:
        spec = bindings.openai_server(url + "/", "m")
        assert spec.key == ("hosted", url) and spec.limits == EngineLimits(use_priority=True)
    finally:
        accel.hosting.unhost_llm(url)
    assert bindings.openai_server(url, "m").key == (url, "m")
