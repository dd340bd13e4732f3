"""The benchmark workload: pydoc pages of standard-library modules (text nobody here wrote,
shipped with Python), questions derived from them, and Poisson arrival times; all seeded.

Questions name things that occur in the indexed text (functions and classes, or a phrase of
the description), so retrieval has something real to find.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from accel.engines.errors import InvalidRequest
from accel.engines.offline.corpus import stdlib_docs

DEFAULT_MODULES: tuple[str, ...] = (
    "heapq", "bisect", "functools", "itertools", "json", "textwrap", "fnmatch", "shlex",
    "statistics", "queue", "sched", "colorsys",
)
_NAME = re.compile(r"(?m)^ {4}(?:class )?([A-Za-z][A-Za-z0-9_]{2,})\(")
_SENTENCE = re.compile(r"[A-Z][a-z][^.\n(){}'=*\[\]`]{24,90}\.")
_TEMPLATES = (
    "What does {name} in the {module} module do?",
    "How do I use {module}.{name}?",
    "Which arguments does {name} from {module} take?",
    "When should I call {module}.{name}?",
)


@dataclass(frozen=True)
class Workload:
    """Documents (`{"id", "text", "metadata"}`), questions in order, and for online runs the
    arrival offset of each question in seconds."""

    documents: list[dict[str, Any]]
    questions: list[str]
    arrivals: list[float] = field(default_factory=list)
    seed: int = 0

    def with_arrivals(self, rate: float) -> Workload:
        return Workload(self.documents, self.questions, poisson_arrivals(len(self.questions), rate, self.seed), self.seed)


def documents(modules: tuple[str, ...] = DEFAULT_MODULES, max_chars: int = 4000) -> list[dict[str, Any]]:
    """The first `max_chars` of each module's pydoc page (bounded so indexing stays quick)."""
    return [
        {"id": doc.id, "text": doc.text[:max_chars], "metadata": dict(doc.metadata)}
        for doc in stdlib_docs(modules)
    ]


def questions_for(doc: dict[str, Any]) -> list[str]:
    """Every question the document supports, in text order."""
    module = doc["metadata"]["module"]
    names = list(dict.fromkeys(_NAME.findall(doc["text"])))
    asked = [template.format(name=name, module=module) for name in names for template in _TEMPLATES]
    asked += [f"What does the {module} documentation mean by: {s}" for s in _SENTENCE.findall(doc["text"])]
    return asked


def build_workload(
    n_queries: int,
    *,
    modules: tuple[str, ...] = DEFAULT_MODULES,
    max_chars: int = 4000,
    seed: int = 0,
) -> Workload:
    """`n_queries` questions drawn (with a fixed seed) round-robin over the documents."""
    if n_queries < 1:
        raise InvalidRequest("workload", f"n_queries={n_queries}", "ask for at least one query")
    docs = documents(modules, max_chars)
    rng = random.Random(seed)
    pools = [questions_for(doc) for doc in docs]
    for pool in pools:
        rng.shuffle(pool)
    pools = [pool for pool in pools if pool]
    if not pools:
        raise InvalidRequest("workload", f"no questions derivable from {modules}", "use modules with documented functions")
    questions = [pools[i % len(pools)][(i // len(pools)) % len(pools[i % len(pools)])] for i in range(n_queries)]
    return Workload(docs, questions, seed=seed)


def poisson_arrivals(n: int, rate: float, seed: int = 0) -> list[float]:
    """Arrival offsets (seconds from the start) of a Poisson process of `rate` queries/s."""
    if rate <= 0:
        raise InvalidRequest("workload", f"rate={rate}", "use a positive request rate (queries per second)")
    rng = random.Random(seed + 1)
    now, out = 0.0, []
    for _ in range(n):
        out.append(now)
        now += rng.expovariate(rate)
    return out


ZIPF_MODULES: tuple[str, ...] = DEFAULT_MODULES + (
    "string", "random", "copy", "difflib", "operator", "contextlib", "calendar", "base64",
)
"""20 documents for the repeated-questions workload."""


def zipf_ranks(n: int, distinct: int, s: float, seed: int) -> list[int]:
    """`n` draws from ranks 0..distinct-1 with P(rank k) proportional to 1 / (k + 1)^s."""
    rng = random.Random(seed)
    weights = [1.0 / (k + 1) ** s for k in range(distinct)]
    return rng.choices(range(distinct), weights=weights, k=n)


def build_zipf_workload(
    n_queries: int = 200,
    *,
    distinct: int = 60,
    modules: tuple[str, ...] = ZIPF_MODULES,
    max_chars: int = 4000,
    s: float = 1.1,
    seed: int = 0,
) -> Workload:
    """Real traffic repeats itself: `n_queries` questions drawn Zipf(s) from `distinct`
    questions over the documents of `modules` (20 by default), seeded. The distinct questions
    are the round-robin ones of `build_workload`, so they spread over every document."""
    base = build_workload(distinct, modules=modules, max_chars=max_chars, seed=seed)
    questions = [base.questions[k] for k in zipf_ranks(n_queries, distinct, s, seed)]
    return Workload(base.documents, questions, seed=seed)
