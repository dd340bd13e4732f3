"""Pass registry and `optimize`: passes are plain functions `(graph, context) -> graph`.

A pass never mutates its input: it starts from `graph.copy()` and returns the copy. `optimize`
runs the registered passes in order (Teola Algorithm 1, GraphOpt), validates the result of
each, records its name in `graph.meta["passes"]` and recomputes depths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from accel.ir.errors import GraphError, PassError
from accel.ir.graph import Graph
from accel.ir.ops import RenderChat, Tokenize


@dataclass(frozen=True)
class LLMInfo:
    """What the passes may know of one LLM engine, used at run time by prefix warm-ups:

    - `tokenize(text, add_special_tokens=...)` / `render_chat(messages)`: the engine's own
      (async) tokenizer and chat template;
    - `block_size`: its KV block size (prefix caching reuses whole blocks), or a callable that
      reads it from the running engine at run time (a template is built before a server
      reports it)."""

    tokenize: Tokenize
    render_chat: RenderChat | None = None
    block_size: int | Callable[[], int] = 16


def _no_llm(engine: str) -> LLMInfo | None:
    return None


@dataclass(frozen=True)
class PassContext:
    """What passes may know about the engines.

    - `profiles`: engine name -> measured max efficient batch size (from engine profiling;
      an engine without a profile is never stage-decomposed);
    - `llm(engine)`: the `LLMInfo` of the LLM engine a node names, or None (no LLM engine by
      that name, or none known): passes look it up per node, so each of several LLMs gets
      its own warm-ups. Without it, prefill splitting is skipped for that node;
    - `safety_tail`: tokens dropped from a warm-up prefix because they could merge with the
      text that follows."""

    profiles: Mapping[str, int] = field(default_factory=dict)
    llm: Callable[[str], LLMInfo | None] = _no_llm
    safety_tail: int = 4


PassFn = Callable[[Graph, PassContext], Graph]

PROGRAM_PASSES: tuple[str, ...] = ("learned_prefill",)
"""Optimisations over what a program's runs taught rather than over a graph (code accel does
not lower): switched off by name in `disabled_passes` like the graph passes, ignored by
`optimize`."""

PASSES: dict[str, PassFn] = {}
DEFAULT_ORDER: tuple[str, ...] = ("prune_dependencies", "stage_decompose", "prefill_split", "decode_pipeline")


def register_pass(name: str, fn: PassFn, *, after: str | None = None, replace: bool = False) -> PassFn:
    """Register `fn` under `name`, placed right after pass `after` in the registry order (at
    the end when None). Re-registering a name needs `replace=True`."""
    if name in PASSES and not replace:
        raise PassError(None, f"pass {name!r} is already registered", "pick another name or pass replace=True")
    if after is not None and after not in PASSES:
        raise PassError(None, f"pass {name!r} is to run after unknown pass {after!r}", f"use one of {list(PASSES)}")
    PASSES.pop(name, None)
    if after is None:
        PASSES[name] = fn
        return fn
    items = list(PASSES.items())
    at = [n for n, _ in items].index(after) + 1
    items.insert(at, (name, fn))
    PASSES.clear()
    PASSES.update(items)
    return fn


def unregister_pass(name: str) -> None:
    PASSES.pop(name, None)


def optimize(
    graph: Graph,
    passes: Iterable[str] | None = None,
    disabled: Iterable[str] = (),
    context: PassContext | None = None,
) -> Graph:
    """Run `passes` (default: every registered pass in registry order) minus `disabled`,
    returning a new graph; the input graph is left unchanged."""
    context = context or PassContext()
    names = list(PASSES) if passes is None else list(passes)
    skip = set(disabled)
    unknown = [n for n in [*names, *skip] if n not in PASSES and n not in PROGRAM_PASSES]
    if unknown:
        raise PassError(None, f"unknown pass(es) {unknown}", f"registered passes are {list(PASSES)}")
    result = graph.copy()
    for name in names:
        if name in skip or name in PROGRAM_PASSES:
            continue
        before = result
        result = PASSES[name](before, context)
        if result is before:
            raise PassError(None, f"pass {name!r} returned its input graph", "start the pass from graph.copy()")
        try:
            result.validate()
        except GraphError as err:
            raise PassError(err.node, f"pass {name!r} produced an invalid graph: {err.cause}", "fix the pass") from err
        result.compute_depths()
        result.meta["passes"].append(name)
    return result
