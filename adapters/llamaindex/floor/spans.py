"""Keeping LlamaIndex's own span on a captured method.

`DispatcherSpanMixin` wraps many component methods in a `dispatcher.span` (e.g.
`HuggingFaceEmbedding._get_query_embedding`, `SentenceTransformerRerank._postprocess_nodes`),
so stock opens a span named `<Class>.<method>` around them. A floor replacement set on the
class after it was created would lose it when the call is routed; `keep_span(wrap)` builds the
replacement around the method's own undecorated function and traces it with the same
dispatcher, so both the routed and the stock path open exactly stock's one span.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

Wrap = Callable[[Any], Any]
_DECORATED = "__dispatcher_span_decorated__"  # llama_index_instrumentation.dispatcher's marker


def keep_span(module: str, wrap: Wrap) -> Wrap:
    """`wrap` for a method of a class defined in `module` that LlamaIndex may trace."""

    def make(original: Any) -> Any:
        import llama_index.core.instrumentation as instrument
        import wrapt

        if not isinstance(original, wrapt.FunctionWrapper):
            return wrap(original)
        raw = original.__wrapped__
        inner = wrap(raw)
        inner.__dict__.pop(_DECORATED, None)  # copied from `raw` by functools.wraps: span() would skip it
        spanned = instrument.get_dispatcher(module).span(inner)

        @functools.wraps(raw)
        def replacement(self: Any, *args: Any, **kwargs: Any) -> Any:
            return spanned.__get__(self, type(self))(*args, **kwargs)

        return replacement

    return make
