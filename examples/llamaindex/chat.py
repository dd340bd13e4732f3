"""Chat over documents in LlamaIndex: a condense-plus-context chat engine (the chat-engine
guide's mode), conversations of 3 turns.

Each turn condenses the conversation and the new message into a standalone question (no LLM
call on the first turn, whose history is empty), retrieves the top 3 chunks for it from
pgvector and answers with them and the history in the prompt. A chat engine holds one
conversation in its memory; a server keeps one engine per conversation (`new_conversation`),
all sharing the index, the embedding model and the LLM.

    python -m accel.examples.llamaindex.chat "How do I push an item onto a heap?"
"""

from __future__ import annotations

import argparse
import copy

from llama_index.core import VectorStoreIndex
from llama_index.core.chat_engine import CondensePlusContextChatEngine
from llama_index.core.chat_engine.types import BaseChatEngine
from llama_index.core.memory import ChatMemoryBuffer

from ..corpus import pydoc_documents
from ..stack import StackConfig, add_arguments, config_from_args
from .models import build_index, embed_model, llm

TOP_K = 3
MEMORY_TOKENS = 3000
FOLLOW_UPS = ("Can you tell me more about that?", "Show me how to use it in a short example.")
CONTEXT_PROMPT = (
    "You are a chatbot answering questions about the Python standard library documentation."
    " Here are the relevant documents for the context:\n"
    "{context_str}"
    "\nInstruction: Use the previous chat history, or the context above, to interact and help the user."
)


def build_app(config: StackConfig, index: VectorStoreIndex, *, parallel: bool = False) -> CondensePlusContextChatEngine:
    """One conversation's chat engine (`parallel` changes nothing: a turn has no independent
    steps to hand-parallelise)."""
    return index.as_chat_engine(
        chat_mode="condense_plus_context",
        llm=llm(config, chat=True),
        embed_model=embed_model(config),
        similarity_top_k=TOP_K,
        memory=ChatMemoryBuffer.from_defaults(token_limit=MEMORY_TOKENS),
        context_prompt=CONTEXT_PROMPT,
    )


def new_conversation(engine: BaseChatEngine) -> BaseChatEngine:
    """The same engine with a memory of its own (what `as_chat_engine(memory=...)` per session
    builds, without rebuilding the retriever and the LLM client)."""
    conversation = copy.copy(engine)
    conversation._memory = ChatMemoryBuffer.from_defaults(token_limit=MEMORY_TOKENS)
    return conversation


def turns(question: str) -> list[str]:
    return [question, *FOLLOW_UPS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="+")
    parser.add_argument("--modules", default="heapq,bisect,functools")
    add_arguments(parser)
    args = parser.parse_args()
    config = config_from_args(args)
    engine = build_app(config, build_index(config, pydoc_documents(args.modules.split(",")), "example_chat"))
    for question in args.questions:
        conversation = new_conversation(engine)
        for message in turns(question):
            print(f"User: {message}\nAssistant: {conversation.chat(message).response}\n")


if __name__ == "__main__":
    main()
