"""LlamaIndex chat engine guides, one app per chat mode
(https://developers.llamaindex.ai/python/framework/module_guides/deploying/chat_engines/usage_pattern/
and the mode notebooks docs/examples/chat_engine/chat_engine_{best,context,condense_question,
condense_plus_context}.ipynb, "Chat Engine - Simple Mode REPL" chat_engine_repl.ipynb):

    chat_engine = SimpleChatEngine.from_defaults(llm=llm)                       # simple
    response = chat_engine.stream_chat("Write me a poem about raining cats and dogs.")

    memory = ChatMemoryBuffer.from_defaults(token_limit=1500)                   # context
    chat_engine = index.as_chat_engine(chat_mode="context", memory=memory,
        system_prompt=("You are a chatbot, able to have normal interactions, as well as talk"
                       " about an essay discussing Paul Grahams life."))
    response = chat_engine.chat("Hello!")
    response = chat_engine.chat("What did Paul Graham do growing up?")
    response = chat_engine.chat("Can you tell me more?")
    chat_engine.reset()
    response = chat_engine.stream_chat("What did Paul Graham do after YC?")

    chat_engine = index.as_chat_engine(chat_mode="condense_question", verbose=True)   # condense question
    response = chat_engine.chat("What did Paul Graham do after YC?")
    response = chat_engine.chat("What about after that?")
    response = chat_engine.chat("Can you tell me more?")
    chat_engine.reset()
    response = chat_engine.chat("What about after that?")

    memory = ChatMemoryBuffer.from_defaults(token_limit=3900)                   # condense plus context
    chat_engine = index.as_chat_engine(chat_mode="condense_plus_context", memory=memory, llm=llm,
        context_prompt=("You are a chatbot, able to have normal interactions, as well as talk"
                        " about an essay discussing Paul Grahams life."
                        "Here are the relevant documents for the context:\\n"
                        "{context_str}"
                        "\\nInstruction: Use the previous chat history, or the context above, to interact"
                        " and help the user."),
        verbose=False)

Changes from the documented code: the index is the starter tutorial's (pydoc text files, MiniLM,
`OpenAILike` on the test vLLM server through `Settings`), the questions ask about those files,
and `verbose=False` (the notebooks print the condensed question; printing changes nothing
else). Each app returns the chat engine; `CONVERSATIONS` are the guides' turns, `None` standing
for `chat_engine.reset()`.
"""

from __future__ import annotations

from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.memory import ChatMemoryBuffer

MODES = ("simple", "context", "condense_question", "condense_plus_context")

SYSTEM_PROMPT = ("You are a chatbot, able to have normal interactions, as well as talk"
                 " about an essay discussing Paul Grahams life.")

CONVERSATIONS = {
    "simple": ["Write me a poem about raining cats and dogs.", "Now make it shorter.", None, "Tell me a joke."],
    "context": ["Hello!", "What does the json module do?", "Can you tell me more?", None, "What is heapq for?"],
    "condense_question": ["How do I decode JSON?", "What about after that?", "Can you tell me more?", None,
                          "What about after that?"],
    "condense_plus_context": ["What does heapq.heappush do?", "Can you tell me more?", "And textwrap?", None,
                              "What is functools.partial for?"],
}


def chat_engine(mode: str, index, llm):
    if mode == "simple":
        return SimpleChatEngine.from_defaults(llm=llm)
    if mode == "context":
        memory = ChatMemoryBuffer.from_defaults(token_limit=1500)
        return index.as_chat_engine(chat_mode="context", memory=memory, system_prompt=SYSTEM_PROMPT)
    if mode == "condense_question":
        return index.as_chat_engine(chat_mode="condense_question", verbose=False)
    if mode == "condense_plus_context":
        memory = ChatMemoryBuffer.from_defaults(token_limit=3900)
        return index.as_chat_engine(
            chat_mode="condense_plus_context",
            memory=memory,
            llm=llm,
            context_prompt=(
                "You are a chatbot, able to have normal interactions, as well as talk"
                " about an essay discussing Paul Grahams life."
                "Here are the relevant documents for the context:\n"
                "{context_str}"
                "\nInstruction: Use the previous chat history, or the context above, to interact and help the user."
            ),
            verbose=False,
        )
    raise ValueError(mode)
