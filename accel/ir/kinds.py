"""The primitive vocabulary (Teola Table 2 plus plumbing), kept small like torch.fx's opcodes."""

from __future__ import annotations

import enum


class Kind(enum.StrEnum):
    """What a node does. Engine kinds send requests to an engine; the rest run locally."""

    EMBED = "Embed"
    INGEST = "Ingest"
    SEARCH = "Search"
    RERANK = "Rerank"
    PREFILL = "Prefill"
    PARTIAL_PREFILL = "PartialPrefill"
    FULL_PREFILL = "FullPrefill"
    DECODE = "Decode"
    PARTIAL_DECODE = "PartialDecode"
    CONDITION = "Condition"
    EXPAND = "Expand"  # runs a sub-template picked at run time (accel.ir.expand)
    AGGREGATE = "Aggregate"
    CALL = "Call"
    INPUT = "Input"
    OUTPUT = "Output"


# Kinds whose op turns resolved inputs into engine requests (`Op.requests` / `Op.output`).
# Prefill and FullPrefill are local on stock vLLM: they render the prompt; the decode request
# carries it (the full prefill happens inside the engine's generate).
ENGINE_KINDS: frozenset[Kind] = frozenset(
    {
        Kind.EMBED,
        Kind.INGEST,
        Kind.SEARCH,
        Kind.RERANK,
        Kind.PARTIAL_PREFILL,
        Kind.DECODE,
        Kind.PARTIAL_DECODE,
    }
)

# Kinds whose requests an engine scheduler may fuse with requests from other nodes and
# queries. LLM kinds batch too (continuous batching inside vLLM, depth-ordered submission).
BATCHABLE_KINDS: frozenset[Kind] = ENGINE_KINDS

# Kinds that are data-parallel over a list input (one request per item, output aligned with
# the items): the candidates for stage decomposition into micro-batches.
ITEMWISE_KINDS: frozenset[Kind] = frozenset({Kind.EMBED, Kind.INGEST, Kind.SEARCH, Kind.RERANK})

LOCAL_KINDS: frozenset[Kind] = frozenset(Kind) - ENGINE_KINDS
