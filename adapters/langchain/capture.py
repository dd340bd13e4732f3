"""Capture: walk an LCEL Runnable's structure and lower it into a primitive graph.

Exact semantics for the classes listed in `lower`; anything else becomes an opaque Call node
that runs the component as-is (its own `invoke` in a worker thread, or `ainvoke` on the loop
when it is natively async), so capture never refuses an app. Every lowering first checks
everything it relies on and raises `Opaque(reason)` before adding a node, so a component is
either fully lowered or fully opaque.

Graph inputs: "input" (the chain's input) and "config" (the child RunnableConfig of the
wrapped run, handed to opaque components so the user's callbacks see their runs).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from accel.adapters.langchain import parsers
from accel.adapters.langchain.models import ModelBinding, bind_model
from accel.adapters.langchain.ops import ChatResult, FnOp, InvokeOp, assign_merge
from accel.adapters.langchain.prompts import prompt_shape, prompt_variables
from accel.ir import GraphBuilder, Kind, Ref
from accel.ir.graph import Graph
from accel.ir.ops import DecodeOp, GatherOp, PromptOp


class Opaque(Exception):
    """A component this adapter does not lower; the reason goes to `explain()`."""


@dataclass
class Step:
    """One line of the capture report: a component and what became of it."""

    component: str
    lowered: bool
    detail: str


@dataclass
class Capture:
    session: Any
    builder: GraphBuilder = field(default_factory=GraphBuilder)
    report: list[Step] = field(default_factory=list)
    llm_engines: set[str] = field(default_factory=set)
    _ids: Any = field(default_factory=itertools.count)
    _dicts: dict[str, dict[str, Ref]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.input = self.builder.input("input")
        self.config = self.builder.input("config")

    # ---- helpers --------------------------------------------------------------------------

    def name(self, label: str) -> str:
        return f"{label}{next(self._ids)}"

    def add(self, kind: Kind, label: str, **kwargs: Any) -> Ref:
        return self.builder.add(kind, self.name(label), **kwargs)

    def fn(self, label: str, fn: Any, **inputs: Ref) -> Ref:
        return self.add(Kind.CALL, label, inputs=inputs, op=FnOp(fn))

    def engine(self, spec: Any) -> str:
        return spec.bind(self.session)

    def note(self, component: Any, lowered: bool, detail: str) -> None:
        self.report.append(Step(_label(component), lowered, detail))

    def opaque(self, runnable: Any, x: Ref, reason: str) -> Ref:
        use_async = getattr(runnable, "afunc", None) is not None
        self.note(runnable, False, reason)
        op = InvokeOp(runnable, use_async=use_async)
        return self.add(Kind.CALL, f"call:{_label(runnable)}:", inputs={"value": x, "config": self.config}, op=op)

    # ---- dispatch -------------------------------------------------------------------------

    def lower(self, runnable: Any, x: Ref) -> Ref:
        from langchain_core.language_models import BaseLanguageModel
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.runnables import RunnableBinding, RunnableLambda, RunnableParallel, RunnablePassthrough, RunnableSequence
        from langchain_core.runnables.passthrough import RunnableAssign, RunnablePick

        try:
            if isinstance(runnable, RunnableSequence):
                return self.sequence(list(runnable.steps), x)
            if type(runnable) is RunnableParallel:
                return self.parallel(runnable.steps__, x)
            if type(runnable) is RunnableAssign:
                return self.assign(runnable, x)
            if type(runnable) is RunnablePick:
                return self.pick(runnable, x)
            if type(runnable) is RunnablePassthrough and runnable.func is None and runnable.afunc is None:
                return x
            if type(runnable) is RunnableBinding:
                return self.binding(runnable, x)
            if isinstance(runnable, BaseLanguageModel):
                return self.model(runnable, {}, x, None)
            if isinstance(runnable, BaseRetriever):
                from accel.adapters.langchain.retrievers import lower_retriever

                return lower_retriever(self, runnable, x)
            if isinstance(runnable, RunnableLambda):
                raise Opaque("user code (RunnableLambda) runs as-is")
            raise Opaque(f"{type(runnable).__name__} has no lowering; it runs as-is")
        except Opaque as why:
            return self.opaque(runnable, x, str(why))

    def sequence(self, steps: list[Any], x: Ref) -> Ref:
        i = 0
        while i < len(steps):
            fused = self.fused(steps, i, x)
            if fused is not None:
                used, x = fused
                i += used
            else:
                x = self.lower(steps[i], x)
                i += 1
        return x

    def parallel(self, branches: dict[str, Any], x: Ref) -> Ref:
        refs = {key: self.lower(branch, x) for key, branch in branches.items()}
        out = self.add(Kind.CALL, "parallel", inputs=refs, op=GatherOp("dict"))
        self._dicts[out.node] = refs
        self.note("RunnableParallel", True, f"{len(refs)} independent branches {sorted(refs)}")
        return out

    def assign(self, runnable: Any, x: Ref) -> Ref:
        mapped = self.parallel(runnable.mapper.steps__, x)
        out = self.add(Kind.CALL, "assign", inputs={"value": x, "mapped": mapped}, op=FnOp(assign_merge))
        if x.node in self._dicts:
            self._dicts[out.node] = {**self._dicts[x.node], **self._dicts[mapped.node]}
        return out

    def pick(self, runnable: Any, x: Ref) -> Ref:
        known = self._dicts.get(x.node, {})
        if isinstance(runnable.keys, str) and runnable.keys in known:
            return known[runnable.keys]
        return self.fn("pick", runnable._pick, value=x)

    def binding(self, runnable: Any, x: Ref) -> Ref:
        bound, kwargs = unbind(runnable)
        from langchain_core.language_models import BaseLanguageModel

        if isinstance(bound, BaseLanguageModel):
            return self.model(bound, kwargs, x, None)
        if kwargs:
            raise Opaque(f"bound kwargs {sorted(kwargs)} on a {type(bound).__name__}")
        return self.lower(bound, x)

    # ---- prompt + model (+ parser) ----------------------------------------------------------

    def fused(self, steps: list[Any], i: int, x: Ref) -> tuple[int, Ref] | None:
        """Prompt -> model -> parser runs as Prefill/Decode with the prompt's parts exposed."""
        from langchain_core.prompts import BasePromptTemplate

        prompt = steps[i] if isinstance(steps[i], BasePromptTemplate) else None
        at = i + 1 if prompt is not None else i
        if at >= len(steps):
            return None
        model, kwargs = unbind(steps[at])
        binding, _ = bind_model(model, kwargs) if model is not None and _is_model(model) else (None, "")
        if binding is None:
            return None
        split = parsers.kind(steps[at + 1]) if at + 1 < len(steps) else None
        used = at - i + 1 + (split is not None)
        if prompt is not None:
            shape, reason = prompt_shape(prompt, chat=binding.chat)
            if shape is None:
                self.note(prompt, True, f"rendered by its own code ({reason})")
                rendered = self.fn("prompt", prompt.invoke, input=x)
                return used, self.llm(binding, self.model_input(binding, rendered), split, model)
            return used, self.llm(binding, self.prompt_node(prompt, shape, x), split, model)
        return used, self.llm(binding, self.model_input(binding, x), split, model)

    def model(self, model: Any, kwargs: dict[str, Any], x: Ref, split: str | None) -> Ref:
        binding, reason = bind_model(model, kwargs)
        if binding is None:
            raise Opaque(reason)
        return self.llm(binding, self.model_input(binding, x), split, model)

    def model_input(self, binding: ModelBinding, x: Ref) -> Ref:
        convert = binding.messages if binding.chat else binding.prompt_text
        return self.fn("model_input", convert, value=x)

    def prompt_node(self, prompt: Any, shape: Any, x: Ref) -> Ref:
        known = self._dicts.get(x.node, {})
        if not getattr(prompt, "partial_variables", None) and all(v in known for v in shape.variables):
            ports = {v: known[v] for v in shape.variables}  # slots read the branches directly
        else:
            variables = self.fn("prompt_vars", lambda value: prompt_variables(prompt, value), value=x)
            ports = {v: Ref(variables.node, v) for v in shape.variables}
        op = PromptOp(parts=shape.parts, messages=shape.messages)
        attrs: dict[str, Any] = {"prompt_parts": list(op.flat_parts)}
        if shape.messages:
            attrs["messages"] = shape.messages
        self.note(prompt, True, f"prompt parts {len(op.flat_parts)} ({len(shape.variables)} slots)")
        return self.add(Kind.PREFILL, "prefill", inputs=ports, attrs=attrs, op=op)

    def llm(self, binding: ModelBinding, prompt: Ref, split: str | None, model: Any) -> Ref:
        engine = self.engine(binding.engine)
        self.llm_engines.add(engine)
        kind = None if split in (None, "str") else split
        op = DecodeOp(params=binding.params, split=kind, result="generation" if binding.chat and kind is None else "text")
        attrs: dict[str, Any] = {"params": binding.params}
        if kind is not None:
            attrs["splittable"] = kind
        decode = self.add(Kind.DECODE, "decode", engine=engine, inputs={"prompt": prompt}, attrs=attrs, op=op)
        self.note(model, True, f"Decode on {engine}" + (f", output parsed as {split}" if split else ""))
        if op.result == "generation":
            shape = ChatResult(binding.model_name, text=split == "str", stream_usage=binding.streams_usage)
            return self.add(Kind.CALL, "message", inputs={"generation": decode}, op=shape)
        return decode

    def build(self, out: Ref) -> Graph:
        self.builder.output(out)
        return self.builder.build()


def unbind(runnable: Any) -> tuple[Any, dict[str, Any]]:
    """Strip plain RunnableBindings (bind / with_config without callbacks), merging kwargs."""
    from langchain_core.runnables import RunnableBinding

    kwargs: dict[str, Any] = {}
    while type(runnable) is RunnableBinding:
        if (runnable.config or {}).get("callbacks") or runnable.config_factories:
            break
        kwargs = {**runnable.kwargs, **kwargs}
        runnable = runnable.bound
    return runnable, kwargs


def _is_model(obj: Any) -> bool:
    from langchain_core.language_models import BaseLanguageModel

    return isinstance(obj, BaseLanguageModel)


def _label(component: Any) -> str:
    if isinstance(component, str):
        return component
    try:
        return component.get_name()
    except Exception:  # any object: its type names it
        return type(component).__name__
