"""Prompt -> model (-> parser) lowered as Prefill/Decode: the part of `capture.Capture` that
turns a chat or completion model call (and the prompt before it, the parser after it) into
primitives with the prompt's parts exposed, and records each component's run spec.

A mixin: it uses its host's graph helpers (`add`, `fn`, `note`, `engine`) and run-spec
helpers (`open_run`, `close_run`), and fills `llm_engines` / `models`.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.langchain import parsers
from accel.adapters.langchain.models import ModelBinding, bind_model
from accel.adapters.langchain.ops import ChatResult
from accel.adapters.langchain.prompts import prompt_shape, prompt_variables
from accel.adapters.langchain.runs import RunSpec
from accel.adapters.langchain.structure import unbind
from accel.ir import Kind, Ref
from accel.ir.ops import DecodeOp, PromptOp


class ModelLowering:
    def fused(self, steps: list[Any], i: int, x: Ref) -> tuple[int, Ref] | None:
        """Prompt -> model -> parser runs as Prefill/Decode with the prompt's parts exposed;
        each keeps its own run (`seq:step:N`), opened after the one before."""
        from langchain_core.prompts import BasePromptTemplate

        prompt = steps[i] if isinstance(steps[i], BasePromptTemplate) else None
        at = i + 1 if prompt is not None else i
        if at >= len(steps):
            return None
        model, kwargs, tracing = unbind(steps[at])
        binding, _ = bind_model(model, kwargs) if model is not None and is_model(model) else (None, "")
        if binding is None:
            return None
        split = parsers.kind(steps[at + 1]) if at + 1 < len(steps) else None
        used = at - i + 1 + (split is not None)
        source: Ref | int = x
        if prompt is not None:
            shape, reason = prompt_shape(prompt, chat=binding.chat)
            spec = self.open_run("prompt", prompt, x, f"seq:step:{i + 1}")
            self.close_run(spec, None)
            if shape is None:
                self.note(prompt, True, f"rendered by its own code ({reason})")
                rendered = self.fn("prompt", prompt._format_prompt_with_error_handling, inner_input=x)
                model_input = self.model_input(binding, rendered)
            else:
                model_input = self.prompt_node(prompt, shape, x)
            source = spec.id
        else:
            model_input = self.model_input(binding, x)
        self._tracing = self._tracing + tracing
        out, model_run = self.llm(binding, model_input, split, model, source, f"seq:step:{at + 1}")
        if prompt is not None:
            model_run.after = source
        if split is not None:
            parser = self.open_run("parser", steps[at + 1], model_run.id, f"seq:step:{at + 2}", after=model_run.id)
            self.close_run(parser, out)
        return used, out

    def model(self, model: Any, kwargs: dict[str, Any], x: Ref, tag: str | None) -> Ref:
        binding, reason = bind_model(model, kwargs)
        if binding is None:
            from accel.adapters.langchain.capture import Opaque

            raise Opaque(reason)
        return self.llm(binding, self.model_input(binding, x), None, model, x, tag)[0]

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

    def llm(self, binding: ModelBinding, prompt: Ref, split: str | None, model: Any, source: Ref | int,
            tag: str | None) -> tuple[Ref, RunSpec]:
        """Decode (and the chat message it becomes) for `model`, and the model's run spec:
        its input is `source` (a value, or a fused prompt's run), its output its generation."""
        engine = self.engine(binding.engine)
        self.llm_engines.add(engine)
        self.models.append(binding)
        kind = None if split in (None, "str") else split
        op = DecodeOp(params=binding.params, split=kind, result="generation" if binding.chat and kind is None else "text",
                      item_stream=kind in parsers.ITEM_STREAMING)
        attrs: dict[str, Any] = {"params": binding.params}
        if kind is not None:
            attrs["splittable"] = kind
        decode = self.add(Kind.DECODE, "decode", engine=engine, inputs={"prompt": prompt}, attrs=attrs, op=op)
        run = self.open_run("llm", model, source, tag, decode=decode.node, binding=binding)
        self.close_run(run, None)
        self.note(model, True, f"Decode on {engine}" + (f", output parsed as {split}" if split else ""))
        if op.result == "generation":
            shape = ChatResult(binding.model_name, text=split == "str", stream_usage=binding.streams_usage, model=binding.model)
            return self.add(Kind.CALL, "message", inputs={"generation": decode}, op=shape), run
        return decode, run


def is_model(obj: Any) -> bool:
    from langchain_core.language_models import BaseLanguageModel

    return isinstance(obj, BaseLanguageModel)
