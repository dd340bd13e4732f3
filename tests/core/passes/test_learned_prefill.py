"""Learned prefill's pure part: prompts written as static text and slots over a run's values,
checked against later runs, and the prefix that is ready to warm."""

from __future__ import annotations

from accel.ir.dynamic import LearnedPrompt, Site
from accel.ir.ops import Slot
from accel.passes import PASSES, PROGRAM_PASSES, optimize
from accel.passes import learned_prefill as lp

CONTEXT = "heapq.heappush(heap, item): push the value item onto the heap, keeping the invariant."
QUESTION = "How do I push an item onto a heap?"
NOTES = "Use heapq.heappush and never sort the list yourself."


def writer(context: str, notes: str, question: str) -> str:
    return f"Write the final answer.\nContext:\n{context}\n\nAPI notes: {notes}\nQuestion: {question}\nAnswer: "


def values(context: str = CONTEXT, notes: str = NOTES, question: str = QUESTION) -> dict[str, str]:
    return {"search:retrieve/0#0[0]": context, "llm:reference/0#0": notes, "input.question": question}


def test_learn_writes_the_values_as_slots_between_static_text():
    learned = lp.learn(writer(CONTEXT, NOTES, QUESTION), values())
    assert learned.parts == (
        "Write the final answer.\nContext:\n", Slot("search:retrieve/0#0[0]"), "\n\nAPI notes: ",
        Slot("llm:reference/0#0"), "\nQuestion: ", Slot("input.question"), "\nAnswer: ",
    )
    assert learned.slots() == ["search:retrieve/0#0[0]", "llm:reference/0#0", "input.question"]


def test_short_values_are_not_looked_for_and_longer_values_win_overlaps():
    prompt = "Answer yes or no. Question: " + QUESTION
    learned = lp.learn(prompt, {"input.word": "yes", "input.q": QUESTION, "input.part": "push an item onto"})
    assert learned.parts == ("Answer yes or no. Question: ", Slot("input.q"))


def test_a_value_found_twice_is_a_slot_twice():
    learned = lp.learn(f"{QUESTION}\n---\n{QUESTION}", {"input.q": QUESTION})
    assert learned.parts == (Slot("input.q"), "\n---\n", Slot("input.q"))


def test_a_later_run_repeats_the_pattern_with_its_own_values():
    learned = lp.learn(writer(CONTEXT, NOTES, QUESTION), values())
    other = values(context="bisect.insort(a, x): insert x in a, keeping it sorted, a sorted list.",
                   notes="Prefer insort_left when ties should go first in the list.", question="How do I keep a list sorted?")
    prompt = writer(other["search:retrieve/0#0[0]"], other["llm:reference/0#0"], other["input.question"])
    assert lp.reproduced(learned, prompt, other) == len(learned.parts)


def test_a_prompt_that_changed_is_reproduced_up_to_the_change_only():
    learned = lp.learn(writer(CONTEXT, NOTES, QUESTION), values())
    changed = writer(CONTEXT, NOTES, QUESTION).replace("API notes", "Notes")
    assert lp.reproduced(learned, changed, values()) == 2
    assert lp.reproduced(learned, writer(CONTEXT, NOTES, QUESTION), {}) == 1  # the context value is missing


def test_ready_stops_at_the_first_value_not_yet_known():
    learned = lp.learn(writer(CONTEXT, NOTES, QUESTION), values())
    assert lp.ready(learned, len(learned.parts), {"search:retrieve/0#0[0]"}) == 3
    assert lp.ready(learned, 2, set(values())) == 2  # never past what was verified
    assert lp.worth_warming(learned, 3)
    assert not lp.worth_warming(learned, 1)  # static text alone: vLLM's cache has it after one run


def test_chat_prompts_are_learned_per_message_and_checked_role_by_role():
    system = f"You are an assistant.\n\n{CONTEXT}"
    prompt = [{"role": "system", "content": system}, {"role": "user", "content": QUESTION}]
    learned = lp.learn(prompt, values())
    assert learned.messages == (
        ("system", ("You are an assistant.\n\n", Slot("search:retrieve/0#0[0]"))),
        ("user", (Slot("input.question"),)),
    )
    assert lp.reproduced(learned, prompt, values()) == 3
    as_assistant = [prompt[0], {"role": "assistant", "content": QUESTION}]
    assert lp.reproduced(learned, as_assistant, values()) == 2
    longer = [{"role": "system", "content": system + " Be brief."}, prompt[1]]
    assert lp.reproduced(learned, longer, values()) == 2  # the message goes on: the prefix ends there
    assert lp.reproduced(learned, "a completion prompt", values()) == 0


def test_sites_name_their_values_and_describe_their_prompts():
    site = Site("retrieve", 0, "vectordb", 0)
    assert site.source(2) == "vectordb:retrieve/0#0[2]"
    assert Site("", 1, "llm", 3).source() == "llm:-/1#3"
    learned = LearnedPrompt(parts=("Context: ", Slot("vectordb:retrieve/0#0[0]"), "\nAnswer: "))
    assert learned.describe() == "text(9) + vectordb:retrieve/0#0[0] + text(9)"
    assert learned.describe(upto=2) == "text(9) + vectordb:retrieve/0#0[0]"


def test_the_pass_is_switched_off_by_name_but_is_no_graph_pass(rag_template):
    from accel.options import WrapOptions

    assert lp.NAME in PROGRAM_PASSES and lp.NAME not in PASSES
    optimized = optimize(rag_template.transform(), disabled=[lp.NAME])  # accepted; every graph pass still runs
    assert optimized.meta["passes"] == list(PASSES)
    assert WrapOptions(disabled_passes=[lp.NAME]).disabled_passes == (lp.NAME,)


def test_a_prompt_whose_values_are_all_known_is_not_waiting():
    learned = lp.learn(writer(CONTEXT, NOTES, QUESTION), values())
    assert lp.waiting(learned, {"search:retrieve/0#0[0]"})
    assert not lp.waiting(learned, set(values()))


def test_equal_values_under_several_names_take_one_place_each():
    doc = "A passage that two searches both returned, word for word."
    learned = lp.learn(f"Context:\n{doc}\n\n{doc}\nAnswer:", {"vectordb:r/0#0[1]": doc, "vectordb:r/0#0[0]": doc})
    assert learned.parts == ("Context:\n", Slot("vectordb:r/0#0[0]"), "\n\n", Slot("vectordb:r/0#0[1]"), "\nAnswer:")
