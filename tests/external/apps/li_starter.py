"""LlamaIndex "Starter Tutorial (Using Local LLMs)", sections "Adding RAG Capabilities" and
"Storing the RAG Index" (https://developers.llamaindex.ai/python/framework/getting_started/starter_example_local/,
source run-llama/llama_index docs/docs/getting_started/starter_example_local.md):

    Settings.embed_model = HuggingFaceEmbedding(model_name="BAAI/bge-base-en-v1.5")
    Settings.llm = Ollama(model="llama3.1", request_timeout=360.0, context_window=8000)
    documents = SimpleDirectoryReader("data").load_data()
    index = VectorStoreIndex.from_documents(documents)
    query_engine = index.as_query_engine()

    async def search_documents(query: str) -> str:
        response = await query_engine.aquery(query)
        return str(response)

    index.storage_context.persist("storage")
    storage_context = StorageContext.from_defaults(persist_dir="storage")
    index = load_index_from_storage(storage_context)
    query_engine = index.as_query_engine()

The agent around `search_documents` (an `AgentWorkflow` with tools) is not part of this app:
the query engine and the tool function are. Changes from the documented code:
- embed model "BAAI/bge-base-en-v1.5" -> the packaged all-MiniLM-L6-v2 path;
- `Ollama(model="llama3.1", request_timeout=360.0, context_window=8000)` -> `OpenAILike` on the
  test vLLM server (`api_base`, `api_key="EMPTY"`, the served model, `is_chat_model=True` as
  Ollama's chat API, `temperature=0`, small `max_tokens`) with `context_window=1600`: the tiny
  server's 2048-token window less a margin, since LlamaIndex counts prompt tokens with its own
  tokenizer (the page likewise sets `context_window` by hand "to limit memory usage");
- "data" (Paul Graham's essay, downloaded) -> a folder of pydoc text files; "storage" -> a
  folder given by the caller.
"""

from __future__ import annotations

from llama_index.core import Settings, SimpleDirectoryReader, StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.embeddings.huggingface import HuggingFaceEmbedding
from llama_index.llms.openai_like import OpenAILike

CONTEXT_WINDOW = 1600


def local_llm(api_base: str, model: str, max_tokens: int = 16, **options) -> OpenAILike:
    """The tutorial's local chat LLM, served by vLLM's OpenAI-compatible server here."""
    return OpenAILike(model=model, api_base=api_base, api_key="EMPTY", is_chat_model=True, temperature=0.0,
                      max_tokens=max_tokens, context_window=CONTEXT_WINDOW, timeout=360.0, **options)


def configure(api_base: str, model: str, embed_model_path: str) -> None:
    # Settings control global defaults
    Settings.embed_model = HuggingFaceEmbedding(model_name=embed_model_path)
    Settings.llm = local_llm(api_base, model)


def build(data_dir: str, VectorStoreIndex=VectorStoreIndex):  # noqa: N803 (the class, or a drop-in for it)
    # Create a RAG tool using LlamaIndex
    documents = SimpleDirectoryReader(data_dir).load_data()
    index = VectorStoreIndex.from_documents(
        documents,
        # we can optionally override the embed_model here
        # embed_model=Settings.embed_model,
    )
    query_engine = index.as_query_engine(
        # we can optionally override the llm here
        # llm=Settings.llm,
    )

    async def search_documents(query: str) -> str:
        """Useful for answering natural language questions about an personal essay written by Paul Graham."""
        response = await query_engine.aquery(query)
        return str(response)

    return index, query_engine, search_documents


def persist_and_reload(index, persist_dir: str):
    # Save the index
    index.storage_context.persist(persist_dir)

    # Later, load the index
    storage_context = StorageContext.from_defaults(persist_dir=persist_dir)
    index = load_index_from_storage(
        storage_context,
        # we can optionally override the embed_model here
        # it's important to use the same embed_model as the one used to build the index
        # embed_model=Settings.embed_model,
    )
    query_engine = index.as_query_engine(
        # we can optionally override the llm here
        # llm=Settings.llm,
    )
    return query_engine
