"""Incremental splitters: items independent of how the text is cut into deltas, and batch
semantics identical to the framework parsers apps use."""

from __future__ import annotations

import csv
import io
import json
import random
import re

import pytest

from accel.ir.splitters import make_splitter, split_all


def feed_in(kind: str, deltas: list[str]) -> list[list]:
    """Items returned by each feed, then by close (as a last entry)."""
    s = make_splitter(kind)
    return [s.feed(d) for d in deltas] + [s.close()]


def random_cuts(text: str, rng: random.Random) -> list[str]:
    out, i = [], 0
    while i < len(text):
        j = i + rng.randint(1, 4)
        out.append(text[i:j])
        i = j
    return out


REFERENCE = {
    "lines": lambda t: [line for line in t.strip().split("\n") if line],
    "numbered": lambda t: re.findall(r"\d+\.\s([^\n]+)", t),
    "comma": lambda t: [x for row in csv.reader(io.StringIO(t), quotechar='"', delimiter=",", skipinitialspace=True) for x in row],
}
ALPHABETS = {"lines": "ab \n\t", "numbered": "12. a\n", "comma": 'ab ,"\n'}


@pytest.mark.parametrize("kind", sorted(REFERENCE))
def test_random_texts_and_cuts_match_the_framework_parser(kind):
    rng = random.Random(kind)
    for _ in range(3000):
        text = "".join(rng.choice(ALPHABETS[kind]) for _ in range(rng.randint(0, 14)))
        try:
            expected = REFERENCE[kind](text)
        except csv.Error:
            continue
        assert split_all(kind, text) == expected, text
        assert sum(feed_in(kind, random_cuts(text, rng)), []) == expected, text


def test_lines_are_emitted_as_soon_as_they_are_final():
    steps = feed_in("lines", ["  first que", "ry\nsecond", " query\n", "\n  third", " query  \n  "])
    assert steps == [[], ["first query"], [], ["second query"], [], ["  third query"]]


def test_lines_whitespace_only_tail_is_stripped_like_the_batch_parser():
    assert feed_in("lines", ["a  \n", " \n"]) == [[], [], ["a"]]
    assert split_all("lines", "a\n \nb") == ["a", " ", "b"]


def test_numbered_items_wait_for_their_newline_and_skip_preamble():
    steps = feed_in("numbered", ["Here are queries:\n1", ". alpha", " beta\n2.", " gamma\n", "3. delta"])
    assert steps == [[], [], ["alpha beta"], ["gamma"], [], ["delta"]]


def test_comma_handles_quotes_across_deltas():
    steps = feed_in("comma", ['red, "dark', ', blue"', ', green'])
    assert steps == [["red"], [], ["dark, blue"], ["green"]]


def test_json_array_elements_split_across_deltas():
    text = 'Sure! ```json\n["what is \\"x\\"?", {"q": "a, b", "k": [1, 2]}, 3]\n``` done'
    deltas = ["Sure! ```json\n[\"what is \\", "\"x\\\"?\", {\"q\": \"a,", " b\", \"k\": [1,", " 2]}, 3", "]\n``` done"]
    assert "".join(deltas) == text
    steps = feed_in("json_array", deltas)
    assert steps == [[], ['what is "x"?'], [], [{"q": "a, b", "k": [1, 2]}], [3], []]
    assert split_all("json_array", text) == json.loads(text[text.index("["): text.rindex("]") + 1])


def test_json_array_random_cuts_match_json_loads():
    rng = random.Random(7)
    for _ in range(300):
        value = [rng.choice(["a,b", 'q"x', 1, 2.5, None, True, {"k": [1, {"z": "]"}]}, ["[", "}"]]) for _ in range(rng.randint(0, 5))]
        text = "prefix " + json.dumps(value) + " trailing [9]"
        assert sum(feed_in("json_array", random_cuts(text, rng)), []) == value


def test_json_array_cut_off_by_end_of_stream_keeps_complete_items():
    assert split_all("json_array", '["a", "b", "c') == ["a", "b"]
    assert split_all("json_array", '["a", "b"') == ["a", "b"]
    assert split_all("json_array", "no array here") == []


def test_unknown_splitter_is_an_error():
    with pytest.raises(ValueError, match="unknown splitter"):
        make_splitter("xml")
