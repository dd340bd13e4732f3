"""LlamaIndex example "SentenceTransformerRerank" (node postprocessor)
(https://developers.llamaindex.ai/python/framework/integrations/node_postprocessors/sentencetransformerrerank/,
source run-llama/llama_index docs/docs/examples/node_postprocessor/SentenceTransformerRerank.ipynb):

    documents = SimpleDirectoryReader("./data/paul_graham").load_data()
    Settings.llm = OpenAI(model="gpt-3.5-turbo")
    Settings.embed_model = HuggingFaceEmbedding(model_name="BAAI/bge-small-en-v1.5")
    index = VectorStoreIndex.from_documents(documents=documents)
    rerank = SentenceTransformerRerank(model="cross-encoder/ms-marco-MiniLM-L-2-v2", top_n=3)
    query_engine = index.as_query_engine(similarity_top_k=10, node_postprocessors=[rerank])
    query_engine = index.as_query_engine(similarity_top_k=10)   # "Next, we try without rerank"

Changes from the documented code:
- `Settings.llm = OpenAI(model="gpt-3.5-turbo")` -> `OpenAILike` on the test vLLM server as in
  `li_starter` (OpenAILike is the OpenAI class for OpenAI-compatible servers);
- embed model "BAAI/bge-small-en-v1.5" -> the packaged all-MiniLM-L6-v2 path;
- cross-encoder "cross-encoder/ms-marco-MiniLM-L-2-v2" -> the offline MiniLM cross-encoder path;
- documents: Paul Graham's essay -> a folder of pydoc text files.
"""

from __future__ import annotations

from llama_index.core import Settings, SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.postprocessor import SentenceTransformerRerank
from llama_index.embeddings.huggingface import HuggingFaceEmbedding

from .li_starter import local_llm


def build(data_dir: str, api_base: str, model: str, embed_model_path: str, cross_encoder_path: str):
    # load documents
    documents = SimpleDirectoryReader(data_dir).load_data()

    Settings.llm = local_llm(api_base, model)
    Settings.embed_model = HuggingFaceEmbedding(
        model_name=embed_model_path
    )

    # build index
    index = VectorStoreIndex.from_documents(documents=documents)

    rerank = SentenceTransformerRerank(
        model=cross_encoder_path, top_n=3
    )

    query_engine = index.as_query_engine(
        similarity_top_k=10, node_postprocessors=[rerank]
    )
    without_rerank = index.as_query_engine(similarity_top_k=10)
    return query_engine, without_rerank
