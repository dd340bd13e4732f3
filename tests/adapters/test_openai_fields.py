"""One rule for both adapters' LLM lowering (adapters/common/openai_fields.py): a request body
field goes as the stock client sends it, unless accel cannot reproduce what it asks for."""

from __future__ import annotations

from typing import Any

from accel.adapters.common.openai_fields import refused


def test_body_fields_are_sent_and_only_what_accel_cannot_reproduce_is_refused() -> None:
    assert refused({"presence_penalty": 0.5, "logit_bias": {"0": -100}, "user": "u", "n": 1, "best_of": 1,
                    "logprobs": None, "tools": [], "echo": False}) is None
    assert "response shape" in refused({"tools": [{"type": "function"}]})
    assert "response shape" in refused({"best_of": 2})
    assert "n > 1" in refused({"n": 3})
    assert "['extra_headers']" in refused({"extra_headers": {"x": "1"}})


def test_a_langchain_model_with_client_options_in_model_kwargs_stays_on_the_floor() -> None:
    """The SDK takes `extra_headers` as a header option, not a body field: a lowered request
    would have sent it in the body (as it did before this rule), so the model stays stock."""
    from langchain_openai import ChatOpenAI

    from accel.adapters.langchain.models import bind_model

    def bind(**settings: Any) -> tuple[Any, str]:
        return bind_model(ChatOpenAI(model="m", base_url="http://127.0.0.1:1/v1", api_key="EMPTY", **settings), {})

    binding, reason = bind(model_kwargs={"extra_headers": {"x-team": "a"}})
    assert binding is None and "['extra_headers']" in reason
    binding, _ = bind(presence_penalty=0.5)
    assert binding is not None and binding.params.extra["presence_penalty"] == 0.5
