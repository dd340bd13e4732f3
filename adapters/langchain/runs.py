"""Callback runs of the components accel lowers, opened and closed as stock LangChain does.

A lowered prompt, chat model, parser, retriever or composite (sequence, parallel, assign,
branch) runs as graph primitives, not through its own `invoke`, so its own code never opens
its callback run. Tracers (LangSmith, Langfuse, `astream_events`) would show a different tree.
So capture records a `RunSpec` per lowered component (`RunPlan`): its run type, its parent
and the `seq:step:N` / `map:key:K` tag stock gives it, the bindings' tracing config around it
and the graph values that are its input and output. While a query runs, a `RunTree` (the
query's `QueryWatcher`) opens each run once its input exists and its parent is open, and
closes it once its output exists and its children are closed: the same tree, names, tags,
metadata, inputs and outputs as stock, in dependency order. Opaque components open their own
runs as children of the right parent (`RunTree.child_config`).

Only calls with callback handlers get a `RunTree`; without handlers nothing is recorded. The
runs' callbacks are made on accel's session loop thread (stock calls them from the threads
that run the steps, so handlers already have to be thread-safe); a streaming handler
(`astream_events`), or an async one in an async call, gets the stock chain instead
(`streaming.stock_listener`).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from accel.ir import Ref

log = logging.getLogger("accel.adapters.langchain")

RunKind = Literal["scope", "chain", "prompt", "parser", "llm", "retriever"]
_ids = itertools.count(1)


@dataclass
class RunSpec:
    """One lowered component's callback run, as capture saw it."""

    id: int
    kind: RunKind
    parent: int
    scope: int
    """The capture scope (one template) whose node names `input` and `output` refer to."""
    component: Any = None
    tag: str | None = None
    bindings: tuple[dict[str, Any], ...] = ()
    """Tracing-only configs of the bindings around the component, outermost first."""
    input: Ref | int | None = None
    """A graph value, or the output of another run (int: its spec id)."""
    output: Ref | None = None
    """A graph value; None when the run makes it (a prompt formats, a model generates)."""
    after: int | None = None
    """The previous step of the same sequence: this run opens only once that one closed."""
    decode: str | None = None
    """Models: the Decode node whose `Generation` is the run's output."""
    binding: Any = None
    """Models: their `ModelBinding` (the stock model, its bound kwargs)."""
    each: bool = False
    """One run per item of the input list (a retriever run per generated query)."""


@dataclass
class RunPlan:
    """Every run spec of one wrapped chain (its template and its branch sub-templates)."""

    specs: dict[int, RunSpec] = field(default_factory=dict)
    templates: dict[int, Any] = field(default_factory=dict)
    """scope id -> the template it became."""
    streamed_by: dict[int, int] = field(default_factory=dict)
    """A branch's sub-scope -> the branch's run spec, which hands it a stream (`reached_by_stream`)."""

    def scope(self) -> int:
        """A new scope: the parent of the runs at the top of one template."""
        spec = RunSpec(next(_ids), "scope", parent=0, scope=0)
        spec.scope = spec.id
        self.specs[spec.id] = spec
        return spec.id

    def add(self, kind: RunKind, parent: int, scope: int, **fields: Any) -> RunSpec:
        spec = RunSpec(next(_ids), kind, parent, scope, **fields)
        self.specs[spec.id] = spec
        return spec

    def drop(self, spec: RunSpec) -> None:
        self.specs.pop(spec.id, None)

    def bind(self, scope: int, template: Any) -> None:
        self.templates[scope] = template

    def children(self, parent: int) -> Iterator[RunSpec]:
        return (s for s in self.specs.values() if s.parent == parent)

    def reached_by_stream(self, spec_id: int, root: int) -> bool:
        """Whether stock's `stream` of the chain whose run scope is `root` reaches run
        `spec_id` (a run or a scope) as a stream: every component around it hands the stream
        on (a sequence's `transform`, a parallel's or assign's branches, a branch's taken
        branch); a retriever, a RunnableEach or a lambda invokes its parts."""
        from langchain_core.runnables import RunnableBranch, RunnableParallel, RunnableSequence
        from langchain_core.runnables.passthrough import RunnableAssign

        spec = self.specs[spec_id]
        while True:
            if spec.kind == "scope":
                if spec.id == root:
                    return True
                if spec.id not in self.streamed_by:
                    return False
                spec = self.specs[self.streamed_by[spec.id]]
            elif spec.kind == "chain" and isinstance(spec.component, (RunnableSequence, RunnableParallel, RunnableAssign, RunnableBranch)):
                spec = self.specs[spec.parent]
            else:
                return False

    def model_streams(self, spec_id: int, root: int, called_by_stream: bool) -> tuple[bool, bool]:
        """(the stock model of run `spec_id` reports its tokens, its run ends in a merged
        chunk) in a call of the chain whose run scope is `root`: a model a `stream` reaches
        streams and ends in a chunk, as `BaseChatModel.stream` does; one that streams inside an
        `invoke` (`streaming=True`) reports tokens and ends in a message. Decided once."""
        key = (spec_id, root, called_by_stream)
        if key not in self._streams:
            binding = self.specs[spec_id].binding
            reached = called_by_stream and self.reached_by_stream(self.specs[spec_id].parent, root)
            chunked = reached and binding.streams(called_by_stream=True)
            self._streams[key] = (chunked or binding.streams(called_by_stream=False), chunked)
        return self._streams[key]

    def index(self) -> RunIndex:
        """The lookups every query's `RunTree` uses, built once (the plan is complete once
        the wrapper has bound its templates)."""
        if self._index is None:
            self._index = RunIndex.of(self)
        return self._index

    _index: RunIndex | None = field(default=None, repr=False)
    _streams: dict[tuple[int, int, bool], tuple[bool, bool]] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class RunIndex:
    order: tuple[int, ...]
    """Spec ids in creation order (parents before children), scopes left out."""
    children: dict[int, tuple[int, ...]]
    waiting: frozenset[tuple[int, str]]
    """(scope, node) pairs whose values some run takes as input or output."""
    scopes: dict[int, int]
    """id(template) -> its scope."""
    decodes: dict[tuple[int, str], int]
    """(scope, Decode node) -> the model run it answers."""

    @classmethod
    def of(cls, plan: RunPlan) -> RunIndex:
        specs = [plan.specs[i] for i in sorted(plan.specs) if plan.specs[i].kind != "scope"]
        children: dict[int, list[int]] = {}
        for spec in specs:
            children.setdefault(spec.parent, []).append(spec.id)
        waiting = {(spec.scope, ref.node) for spec in specs for ref in (spec.input, spec.output) if isinstance(ref, Ref)}
        return cls(order=tuple(spec.id for spec in specs), children={k: tuple(v) for k, v in children.items()},
                   waiting=frozenset(waiting), scopes={id(template): scope for scope, template in plan.templates.items()},
                   decodes={(spec.scope, spec.decode): spec.id for spec in specs if spec.kind == "llm"})


