"""The offline corpus: stable ids, scrubbed text, identical whatever the caller imported."""

import logging
import re

import pytest

from accel.engines.errors import InvalidRequest
from accel.engines.offline.corpus import DEFAULT_MODULES, _render, stdlib_docs


def test_one_document_per_module_in_order():
    docs = stdlib_docs()
    assert [d.id for d in docs] == [f"stdlib:{m}" for m in DEFAULT_MODULES]
    assert len(docs) >= 40
    assert all(len(d.text) > 500 for d in docs)
    assert docs[0].metadata == {"source": "pydoc", "module": DEFAULT_MODULES[0]}


def test_text_has_no_machine_specific_details():
    text = "\n".join(d.text for d in stdlib_docs())
    assert not re.search(r"0x[0-9a-fA-F]{6,}", text)
    assert "site-packages" not in text and "/usr/" not in text
    assert "\nFILE\n" not in text


def test_caller_state_does_not_leak_into_the_text():
    before = [d.text for d in stdlib_docs(("logging", "json"))]
    logging.Logger.accel_test_marker = lambda self: None  # what libraries like transformers do
    try:
        _render.cache_clear()
        after = [d.text for d in stdlib_docs(("logging", "json"))]
    finally:
        del logging.Logger.accel_test_marker
    assert after == before


def test_unknown_module_is_a_typed_error():
    with pytest.raises(InvalidRequest, match="corpus"):
        stdlib_docs(("no_such_module_xyz",))
