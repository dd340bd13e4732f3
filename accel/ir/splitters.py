"""Incremental parsers for splittable LLM outputs (decode pipelining).

Each splitter is a character-level state machine: `feed(delta)` returns the items completed by
`delta`, `close()` the items left at the end of the stream. Because they read one character at
a time, the items do not depend on how the text was cut into deltas, and `split_all(kind, text)`
(the non-streamed value) is the same parser fed once. The batch semantics match the framework
parsers an app would use, so a pipelined decode yields exactly the stock items:

- "lines": LangChain's `LineListOutputParser`: `[l for l in text.strip().split("\\n") if l]`;
- "numbered": LangChain's `NumberedListOutputParser`: `re.findall(r"\\d+\\.\\s([^\\n]+)", text)`;
- "comma": LangChain's `CommaSeparatedListOutputParser`: `csv.reader(skipinitialspace=True)`
  fields of all rows;
- "json_array": the elements of the first top-level JSON array in the text (prose and code
  fences around it are ignored), each decoded with `json.loads`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Protocol


class Splitter(Protocol):
    def feed(self, delta: str) -> list[Any]: ...

    def close(self) -> list[Any]: ...


class LineSplitter:
    """A completed line is emitted once non-whitespace text follows it (until then it could be
    the last line, whose trailing whitespace the global strip removes)."""

    def __init__(self) -> None:
        self._started = False
        self._line: list[str] = []
        self._pending: list[str] = []

    def feed(self, delta: str) -> list[str]:
        out: list[str] = []
        for ch in delta:
            if not self._started:
                if ch.isspace():
                    continue
                self._started = True
            if ch == "\n":
                self._pending.append("".join(self._line))
                self._line = []
                continue
            self._line.append(ch)
            if self._pending and not ch.isspace():
                out += [line for line in self._pending if line]
                self._pending = []
        return out

    def close(self) -> list[str]:
        rest = "\n".join([*self._pending, "".join(self._line)]).rstrip()
        self._pending, self._line = [], []
        return [line for line in rest.split("\n") if line]


class NumberedSplitter:
    """A match is final once the newline that ends its greedy `[^\\n]+` has arrived."""

    PATTERN = re.compile(r"\d+\.\s([^\n]+)")

    def __init__(self) -> None:
        self._buf = ""
        self._pos = 0

    def feed(self, delta: str) -> list[str]:
        self._buf += delta
        out: list[str] = []
        while (m := self.PATTERN.search(self._buf, self._pos)) is not None and m.end() < len(self._buf):
            out.append(m.group(1))
            self._pos = m.end()
        return out

    def close(self) -> list[str]:
        out = [m.group(1) for m in self.PATTERN.finditer(self._buf, self._pos)]
        self._pos = len(self._buf)
        return out


class CommaSplitter:
    """csv.reader(skipinitialspace=True) fields, emitted when their delimiter arrives."""

    def __init__(self) -> None:
        self._field: list[str] = []
        self._row_started = False  # any character of the current row was seen
        self._state = "start"  # start | plain | quoted | quote_in_quoted

    def _end_field(self) -> str:
        value = "".join(self._field)
        self._field = []
        self._state = "start"
        return value

    def feed(self, delta: str) -> list[str]:
        out: list[str] = []
        for ch in delta:
            state = self._state
            if state == "quoted":
                if ch == '"':
                    self._state = "quote_in_quoted"
                else:
                    self._field.append(ch)
                continue
            if state == "quote_in_quoted" and ch == '"':
                self._field.append('"')
                self._state = "quoted"
                continue
            if ch in "\r\n":
                if self._row_started:
                    out.append(self._end_field())
                self._row_started = False
                continue
            self._row_started = True
            if ch == ",":
                out.append(self._end_field())
            elif state == "start" and ch == " ":
                continue
            elif state == "start" and ch == '"':
                self._state = "quoted"
            else:
                self._field.append(ch)
                self._state = "plain"
        return out

    def close(self) -> list[str]:
        if self._row_started:
            self._row_started = False
            return [self._end_field()]
        return []


class JsonArraySplitter:
    """Elements of the first top-level JSON array, each emitted when the `,` or `]` closing it
    arrives. Text before the array and after its `]` is ignored."""

    def __init__(self) -> None:
        self._depth = 0  # bracket depth; 1 = inside the top-level array
        self._in_string = False
        self._escape = False
        self._done = False
        self._elem: list[str] = []

    def _emit(self, out: list[Any]) -> None:
        text = "".join(self._elem).strip()
        self._elem = []
        if text:
            out.append(json.loads(text))

    def feed(self, delta: str) -> list[Any]:
        out: list[Any] = []
        for ch in delta:
            if self._done:
                break
            if self._depth == 0:
                if ch == "[":
                    self._depth = 1
                continue
            if self._in_string:
                self._elem.append(ch)
                if self._escape:
                    self._escape = False
                elif ch == "\\":
                    self._escape = True
                elif ch == '"':
                    self._in_string = False
                continue
            if self._depth == 1 and ch in ",]":
                self._emit(out)
                if ch == "]":
                    self._depth, self._done = 0, True
                continue
            if ch == '"':
                self._in_string = True
            elif ch in "[{":
                self._depth += 1
            elif ch in "]}":
                self._depth -= 1
            self._elem.append(ch)
        return out

    def close(self) -> list[Any]:
        """An array cut off by the end of the stream yields its complete last element, if any."""
        out: list[Any] = []
        if not self._done and self._depth == 1 and not self._in_string:
            self._emit(out)
        self._done = True
        return out


SPLITTERS: dict[str, Callable[[], Splitter]] = {
    "lines": LineSplitter,
    "numbered": NumberedSplitter,
    "comma": CommaSplitter,
    "json_array": JsonArraySplitter,
}


def make_splitter(kind: str) -> Splitter:
    try:
        return SPLITTERS[kind]()
    except KeyError:
        raise ValueError(f"unknown splitter {kind!r}; known: {sorted(SPLITTERS)}") from None


def split_all(kind: str, text: str) -> list[Any]:
    """The items of a complete text (what the unsplit decode returns)."""
    splitter = make_splitter(kind)
    return splitter.feed(text) + splitter.close()
