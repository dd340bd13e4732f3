"""LlamaIndex's token estimates without a thread and an event loop per message.

Not an engine call: framework overhead on the path between them. llama-index-core 0.14's
`BaseContentBlock.estimate_tokens` runs the block's `aestimate_tokens` coroutine through
`async_utils.asyncio_run`, which, called where a loop is running (every async query engine and
chat engine: `PromptHelper.repack` counts the tokens of each prompt message before each LLM
call), starts a thread with a new event loop and blocks the caller's loop until it has run;
elsewhere it makes a new event loop each call. For text the coroutine only calls the tokenizer
and never suspends. Measured on the 2-core reference machine: 0.43 ms a text block from inside
a running loop, 0.58 ms outside one, against 0.02 ms driving the same coroutine to its end in
place (docs/benchmarks-twin.md).

During a wrapped run, a block whose estimate is known to be pure (text, thinking, and messages
or other nested blocks made only of those: `_pure_estimates`) gets its coroutine run in place, so the
count is the same tokenizer's on the same text. Any other block (images, audio, documents,
tool calls: their estimates may read files or URLs), a coroutine that suspends after all, and
every call outside a wrapped run take stock's path.
"""

from __future__ import annotations

import functools
from typing import Any

from accel.adapters.common.floor import Plugin, register, route

COMPONENT = "llamaindex:token-estimates"


@functools.cache
def _pure_estimates() -> tuple[frozenset[Any], type]:
    """The `aestimate_tokens` methods that only call the tokenizer (or sum their nested
    blocks'), read from llama-index-core 0.14's `base/llms/types.py`, and the nesting class."""
    from llama_index.core.base.llms import types

    return (frozenset({types.BaseContentBlock.aestimate_tokens, types.TextBlock.aestimate_tokens,
                       types.ThinkingBlock.aestimate_tokens, types.BaseRecursiveContentBlock.aestimate_tokens}),
            types.BaseRecursiveContentBlock)


def _is_pure(block: Any) -> bool:
    pure, nesting = _pure_estimates()
    if type(block).aestimate_tokens not in pure:
        return False
    return not isinstance(block, nesting) or all(_is_pure(nested) for nested in block.nested_blocks)


def _estimate(original: Any) -> Any:
    @functools.wraps(original)
    def estimate_tokens(self: Any, tokenizer: Any | None = None) -> int:
        if route.active_run() is None or not _is_pure(self):
            return original(self, tokenizer)
        coroutine = self.aestimate_tokens(tokenizer=tokenizer)
        try:
            coroutine.send(None)
        except StopIteration as done:
            route.stats.count("routed", COMPONENT)
            return done.value
        coroutine.close()  # it suspended: a pure estimate has no side effects, so stock's path recounts
        route.note_stock(COMPONENT, "an estimate suspended on an await")
        return original(self, tokenizer)

    return estimate_tokens


register(Plugin(COMPONENT, "llama_index.core.base.llms.types", "BaseContentBlock", {"estimate_tokens": _estimate}))
