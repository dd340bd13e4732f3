"""What each lowered component's own `invoke` tells the callbacks, said the same way.

One function per moment of a run (`open_run`, `close_run`, `fail_run`), following the stock
code of each kind in langchain-core: `RunnableSequence.invoke` / `_call_with_config` for chain
runs, `BasePromptTemplate.invoke` (its tags, metadata and serialized form), the output parsers'
`invoke`, `BaseChatModel.generate` / `BaseLLM.generate` (invocation params, `ls_*` metadata,
traced messages) and `BaseRetriever.invoke`. `runs.RunTree` decides when.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.langchain.runs import RunSpec, RunTree, _Run


def open_run(tree: RunTree, spec: RunSpec, run: _Run, value: Any) -> None:
    from langchain_core.runnables.config import get_callback_manager_for_config, patch_config

    parent = tree._run_of(spec.parent)
    if tree.leaf_root and spec.parent == tree.root_scope:
        config = dict(parent.config)
    else:
        config = patch_config(parent.config, callbacks=parent.managers[0].get_child(spec.tag))
    for binding in spec.bindings:  # as RunnableBinding.invoke merges its config, outermost first
        config = _with_binding(binding, config)
    run.config, run.started = config, True
    component = spec.component
    if spec.kind == "llm":
        run.managers = _open_model(spec, config, value)
        return
    if spec.kind == "retriever":
        run.managers = _open_retrievals(component, config, value, spec.each)
        return
    run_type: str | None = None
    serialized = None
    if spec.kind == "prompt":
        config = {**config, "metadata": {**config.get("metadata", {}), **(component.metadata or {})},
                  "tags": [*config.get("tags", []), *(component.tags or [])]}
        run.config, run_type, serialized = config, "prompt", component._serialized
    elif spec.kind == "parser":
        run_type = "parser"
    manager = get_callback_manager_for_config(config)
    run.managers = [manager.on_chain_start(serialized, value, run_type=run_type, name=config.get("run_name") or component.get_name())]
    if spec.kind == "prompt":
        try:
            run.output = component._format_prompt_with_error_handling(value)
        except Exception as err:  # noqa: BLE001 - the lowered prompt fails the query with the same error
            run.managers[0].on_chain_error(err)
            run.closed = True


def _with_binding(binding: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """`merge_configs(binding, config)` for a tracing-only binding (tags joined and sorted,
    the incoming metadata winning, the incoming run_name if any), without its
    `ensure_config`, which would read the context's config: on accel's loop that is the
    wrapped call's, not this run's parent's."""
    return {**config, "tags": sorted({*binding.get("tags", []), *(config.get("tags") or [])}),
            "metadata": {**binding.get("metadata", {}), **(config.get("metadata") or {})},
            "run_name": config.get("run_name") or binding.get("run_name")}


def close_run(tree: RunTree, spec: RunSpec, run: _Run, value: Any) -> None:
    from langchain_core.outputs import LLMResult

    if spec.kind == "llm":
        run_id = run.managers[0].run_id if run.managers else None
        generation, run.output, llm_output = _model_result(spec, value, chunked=tree.ends_in_chunk(spec.id), run_id=run_id)
        result = LLMResult(generations=[[generation]] if generation is not None else [[]], llm_output=llm_output)
        for manager in run.managers:
            manager.on_llm_end(result)
        return
    if spec.kind == "retriever":
        outputs = value if spec.each else [value]
        for manager, docs in zip(run.managers, outputs or [None] * len(run.managers), strict=False):
            manager.on_retriever_end(docs)
        return
    for manager in run.managers:
        manager.on_chain_end(value)


def fail_run(spec: RunSpec, run: _Run, error: BaseException) -> None:
    for manager in run.managers:
        if spec.kind == "llm":
            manager.on_llm_error(error)
        elif spec.kind == "retriever":
            manager.on_retriever_error(error)
        else:
            manager.on_chain_error(error)


def token_chunk(spec: RunSpec, text: str) -> Any:
    """The chunk a stock model hands `on_llm_new_token` with a streamed piece of text."""
    from langchain_core.messages import AIMessageChunk
    from langchain_core.outputs import ChatGenerationChunk, GenerationChunk

    if spec.binding.chat:
        return ChatGenerationChunk(message=AIMessageChunk(content=text))
    return GenerationChunk(text=text)


