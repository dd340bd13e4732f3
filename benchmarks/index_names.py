"""What keeps a benchmark's index the same from run to run: the name its documents go under,
the same in every run of one workload, and a count of the chunks whose order it cannot fix.

The name reaches the prompts. LangChain's PGVector ids each row `<collection>/<chunk id>`
(`examples/langchain/models.row_ids`), and an app that puts the retrieved `Document`s
themselves into a prompt, as LangGraph's Self-RAG tutorial does, sends that id to the LLM. A
name drawn at random for each run made those prompts, and so the answers, the graders' verdicts
and a query's path through the graph, differ from run to run with nothing else changed (self-rag
batch on the twins: 224 to 232 LLM calls, bounds 2.27 to 3.73 s over five runs).

A run holds its name with a PostgreSQL advisory lock for as long as its documents are indexed,
so two runs of one workload on one database at once do not drop each other's rows: the second
gets a name of its own, drawn at random, and says so in the log.

What a name cannot fix: chunks with the same text get the same vector, so a search returns them
at equal distances, in Postgres's physical row order, which the apps' `ORDER BY distance` leaves
open and which can change between runs (self-rag: one query of 32, 3 of 366 prompts).
`shared_text_chunks` counts them, so a report says when its workload has such ties.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("accel.benchmarks.index_names")

_LOCK_KEY = "hashtextextended(%s, 0)"  # the advisory lock's 64-bit key for a name


def workload_name(example: str, framework: str, **workload: Any) -> str:
    """`bench_<example>_<8 hex>`: the hex digests the framework and whatever decides the
    workload's documents (question count, seed, corpus modules, chunk size)."""
    key = json.dumps({"framework": framework, **workload}, sort_keys=True, default=list)
    return f"bench_{example.replace('-', '_')}_{hashlib.sha256(key.encode()).hexdigest()[:8]}"


@dataclass
class NameLease:
    """A collection name held by this process until `release` (or the process's end, which
    closes the lock's connection). `shared` is False when the workload's own name was taken."""

    name: str
    shared: bool
    _conn: Any = None

    def release(self) -> None:
        """Unlock, then close. The unlock is answered once the lock is free; a close alone is
        not: the server ends the session after the client has gone, so a run started right
        after could still find the name held (seen on a busy machine)."""
        if self._conn is None:
            return
        try:
            self._conn.execute(f"SELECT pg_advisory_unlock({_LOCK_KEY})", (self.name,))
        finally:
            self._conn.close()
            self._conn = None


def lease(pg_dsn: str, name: str) -> NameLease:
    """Hold `name` for this run, or, while another run holds it, a fresh random name."""
    import psycopg

    conn = psycopg.connect(pg_dsn, autocommit=True)
    try:
        held = conn.execute(f"SELECT pg_try_advisory_lock({_LOCK_KEY})", (name,)).fetchone()[0]
    except BaseException:
        conn.close()
        raise
    if held:
        return NameLease(name, True, conn)
    conn.close()
    own = f"{name}_{uuid.uuid4().hex[:8]}"
    logger.warning("another run holds the index %s on this database: this run indexes into %s, so prompts that "
                   "carry row ids (self-rag's) differ from other runs'; run one benchmark of a workload at a time "
                   "to compare runs", name, own)
    return NameLease(own, False)


def shared_text_chunks(chunks: Sequence[str]) -> int:
    """How many of `chunks` have a text that another chunk has too (each such chunk counted)."""
    return sum(n for n in Counter(chunks).values() if n > 1)
