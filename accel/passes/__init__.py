"""Optimisation passes over the primitive graph (Teola Algorithm 1, GraphOpt).

Each pass is a pure function `(graph, context) -> graph`, registered by name. `optimize` runs
them in order; `register_pass` adds a custom one.
"""

from accel.passes.decode import decode_pipeline
from accel.passes.prefill import prefill_split
from accel.passes.prune import prune_dependencies
from accel.passes.registry import (
    DEFAULT_ORDER,
    PASSES,
    PROGRAM_PASSES,
    LLMInfo,
    PassContext,
    PassFn,
    optimize,
    register_pass,
    unregister_pass,
)
from accel.passes.objectives import deduce_objectives
from accel.passes.prefixes import share_prefixes
from accel.passes.share import share_requests
from accel.passes.stage import stage_decompose

for _name, _fn in zip(DEFAULT_ORDER, (prune_dependencies, stage_decompose, prefill_split, decode_pipeline), strict=True):
    if _name not in PASSES:
        register_pass(_name, _fn)
# Parrot / Halo passes (issue 13), after Teola's
for _name, _fn in (("share_requests", share_requests), ("share_prefixes", share_prefixes), ("deduce_objectives", deduce_objectives)):
    if _name not in PASSES:
        register_pass(_name, _fn)

__all__ = [
    "DEFAULT_ORDER",
    "LLMInfo",
    "PASSES",
    "PROGRAM_PASSES",
    "PassContext",
    "PassFn",
    "decode_pipeline",
    "deduce_objectives",
    "optimize",
    "prefill_split",
    "prune_dependencies",
    "register_pass",
    "share_prefixes",
    "share_requests",
    "stage_decompose",
    "unregister_pass",
]