# ---- models and retrievers -------------------------------------------------------------------


def _open_model(spec: RunSpec, config: dict[str, Any], value: Any) -> list[Any]:
    """`BaseChatModel.generate` / `BaseLLM.generate`'s callback set-up for one prompt."""
    from langchain_core.callbacks import CallbackManager
    from langchain_core.language_models._utils import _filter_invocation_params_for_tracing

    model, kwargs = spec.binding.model, dict(spec.binding.kwargs)
    stop = kwargs.pop("stop", None)
    metadata = {**(config.get("metadata") or {}), **model._get_ls_params_with_defaults(stop=stop, **kwargs)}
    prompt = model._convert_input(value)
    if spec.binding.chat:
        from langchain_core.language_models.chat_models import _format_for_tracing

        params = model._get_invocation_params(stop=stop, **kwargs)
    else:
        params = {**model._dict_for_compat(), "stop": stop}
    manager = CallbackManager.configure(config.get("callbacks"), model.callbacks, model.verbose, config.get("tags"), model.tags,
                                        metadata, model.metadata,
                                        langsmith_inheritable_metadata=_filter_invocation_params_for_tracing(params))
    options = {"stop": stop}
    if spec.binding.chat:
        return manager.on_chat_model_start(model._serialized, [_format_for_tracing(prompt.to_messages())], invocation_params=params,
                                           options=options, name=config.get("run_name"), batch_size=1)
    return manager.on_llm_start(model._serialized, [prompt.to_string()], invocation_params=params, options=options,
                                name=config.get("run_name"), batch_size=1)


def _model_result(spec: RunSpec, generation: Any, *, chunked: bool, run_id: Any = None) -> tuple[Any, Any, Any]:
    """(the generation `on_llm_end` reports, the model's output: an AIMessage or the text, the
    result's `llm_output`). A model a stock `stream` reached reports its chunks merged
    (`chunked`), as `stream` does, with no `llm_output`; `invoke` reports what the stock model's
    own response parser gives (`messages.stock_result`: the server's token usage, id, ...)."""
    from langchain_core.messages import AIMessageChunk
    from langchain_core.outputs import ChatGenerationChunk, Generation, GenerationChunk

    from accel.adapters.langchain.messages import message_id, stock_answer, streamed_metadata

    if generation is None:
        return None, None, None
    info = {"finish_reason": generation.finish_reason, "logprobs": None}
    if not spec.binding.chat:
        if chunked:
            return GenerationChunk(text=generation.text, generation_info=info), generation.text, None
        counts = {"prompt_tokens": generation.prompt_tokens, "completion_tokens": generation.completion_tokens,
                  "total_tokens": generation.prompt_tokens + generation.completion_tokens}
        return Generation(text=generation.text, generation_info=info), generation.text, {"token_usage": counts, "model_name": spec.binding.model_name}
    answer, llm_output = stock_answer(spec.binding.model, spec.binding.model_name, generation, run_id)
    if not chunked:
        return answer, answer.message, llm_output
    message = answer.message
    usage = message.usage_metadata if spec.binding.streams_usage else None
    chunk = AIMessageChunk(content=message.content, response_metadata=streamed_metadata(message, spec.binding.model_name, stream_usage=spec.binding.streams_usage),
                           usage_metadata=usage, id=message_id(run_id, streamed=True))
    return ChatGenerationChunk(message=chunk, generation_info=info), chunk, None


def _open_retrievals(retriever: Any, config: dict[str, Any], value: Any, each: bool) -> list[Any]:
    """`BaseRetriever.invoke`'s callback set-up, once per query text."""
    from langchain_core.callbacks import CallbackManager

    metadata = {**(config.get("metadata") or {}), **retriever._get_ls_params()}
    managers = []
    for query in (value if each else [value]):
        manager = CallbackManager.configure(config.get("callbacks"), None, verbose=False, inheritable_tags=config.get("tags"),
                                            local_tags=retriever.tags, inheritable_metadata=metadata, local_metadata=retriever.metadata)
        managers.append(manager.on_retriever_start(None, query, name=config.get("run_name") or retriever.get_name()))
    return managers
