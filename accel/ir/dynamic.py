"""The dynamic p-graph of a program: what the engine calls of code accel does not lower look
like, learned from the runs it watched.

A program (a wrapped LangGraph graph, chat engine, workflow, ...) runs its own code; the floor
sees its engine calls. Each call has a `Site`, its place in the program (the node making it,
which visit of that node, the engine kind, the call's ordinal in that visit), stable from one
run to the next where the program's control flow is. Values a run produces (its input, the text
an LLM call returned, the passages a search found) are named after their site (`Site.source`),
so an LLM call's prompt can be written as a `LearnedPrompt`: static text and `Slot`s that name
those values. What the prompt of a site will be, up to its first value not yet known, is then
known before the program makes the call.
"""

from __future__ import annotations

from dataclasses import dataclass

from accel.ir.ops import PromptPart, Slot

Prompt = str | list[dict[str, str]]
"""An LLM request's prompt: completion text, or chat messages (`role`, `content` strings)."""


@dataclass(frozen=True, order=True)
class Site:
    """Where a program makes an engine call: `node` ('' where the program has no known nodes),
    its `visit` (0 for the node's first task in the run, 1 for the next, ...), the engine
    `kind` ("llm", "vectordb", ...) and the call's `ordinal` among that task's calls of the
    kind."""

    node: str
    visit: int
    kind: str
    ordinal: int

    def source(self, index: int | None = None) -> str:
        """The name of the value this call produced (item `index` of a list result)."""
        name = f"{self.kind}:{self.node or '-'}/{self.visit}#{self.ordinal}"
        return name if index is None else f"{name}[{index}]"

    def __str__(self) -> str:
        return self.source()


@dataclass(frozen=True)
class LearnedPrompt:
    """A prompt as static text and slots naming program values: completion `parts`, or chat
    `messages` ((role, parts) per message)."""

    parts: tuple[PromptPart, ...] = ()
    messages: tuple[tuple[str, tuple[PromptPart, ...]], ...] = ()

    @property
    def flat_parts(self) -> tuple[PromptPart, ...]:
        """Every part in prompt order (message contents one after another)."""
        if self.messages:
            return tuple(p for _, parts in self.messages for p in parts)
        return self.parts

    def slots(self, upto: int | None = None) -> list[str]:
        """The value names the first `upto` parts (all when None) read."""
        return [p.port for p in self.flat_parts[:upto] if isinstance(p, Slot)]

    def describe(self, upto: int | None = None) -> str:
        """Short text for explain(): static runs by length, slots by name."""
        out = []
        for part in self.flat_parts[:upto]:
            out.append(part.port if isinstance(part, Slot) else f"text({len(part)})")
        return " + ".join(out) if out else "(empty)"
