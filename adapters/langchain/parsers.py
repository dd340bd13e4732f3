"""Output parsers whose exact semantics a Decode reproduces: the text itself, or a list whose
items the decode-pipelining splitters parse exactly as the parser does."""

from __future__ import annotations

import sys
from typing import Any

from accel.ir.splitters import NumberedSplitter


def kind(parser: Any) -> str | None:
    """"str" for StrOutputParser, a splitter name for list parsers, None for anything else
    (which then runs as-is on the model's output)."""
    from langchain_core.output_parsers import CommaSeparatedListOutputParser, NumberedListOutputParser, StrOutputParser

    if type(parser) is StrOutputParser:
        return "str"
    if type(parser) is CommaSeparatedListOutputParser:
        return "comma"
    if type(parser) is NumberedListOutputParser and parser.pattern == NumberedSplitter.PATTERN.pattern:
        return "numbered"
    multi_query = sys.modules.get("langchain_classic.retrievers.multi_query")
    if multi_query is not None and type(parser) is multi_query.LineListOutputParser:
        return "lines"
    return None


ITEM_STREAMING = frozenset({"comma", "numbered"})
"""The list parsers whose stock `stream` yields `[item]` per item as it is parsed (the
`ListOutputParser`s); `LineListOutputParser`, a plain `BaseOutputParser`, yields the list once."""
