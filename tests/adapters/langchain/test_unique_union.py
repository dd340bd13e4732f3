"""The lowered MultiQueryRetriever's union keeps exactly the documents stock's keeps (each
unless it equals one before it), the same objects in the same order, whatever the documents'
equality: pydantic's own, or a subclass's."""

from __future__ import annotations

import random

from langchain_core.documents import Document

from accel.adapters.langchain.union import unique_union


class LooseDocument(Document):
    """Equal to any document with the same text, whatever its type or metadata."""

    def __eq__(self, other: object) -> bool:
        return getattr(other, "page_content", None) == self.page_content

    __hash__ = None  # type: ignore[assignment]


def stock_union(lines: list[list[Document]], original: list[Document]) -> list[Document]:
    documents = [doc for docs in lines for doc in docs] + original
    return [doc for i, doc in enumerate(documents) if doc not in documents[:i]]


def test_the_union_is_stocks_for_random_hits():
    rng = random.Random(7)
    kinds = [lambda i: Document(page_content=f"chunk {i % 5}", metadata={"row": i % 3}),
             lambda i: Document(page_content=f"chunk {i % 5}", metadata={"row": i % 3}, id=str(i % 2)),
             lambda i: LooseDocument(page_content=f"chunk {i % 5}", metadata={"row": i})]
    for trial in range(300):
        make = kinds[0] if trial < 100 else rng.choice(kinds)
        lines = [[make(rng.randrange(30)) for _ in range(rng.randrange(7))] for _ in range(rng.randrange(4))]
        original = [make(rng.randrange(30)) for _ in range(rng.randrange(3))]
        expected = stock_union(lines, original)
        got = unique_union(lines, original)
        assert got == expected and all(a is b for a, b in zip(got, expected, strict=True))


def test_a_document_with_its_own_equality_is_compared_with_every_earlier_one():
    plain, loose = Document(page_content="same", metadata={"a": 1}), LooseDocument(page_content="same", metadata={"b": 2})
    assert unique_union([[plain], [loose]]) == stock_union([[plain], [loose]], []) == [plain]
