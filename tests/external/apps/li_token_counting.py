"""LlamaIndex example "Token Counting Handler" (observability callbacks)
(https://developers.llamaindex.ai/python/examples/observability/tokencountinghandler/,
source run-llama/llama_index docs/examples/observability/TokenCountingHandler.ipynb):

    token_counter = TokenCountingHandler(tokenizer=tiktoken.encoding_for_model("gpt-3.5-turbo").encode)
    Settings.llm = OpenAI(model="gpt-3.5-turbo", temperature=0.2)
    Settings.callback_manager = CallbackManager([token_counter])
    documents = SimpleDirectoryReader("./data/paul_graham").load_data()
    index = VectorStoreIndex.from_documents(documents)
    print(token_counter.total_embedding_token_count)

    token_counter.reset_counts()
    query_engine = index.as_query_engine(similarity_top_k=4)
    response = query_engine.query("What did the author do growing up?")
    print("Embedding Tokens: ", token_counter.total_embedding_token_count, ...
          "LLM Prompt Tokens: ", token_counter.prompt_llm_token_count, ...)

    token_counter.reset_counts()
    query_engine = index.as_query_engine(similarity_top_k=4, streaming=True)
    response = query_engine.query("What happened at Interleaf?")
    for token in response.response_gen:  # finish the stream
        continue

    print("Num LLM token count events: ", len(token_counter.llm_token_counts))
    print("prompt: ", token_counter.llm_token_counts[0].prompt[:100], ...)

Changes from the documented code:
- the tokenizer: LlamaIndex's default (`get_tokenizer()`, tiktoken's cl100k_base from the copy
  LlamaIndex ships), the encoding `encoding_for_model("gpt-3.5-turbo")` names, without a download;
- `OpenAI(model="gpt-3.5-turbo")` and the default embedding -> the starter tutorial's local
  stand-ins (`li_starter.configure`: OpenAILike on the test vLLM server, the packaged MiniLM);
- "./data/paul_graham" -> a folder of pydoc text files; the page's `LlamaDebugHandler` sits
  beside the counter (the observability guide's other callback handler), to compare events.
"""

from __future__ import annotations

from typing import Any

from llama_index.core import Settings, SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.callbacks import CallbackManager, LlamaDebugHandler, TokenCountingHandler
from llama_index.core.utils import get_tokenizer


def install() -> tuple[TokenCountingHandler, LlamaDebugHandler]:
    token_counter = TokenCountingHandler(tokenizer=get_tokenizer())
    debug = LlamaDebugHandler()
    Settings.callback_manager = CallbackManager([token_counter, debug])
    return token_counter, debug


def build_index(data_dir: str, VectorStoreIndex: Any = VectorStoreIndex) -> Any:  # noqa: N803 (the class, or a drop-in for it)
    documents = SimpleDirectoryReader(data_dir).load_data()
    return VectorStoreIndex.from_documents(documents)


def counts(token_counter: TokenCountingHandler) -> dict[str, Any]:
    """What the page prints: the totals, and each event's prompt, completion and counts."""
    return {
        "embedding": token_counter.total_embedding_token_count,
        "prompt": token_counter.prompt_llm_token_count,
        "completion": token_counter.completion_llm_token_count,
        "llm_events": [(e.prompt, e.completion, e.prompt_token_count, e.completion_token_count)
                       for e in token_counter.llm_token_counts],
        "embedding_events": [e.total_token_count for e in token_counter.embedding_token_counts],
    }
