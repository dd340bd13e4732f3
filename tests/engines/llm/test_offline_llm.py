"""The offline LLM builder: idempotent, atomic, loadable by transformers, resolvable by spec."""

from __future__ import annotations

import json

import pytest

from accel.engines.errors import ModelNotFound
from accel.engines.offline.llm import SPECS, STAMP, build_llm, resolve_llm


def test_rebuild_is_skipped_while_the_stamp_matches(tiny_model):
    stamp = tiny_model / STAMP
    before = stamp.stat().st_mtime_ns
    assert build_llm("tiny") == tiny_model
    assert stamp.stat().st_mtime_ns == before


def test_a_different_stamp_triggers_a_rebuild_into_a_fresh_directory(tmp_path):
    out = build_llm("tiny", tmp_path / "llm")
    weights = (out / "model.safetensors").read_bytes()
    (out / STAMP).write_text(json.dumps({"stale": True}))
    (out / "leftover.txt").write_text("from an older build")
    assert build_llm("tiny", out) == out
    assert json.loads((out / STAMP).read_text())["hidden_size"] == SPECS["tiny"].hidden_size
    assert not (out / "leftover.txt").exists()
    assert (out / "model.safetensors").read_bytes() == weights  # seeded: same weights again
    assert {p.name for p in tmp_path.iterdir()} == {"llm", ".llm.lock"}  # no staging or old dirs left


def test_transformers_loads_the_directory(tiny_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    params = sum(p.numel() for p in model.parameters())
    assert 3_000_000 < params < 6_000_000
    assert model.config.num_hidden_layers == 4 and model.config.vocab_size == 4096
    ids = tokenizer("def parse(text):")["input_ids"]
    assert ids[0] == tokenizer.bos_token_id and tokenizer.decode(ids[1:]) == "def parse(text):"
    chat = tokenizer.apply_chat_template([{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": "Hi"}],
                                         tokenize=False, add_generation_prompt=True)
    assert chat == "<s><|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n"


def test_resolve_llm_specs(tiny_model, tmp_path):
    assert resolve_llm(None, size="tiny") == str(tiny_model)
    assert resolve_llm(str(tiny_model)) == str(tiny_model)
    assert resolve_llm("meta-llama/Llama-3.2-1B-Instruct") == "meta-llama/Llama-3.2-1B-Instruct"
    with pytest.raises(ModelNotFound, match="build-llm"):
        resolve_llm(str(tmp_path / "missing"))
    with pytest.raises(ModelNotFound):
        resolve_llm("./models/missing")


def test_unknown_size_is_model_not_found():
    with pytest.raises(ModelNotFound, match="tiny"):
        build_llm("huge")  # type: ignore[arg-type]
