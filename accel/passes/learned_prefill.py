"""Learned prefill: pass 3's early prefill for code accel does not lower (issue 11, item 4).

A program's own code (a LangGraph node function, a chat engine, a tool) builds its prompts;
accel sees them only as engine requests. From the runs it watches it learns, per call site,
how a prompt is made of static text and values the run produced earlier (its input, an earlier
LLM call's text, the passages a search returned): `learn`. Every later run checks how far the
pattern held (`reproduced`: how many leading parts its real prompt repeats); what it held is
what may be warmed in the next runs. As soon
as the values a prefix needs are known (`ready`) while a later value of the prompt is still to
come (`waiting`), the runtime warms that prefix in vLLM's prefix cache, as pass 3 does for
lowered prompts: the program is still busy producing the rest. The request the program then sends is never touched: a wrong guess costs a
warm-up, never an answer.

Only prefixes that hold a run's own value are worth warming (`worth_warming`): a prefix made of
static text alone is the same in every run, so vLLM's automatic prefix cache already holds it
after the first.

Pure functions over recorded prompts and values: the runtime's program model
(`accel.runtime.programs.learned`, which takes this module as its `WarmDecisions`) records the
runs, applies the warm-up policy and sends the warm-ups; the floor only reports the calls. Its
one switch is this pass's name in `WrapOptions.disabled_passes`.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from accel.ir.dynamic import LearnedPrompt, Prompt
from accel.ir.ops import PromptPart, Slot

NAME = "learned_prefill"
MIN_VALUE_CHARS = 16
"""Values shorter than this are not looked for in prompts: a short word or number would be
found by chance in static text."""


def learn(prompt: Prompt, values: Mapping[str, str]) -> LearnedPrompt:
    """`prompt` written as static text and slots: every occurrence of a value (longest values
    first, occurrences that do not overlap one already placed) becomes a `Slot` naming it."""
    if isinstance(prompt, str):
        return LearnedPrompt(parts=_split(prompt, values))
    return LearnedPrompt(messages=tuple((m["role"], _split(m["content"], values)) for m in prompt))


def reproduced(learned: LearnedPrompt, prompt: Prompt, values: Mapping[str, str]) -> int:
    """How many leading parts of `learned` (in `flat_parts` order), rendered with this run's
    `values`, repeat the start of this run's real `prompt` exactly."""
    if isinstance(prompt, str):
        return 0 if learned.messages else _reproduced_text(learned.parts, prompt, values)
    if not learned.messages:
        return 0
    count = 0
    for (role, parts), message in zip(learned.messages, prompt):
        if message.get("role") != role:
            return count
        content = message.get("content", "")
        matched = _reproduced_text(parts, content, values)
        if matched < len(parts) or _rendered_length(parts, values) != len(content):
            # a message that goes on past its parts ends the prefix (its later parts would be
            # rendered without the text that follows them)
            return count + matched
        count += len(parts)
    return count


def ready(learned: LearnedPrompt, upto: int, available: Container[str]) -> int:
    """How many leading parts (at most `upto`) can be rendered from the values `available`."""
    for i, part in enumerate(learned.flat_parts[:upto]):
        if isinstance(part, Slot) and part.port not in available:
            return i
    return min(upto, len(learned.flat_parts))


def waiting(learned: LearnedPrompt, available: Container[str]) -> bool:
    """Whether some value of the prompt is still to come. A prompt whose values are all known
    is about to be sent: warming it then would only race the request and prefill it twice."""
    return ready(learned, len(learned.flat_parts), available) < len(learned.flat_parts)


def worth_warming(learned: LearnedPrompt, n: int) -> bool:
    """Whether the first `n` parts hold a run's own value (static text alone is cached by
    vLLM after its first use)."""
    return any(isinstance(p, Slot) for p in learned.flat_parts[:n])


def _split(text: str, values: Mapping[str, str]) -> tuple[PromptPart, ...]:
    """Slots for value occurrences: first one occurrence per value, so that equal values under
    several names (the same passage found twice) take one place each, in name order; then any
    further occurrences (a value the prompt repeats)."""
    spans: list[tuple[int, int, str]] = []
    ordered = [(n, v) for n, v in sorted(values.items(), key=lambda item: (-len(item[1]), item[0]))
               if len(v) >= MIN_VALUE_CHARS]
    for every in (False, True):
        for name, value in ordered:
            start = text.find(value)
            while start >= 0:
                end = start + len(value)
                if any(start < e and s < end for s, e, _ in spans):
                    start = text.find(value, start + 1)
                    continue
                spans.append((start, end, name))
                if not every:
                    break
                start = text.find(value, end)
    parts: list[PromptPart] = []
    at = 0
    for start, end, name in sorted(spans):
        if start > at:
            parts.append(text[at:start])
        parts.append(Slot(name))
        at = end
    if at < len(text):
        parts.append(text[at:])
    return tuple(parts)


def _reproduced_text(parts: tuple[PromptPart, ...], text: str, values: Mapping[str, str]) -> int:
    at = 0
    for i, part in enumerate(parts):
        piece = part if isinstance(part, str) else values.get(part.port)
        if piece is None or not text.startswith(piece, at):
            return i
        at += len(piece)
    return len(parts)


def _rendered_length(parts: tuple[PromptPart, ...], values: Mapping[str, str]) -> int:
    return sum(len(p) if isinstance(p, str) else len(values.get(p.port, "")) for p in parts)