class _Run:
    """A run while the query goes on: its config, manager and (once known) output."""

    __slots__ = ("closed", "config", "managers", "output", "started")

    def __init__(self) -> None:
        self.config: dict[str, Any] | None = None
        self.managers: list[Any] = []
        self.started = False
        self.closed = False
        self.output: Any = _MISSING


_MISSING = object()


class RunTree:
    """One query's runs: a `QueryWatcher` that opens and closes them as values appear."""

    def __init__(self, plan: RunPlan, root_scope: int, config: dict[str, Any], run_manager: Any, *, leaf_root: bool = False,
                 called_by_stream: bool = False) -> None:
        self.plan = plan
        self.root_scope = root_scope
        self.leaf_root = leaf_root
        """The root component's run is the call's own (a model or retriever wrapped alone): it
        takes the call's config as is, with no wrapped chain run around it."""
        self.called_by_stream = called_by_stream
        """The call is a `stream`: stock streams the models the stream reaches (`RunPlan.reached_by_stream`)."""
        self._index = plan.index()
        self._runs: dict[int, _Run] = {}
        self._values: dict[tuple[int, str], Any] = {}
        self._attached: dict[int, int] = {}  # sub-scope -> the spec whose child it runs as
        root = self._runs[root_scope] = _Run()
        root.config, root.managers, root.started = config, [run_manager], True
        self.unclosed = 0

    # ---- QueryWatcher ---------------------------------------------------------------------

    def finished(self, template: Any, node: str, value: Any) -> None:
        key = (self._index.scopes.get(id(template)), node)
        if key in self._index.waiting:
            self._values[key] = value
            self._advance()

    def generated(self, template: Any, node: str, results: list[Any]) -> None:
        run = self._model_run(template, node)
        if run is not None and results:
            run.output = results[0]
            self._advance()

    def delta(self, template: Any, node: str, text: str) -> None:
        run = self._model_run(template, node)
        if run is not None and self.wants_deltas(template, node):
            from accel.adapters.langchain.tracing import token_chunk

            spec = self.plan.specs[self._index.decodes[(self._index.scopes[id(template)], node)]]
            for manager in run.managers:
                manager.on_llm_new_token(text, chunk=token_chunk(spec, text))

    def wants_deltas(self, template: Any, node: str) -> bool:
        """Whether the stock model whose Decode `node` is streams its answer here, reporting
        each token to its run: the Decode must then stream, its deltas coming to `delta`."""
        spec = self._index.decodes.get((self._index.scopes.get(id(template)), node))
        return spec is not None and self._model_streams(spec)[0]

    def _model_streams(self, spec_id: int) -> tuple[bool, bool]:
        return self.plan.model_streams(spec_id, self.root_scope, self.called_by_stream)

    def ends_in_chunk(self, spec_id: int) -> bool:
        """Whether model run `spec_id` reports a merged chunk (`AIMessageChunk`) as its output."""
        return self._model_streams(spec_id)[1]

    def _model_run(self, template: Any, node: str) -> _Run | None:
        """The open run of the model whose Decode `node` is, if any."""
        spec = self._index.decodes.get((self._index.scopes.get(id(template)), node))
        run = self._runs.get(spec) if spec is not None else None
        return run if run is not None and run.started and not run.closed else None

    # ---- opaque code's parents ------------------------------------------------------------

    def child_config(self, parent: int, tag: str | None) -> dict[str, Any]:
        """The config stock hands a child step of run `parent` tagged `tag`."""
        from langchain_core.runnables.config import patch_config

        run = self._run_of(parent)
        return patch_config(run.config, callbacks=run.managers[0].get_child(tag))

    def attach(self, scope: int, spec: int) -> None:
        """Sub-scope `scope` (a branch's template) runs as children of run `spec`."""
        self._attached[scope] = spec
        self._advance()

    def nested(self, scope: int, spec: int) -> RunTree:
        """A tree for one run of sub-scope `scope` whose top runs are children of the open run
        `spec` (one item of a RunnableEach); it must be ended with `end`."""
        self._advance()
        parent = self._runs[spec]
        return RunTree(self.plan, scope, parent.config, parent.managers[0])  # RunnableEach invokes: no stream reaches it

    def end(self, error: BaseException | None) -> None:
        """The sub-run this tree watches ended: its runs close, or fail with `error`."""
        if error is None:
            self.finish()
        else:
            self.fail(error)

    def _run_of(self, spec_id: int) -> _Run:
        spec = self.plan.specs.get(spec_id)
        if spec is not None and spec.kind == "scope" and spec_id in self._attached:
            return self._run_of(self._attached[spec_id])
        return self._runs[spec_id]

    # ---- opening and closing --------------------------------------------------------------

    def _advance(self) -> None:
        """Open every run whose input and parent are ready, close every run whose output and
        children are: repeated until nothing changes (a closing run may let the next open)."""
        from accel.adapters.langchain import tracing

        changed = True
        while changed:
            changed = False
            for sid in self._index.order:
                spec = self.plan.specs[sid]
                run = self._runs.get(sid)
                if run is None:
                    if self._may_open(spec):
                        run = self._runs[sid] = _Run()
                        tracing.open_run(self, spec, run, self._input(spec))
                        changed = True
                elif not run.closed and self._may_close(spec, run):
                    tracing.close_run(self, spec, run, self._output(spec, run))
                    run.closed = True
                    changed = True

    def _ready(self, scope: int, ref: Ref) -> bool:
        return (scope, ref.node) in self._values

    def _value(self, scope: int, ref: Ref) -> Any:
        value = self._values[(scope, ref.node)]
        return value if ref.key is None else value[ref.key]

    def _may_open(self, spec: RunSpec) -> bool:
        try:
            parent = self._run_of(spec.parent)
        except KeyError:
            return False
        if not parent.started or parent.closed:
            return False
        if spec.after is not None and not self._closed(spec.after):
            return False
        if isinstance(spec.input, Ref):
            return self._ready(spec.scope, spec.input)
        if isinstance(spec.input, int):
            return self._closed(spec.input)
        return True

    def _closed(self, spec_id: int) -> bool:
        run = self._runs.get(spec_id)
        return run is not None and run.closed

    def _input(self, spec: RunSpec) -> Any:
        if isinstance(spec.input, Ref):
            return self._value(spec.scope, spec.input)
        if isinstance(spec.input, int):
            return self._runs[spec.input].output
        return None

    def _may_close(self, spec: RunSpec, run: _Run) -> bool:
        for child in self._index.children.get(spec.id, ()):
            if not self._closed(child) and (child in self._runs or self._may_open(self.plan.specs[child])):
                return False
        if spec.output is None:
            return run.output is not _MISSING
        return self._ready(spec.scope, spec.output)

    def _output(self, spec: RunSpec, run: _Run) -> Any:
        if spec.output is not None:
            run.output = self._value(spec.scope, spec.output)
        return run.output

    # ---- the end of the query -------------------------------------------------------------

    def fail(self, error: BaseException) -> None:
        """The query failed: its open runs end with `error`, innermost first."""
        from accel.adapters.langchain import tracing

        for sid in reversed(self._index.order):
            run = self._runs.get(sid)
            spec = self.plan.specs[sid]
            if run is not None and not run.closed:
                tracing.fail_run(spec, run, error)
                run.closed = True

    def finish(self) -> None:
        """The query answered: runs still open (their output never showed) close with what is
        known, logged and counted in `unclosed`."""
        from accel.adapters.langchain import tracing

        self._advance()
        for sid in reversed(self._index.order):
            run = self._runs.get(sid)
            spec = self.plan.specs[sid]
            if run is not None and not run.closed:
                log.warning("callback run %s of %r closed without its output", spec.kind, spec.component)
                self.unclosed += 1
                tracing.close_run(self, spec, run, None if run.output is _MISSING else run.output)
                run.closed = True
