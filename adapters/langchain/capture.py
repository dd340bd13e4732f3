"""Capture: walk an LCEL Runnable's structure and lower it into a primitive graph.

Exact semantics for the classes listed in `lower`; anything else becomes an opaque Call node
that runs the component as-is (its own `invoke` in a worker thread, or `ainvoke` on the loop
when it is natively async), so capture never refuses an app. Every lowering first checks
everything it relies on and raises `Opaque(reason)` before adding a node, so a component is
either fully lowered or fully opaque.

A composite (sequence, parallel, assign) with no engine work inside stays one opaque node, so
stock code runs it with its own run tree; a step configured with `with_config(...)` stays
opaque so its config applies. Every lowered component gets a run spec (`runs.RunPlan`) with
the tag its stock parent gives it (`seq:step:N`, `map:key:K`, ...), so its callback run can
be rebuilt while the query runs.

Graph inputs: "input" (the chain's input), "config" and "run" (the wrapped call's config and
callback run: opaque components run as its children, so the user's callbacks see them), "runs"
(the query's `runs.RunTree` when callbacks are listening, else None), "caller" (where opaque
code runs: `accel.caller`) and "kwargs" (`invoke`'s keyword arguments, which stock hands to the
chain's first step).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from accel.adapters.common.dropin import state_of
from accel.adapters.langchain.model_lowering import ModelLowering, is_model
from accel.adapters.langchain.models import ModelBinding
from accel.adapters.langchain.ops import AssignMergeOp, BranchOp, EachOp, FnOp, InvokeOp, RequireDictOp
from accel.adapters.langchain.runs import RunKind, RunPlan, RunSpec
from accel.adapters.langchain.structure import has_own_batch, has_own_stream, is_plain_binding, unbind
from accel.ir import GraphBuilder, Kind, Ref
from accel.ir.expand import has_engine_work
from accel.ir.getters import GetItemOp, getter_keys, prefix_window
from accel.ir.graph import Graph
from accel.ir.ops import GatherOp
from accel.registry import TemplateCompiler
from accel.types import EngineSpec, Identity, TemplateBuild


class Opaque(Exception):
    """A component this adapter does not lower; the reason goes to `explain()`."""


@dataclass
class Step:
    """One line of the capture report: a component and what became of it."""

    component: str
    lowered: bool
    detail: str


@dataclass
class Capture(ModelLowering):
    session: TemplateCompiler
    """The engines and templates the lowered chain uses (`accel.get_session()` normally)."""
    builder: GraphBuilder = field(default_factory=GraphBuilder)
    report: list[Step] = field(default_factory=list)
    llm_engines: set[str] = field(default_factory=set)
    models: list[ModelBinding] = field(default_factory=list)
    _ids: Any = field(default_factory=itertools.count)
    _dicts: dict[str, dict[str, Ref]] = field(default_factory=dict)
    _engine_work: dict[int, bool] = field(default_factory=dict)
    _trials: dict[int, list[Step]] = field(default_factory=dict)
    runs: RunPlan = field(default_factory=RunPlan)
    scope: int = 0
    """The run scope of this capture's template (`RunPlan.scope`): its top runs' parent."""
    disabled_passes: tuple[str, ...] = ()
    first_step: Any = None
    first_opaque: bool = False
    leaf_root: bool = False
    """The wrapped object is a model or retriever: its run is its own, not a chain run."""
    own_batch: list[str] = field(default_factory=list)
    """Opaque components with batch methods of their own, which only a stock `batch` calls."""
    own_stream: list[tuple[str, int]] = field(default_factory=list)
    """Opaque components that stream their own way (`has_own_stream`), with their parent run:
    where stock's `stream` reaches them, only it streams as stock does."""
    unsupported_entries: dict[str, str] = field(default_factory=dict)
    """Entry kinds ("sync", "async") a lowered component refuses in stock, with why: only the
    stock chain may answer those (and raise as it does)."""

    def __post_init__(self) -> None:
        self.input = self.builder.input("input")
        self.config = self.builder.input("config")
        self.run = self.builder.input("run")
        self.runs_in = self.builder.input("runs")
        self.caller = self.builder.input("caller")
        self.kwargs = self.builder.input("kwargs")
        if not self.scope:
            self.scope = self.runs.scope()
        self._parent = self.scope
        self._tracing: tuple[dict[str, Any], ...] = ()  # configs of the tracing-only bindings being lowered
        self._bound_by: dict[int, Any] = {}  # components being lowered under a binding -> that binding

    def lower_root(self, root: Any) -> Ref:
        """Lower the wrapped chain itself. Its own run is the wrapped call's, so a top-level
        sequence's steps (tagged `seq:step:N`) and a top-level parallel's branches are runs of
        the scope; the first step is the one that receives `invoke`'s kwargs. A model or
        retriever wrapped alone opens its own (llm / retriever) run instead (`leaf_root`)."""
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.runnables import RunnableParallel, RunnableSequence

        if isinstance(root, RunnableSequence) and self.has_engine_work(root):
            steps = list(root.steps)
            self.first_step = steps[0]
            return self.sequence(steps, self.input)
        self.first_step = root
        if type(root) is RunnableParallel and self.has_engine_work(root):
            return self.parallel(root.steps__, self.input)
        self.leaf_root = is_model(root) or isinstance(root, BaseRetriever)
        return self.lower(root, self.input, own_run=self.leaf_root)

    def kwargs_route(self) -> str:
        """What stock does with `invoke`'s kwargs here: "first" (an opaque first step takes
        them), "ignored" (the first step's stock `invoke` drops them) or "stock" (a lowered
        component would use them: only the stock chain can honour them)."""
        from langchain_core.prompts import BasePromptTemplate
        from langchain_core.runnables import RunnableParallel, RunnablePassthrough
        from langchain_core.runnables.passthrough import RunnableAssign, RunnablePick

        if self.first_opaque:
            return "first"
        if isinstance(self.first_step, (BasePromptTemplate, RunnableParallel, RunnableAssign, RunnablePick, RunnablePassthrough)):
            return "ignored"
        return "stock"

    def has_engine_work(self, runnable: Any) -> bool:
        """Whether lowering `runnable` yields any engine primitive (a throwaway lowering,
        memoised per component, sharing this capture's session engines)."""
        key = id(runnable)
        if key not in self._engine_work:
            self._engine_work[key] = True  # while the trial lowers it, descend into it
            trial = self.child(RunPlan())
            trial.lower(runnable, trial.input)
            self._engine_work[key] = has_engine_work(trial.builder.graph)
            self._trials[key] = trial.report
        return self._engine_work[key]

    def child(self, runs: RunPlan | None = None) -> Capture:
        """A capture for a part lowered on its own: a trial (its own throwaway `runs`) or a
        branch's sub-template (our run plan, a scope of its own)."""
        return Capture(self.session, _engine_work=self._engine_work, _trials=self._trials, disabled_passes=self.disabled_passes,
                       runs=self.runs if runs is None else runs)

    def sub_template(self, runnable: Any, label: str, tag: str | None = None) -> tuple[Any, int]:
        """`runnable` lowered into a template of its own (same graph inputs), optimised by the
        passes: what an Expand node runs, and its run scope (its runs are tagged `tag`). Its
        report lines, engines and models join ours."""
        sub = self.child()
        sub._tracing = self._tracing
        graph = sub.build(sub.lower(runnable, sub.input, tag))
        self.report += [Step(f"{label}: {step.component}", step.lowered, step.detail) for step in sub.report]
        self.llm_engines |= sub.llm_engines
        self.models += sub.models
        self.own_batch += sub.own_batch
        self.own_stream += sub.own_stream
        self.unsupported_entries.update(sub.unsupported_entries)
        # keyed by the sub-capture: its ops carry this capture's run scopes, so no other shares it
        template = self.session.template(TemplateBuild(("langchain-sub", Identity(sub), tag), lambda: graph, self.disabled_passes))
        self.runs.bind(sub.scope, template)
        return template, sub.scope

    def inside(self, runnable: Any) -> list[Step]:
        """What became of the components inside `runnable` when it was tried (explain())."""
        self.has_engine_work(runnable)
        return self._trials.get(id(runnable), [])

    # ---- helpers --------------------------------------------------------------------------

    def name(self, label: str) -> str:
        return f"{label}{next(self._ids)}"

    def add(self, kind: Kind, label: str, **kwargs: Any) -> Ref:
        return self.builder.add(kind, self.name(label), **kwargs)

    def fn(self, label: str, fn: Any, **inputs: Ref) -> Ref:
        return self.add(Kind.CALL, label, inputs=inputs, op=FnOp(fn))

    def engine(self, spec: EngineSpec) -> str:
        return self.session.engine(spec)

    def note(self, component: Any, lowered: bool, detail: str) -> None:
        self.report.append(Step(_label(component), lowered, detail))

    def opaque(self, runnable: Any, x: Ref, reason: str, tag: str | None = None) -> Ref:
        self.note(runnable, False, reason)
        if has_own_batch(runnable):
            self.own_batch.append(_label(runnable))
        if has_own_stream(runnable):
            self.own_stream.append((_label(runnable), self._parent))
        first = runnable is self.first_step and x.node == self.input.node
        self.first_opaque = self.first_opaque or first
        op = InvokeOp(self._bound_by.get(id(runnable), runnable), tag=tag, first=first, parent=self._parent)
        inputs = {"value": x, "config": self.config, "run": self.run, "runs": self.runs_in, "caller": self.caller, "kwargs": self.kwargs}
        return self.add(Kind.CALL, f"call:{_label(runnable)}:", inputs=inputs, op=op)

    # ---- run specs ------------------------------------------------------------------------

    def open_run(self, kind: RunKind, component: Any, x: Ref | int, tag: str | None, **fields: Any) -> RunSpec:
        """A run spec for `component` under the current parent; the runs lowered until
        `close_run` are its children."""
        spec = self.runs.add(kind, self._parent, self.scope, component=component, tag=tag, bindings=self._tracing, input=x, **fields)
        self._parent, self._tracing = spec.id, ()
        return spec

    def close_run(self, spec: RunSpec, out: Ref | None) -> Ref | None:
        spec.output = out
        self._parent = spec.parent
        return out

    def drop_run(self, spec: RunSpec) -> None:
        self.runs.drop(spec)
        self._parent, self._tracing = spec.parent, spec.bindings

    # ---- dispatch -------------------------------------------------------------------------

    def lower(self, runnable: Any, x: Ref, tag: str | None = None, *, own_run: bool = True) -> Ref:
        """Lower `runnable` applied to `x`; `tag` is the one its stock parent gives its run.
        Without `own_run` its run is the wrapped call's (the root): its parts are the scope's."""
        spec = None
        try:
            spec = self._open_for(runnable, x, tag) if own_run else None
            out = self._lower(runnable, x, tag)
        except Opaque as why:
            if spec is not None:
                self.drop_run(spec)
            return self.opaque(runnable, x, str(why), tag)
        return out if spec is None else self.close_run(spec, out)

    def _open_for(self, runnable: Any, x: Ref, tag: str | None) -> RunSpec | None:
        """The run spec of a component whose run its own dispatch does not make (models,
        fused prompts and bindings make theirs, or none)."""
        from langchain_core.language_models import BaseLanguageModel
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.runnables import RunnableBinding, RunnableLambda

        if isinstance(runnable, (BaseLanguageModel, RunnableBinding, RunnableLambda)):
            return None
        if isinstance(runnable, BaseRetriever):
            return self.open_run("retriever", runnable, x, tag)
        return self.open_run("chain", runnable, x, tag)

    def _lower(self, runnable: Any, x: Ref, tag: str | None) -> Ref:
        from langchain_core.language_models import BaseLanguageModel
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.runnables import RunnableBinding, RunnableBranch, RunnableLambda, RunnableParallel, RunnablePassthrough, RunnableSequence
        from langchain_core.runnables.base import RunnableEach
        from langchain_core.runnables.passthrough import RunnableAssign, RunnablePick

        if state_of(runnable) is not None:
            raise Opaque("an accel.wrap drop-in: runs its own (accelerated) entry points")
        composite = isinstance(runnable, RunnableSequence) or type(runnable) in (RunnableParallel, RunnableAssign, RunnableBranch, RunnableEach)
        if composite and not self.has_engine_work(runnable):
            raise Opaque("no engine work inside: runs as-is, with its own run tree")
        if type(runnable) is RunnableEach:
            return self.each(runnable, x)
        if isinstance(runnable, RunnableSequence):
            return self.sequence(list(runnable.steps), x)
        if type(runnable) is RunnableParallel:
            return self.parallel(runnable.steps__, x)
        if type(runnable) is RunnableAssign:
            return self.assign(runnable, x)
        if type(runnable) is RunnablePick:
            return self.pick(runnable, x)
        if type(runnable) is RunnableBranch:
            return self.branch(runnable, x)
        if type(runnable) is RunnablePassthrough and runnable.func is None and runnable.afunc is None:
            return x
        if is_plain_binding(runnable):
            return self.binding(runnable, x, tag)
        if isinstance(runnable, BaseLanguageModel):
            return self.model(runnable, {}, x, tag)
        if isinstance(runnable, BaseRetriever):
            from accel.adapters.langchain.retrievers import lower_retriever

            return lower_retriever(self, runnable, x)
        if isinstance(runnable, RunnableLambda):
            return self.window(runnable, x, tag)
        raise Opaque(f"{type(runnable).__name__} has no lowering; it runs as-is")

    def sequence(self, steps: list[Any], x: Ref) -> Ref:
        """The steps in order, each run tagged `seq:step:N` and opened after the one before."""
        i = 0
        while i < len(steps):
            before = self._last_child()
            fused = self.fused(steps, i, x)
            if fused is not None:
                used, x = fused
            else:
                used, x = 1, self.lower(steps[i], x, f"seq:step:{i + 1}")
            self._after(before)
            i += used
        return x

    def _last_child(self) -> int:
        return max((s.id for s in self.runs.children(self._parent)), default=0)

    def _after(self, before: int) -> None:
        """The step just lowered opens only once the previous step's run closed."""
        added = sorted(s.id for s in self.runs.children(self._parent) if s.id > before)
        if before and added and self.runs.specs[added[0]].after is None:
            self.runs.specs[added[0]].after = before

    def parallel(self, branches: dict[str, Any], x: Ref) -> Ref:
        refs = {key: self.lower(branch, x, f"map:key:{key}") for key, branch in branches.items()}
        out = self.add(Kind.CALL, "parallel", inputs=refs, op=GatherOp("dict"))
        self._dicts[out.node] = refs
        self.note("RunnableParallel", True, f"{len(refs)} independent branches {sorted(refs)}")
        return out

    def assign(self, runnable: Any, x: Ref) -> Ref:
        # stock checks the input is a dict before any branch runs (its ValueError, not theirs)
        checked = self.add(Kind.CALL, "assign_input", inputs={"value": x}, op=RequireDictOp())
        if x.node in self._dicts:
            self._dicts[checked.node] = self._dicts[x.node]
        mapper = self.open_run("chain", runnable.mapper, checked, None)  # stock: mapper.invoke(value, its child config)
        mapped = self.close_run(mapper, self.parallel(runnable.mapper.steps__, checked))
        out = self.add(Kind.CALL, "assign", inputs={"value": checked, "mapped": mapped}, op=AssignMergeOp())
        if checked.node in self._dicts:
            self._dicts[out.node] = {**self._dicts[checked.node], **self._dicts[mapped.node]}
        return out

    def branch(self, runnable: Any, x: Ref) -> Ref:
        """RunnableBranch -> an Expand node: conditions run as-is, only the taken branch runs."""
        conditions = tuple(condition for condition, _ in runnable.branches)
        targets = [branch for _, branch in runnable.branches] + [runnable.default]
        labels = [f"branch {i + 1}" for i in range(len(conditions))] + ["default"]
        tags = [f"branch:{i + 1}" for i in range(len(conditions))] + ["branch:default"]
        subs = [self.sub_template(target, label, tag) for target, label, tag in zip(targets, labels, tags, strict=True)]
        self.runs.streamed_by.update({scope: self._parent for _, scope in subs})
        self.note(runnable, True, f"Expand: {len(conditions)} condition(s) run as-is, then only the taken branch")
        inputs = {"value": x, "config": self.config, "run": self.run, "runs": self.runs_in, "caller": self.caller}
        op = BranchOp(conditions, tuple(t for t, _ in subs), tuple(s for _, s in subs), spec=self._parent)
        return self.add(Kind.EXPAND, "branch", inputs=inputs, op=op)

    def each(self, runnable: Any, x: Ref) -> Ref:
        """RunnableEach (`.map()`) -> an Expand node running the bound runnable's sub-template
        once per input item, side by side."""
        template, scope = self.sub_template(runnable.bound, "each item")
        self.note(runnable, True, "Expand: its runnable once per item of the input list, side by side")
        inputs = {"value": x, "config": self.config, "run": self.run, "runs": self.runs_in, "caller": self.caller}
        return self.add(Kind.EXPAND, "each", inputs=inputs, op=EachOp((template,), scope, spec=self._parent))

    def window(self, runnable: Any, x: Ref, tag: str | None) -> Ref:
        """`itemgetter(slice(a, b))`, a window counted from the front of a list, as a local op
        with the lambda's own chain run; decode pipelining may run it on each item of a
        streamed list (`accel.ir.getters`). Any other lambda is user code and runs as-is."""
        from langchain_core.runnables import RunnableLambda

        plain = type(runnable) is RunnableLambda and not hasattr(runnable, "afunc")
        keys = getter_keys(getattr(runnable, "func", None)) if plain else None
        window = prefix_window(keys) if keys is not None else None
        if window is None or (runnable is self.first_step and x.node == self.input.node):
            raise Opaque("user code (RunnableLambda) runs as-is")
        op = GetItemOp(runnable.func, window)
        spec = self.open_run("chain", runnable, x, tag)
        out = self.add(Kind.CALL, "window", inputs={"value": x}, attrs={"batchable": True, "batch_port": "value"}, op=op)
        self.note(runnable, True, f"{op.describe()} in place: a window of the list, item by item when the list streams")
        return self.close_run(spec, out)

    def pick(self, runnable: Any, x: Ref) -> Ref:
        known = self._dicts.get(x.node, {})
        if isinstance(runnable.keys, str) and runnable.keys in known:
            return known[runnable.keys]
        return self.fn("pick", runnable._pick, value=x)

    def binding(self, runnable: Any, x: Ref, tag: str | None) -> Ref:
        """A binding has no run of its own: its tracing config joins its component's run."""
        bound, kwargs, tracing = unbind(runnable)
        from langchain_core.language_models import BaseLanguageModel

        if bound is runnable:
            raise Opaque(f"with_config({', '.join(sorted(runnable.config or {})) or '...'}) applies only in its own code")
        if kwargs and not isinstance(bound, BaseLanguageModel):
            raise Opaque(f"bound kwargs {sorted(kwargs)} on a {type(bound).__name__}")
        outer, self._tracing = self._tracing, self._tracing + tracing
        self._bound_by[id(bound)] = runnable  # if `bound` stays opaque, the binding runs (its config applies)
        try:
            if isinstance(bound, BaseLanguageModel):
                return self.model(bound, kwargs, x, tag)
            return self.lower(bound, x, tag)
        finally:
            self._tracing = outer
            del self._bound_by[id(bound)]

    def build(self, out: Ref) -> Graph:
        self.builder.output(out)
        return self.builder.build()


def _label(component: Any) -> str:
    if isinstance(component, str):
        return component
    try:
        return component.get_name()
    except Exception:  # any object: its type names it
        return type(component).__name__
