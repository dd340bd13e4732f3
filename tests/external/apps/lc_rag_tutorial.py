"""LangChain tutorial "Build a Retrieval Augmented Generation (RAG) App", the preview chain
(v0.2 docs, https://python.langchain.com/v0.2/docs/tutorials/rag/, source
langchain-ai/langchain docs/docs/tutorials/rag.ipynb):

    loader = WebBaseLoader(web_paths=("https://lilianweng.github.io/posts/2023-06-23-agent/",), bs_kwargs=...)
    docs = loader.load()
    text_splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
    splits = text_splitter.split_documents(docs)
    vectorstore = Chroma.from_documents(documents=splits, embedding=OpenAIEmbeddings())
    retriever = vectorstore.as_retriever()
    prompt = hub.pull("rlm/rag-prompt")
    def format_docs(docs): return "\\n\\n".join(doc.page_content for doc in docs)
    rag_chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()

Changes from the documented code (everything else is as written):
- documents: `WebBaseLoader` on the blog post -> `TextLoader` on local pydoc text files;
- vector store: `Chroma.from_documents` -> `PGVector.from_documents` (langchain-postgres, the
  store accel runs on) with the test Postgres as `connection`, a fresh `collection_name`,
  `use_jsonb=True` as on the PGVector integration page;
- embeddings: `OpenAIEmbeddings()` -> `HuggingFaceEmbeddings(model_name=<packaged MiniLM path>)`;
- `hub.pull("rlm/rag-prompt")` (needs the network) -> the same prompt rebuilt from the text the
  tutorial prints for it: one human message, "You are an assistant for question-answering
  tasks. ... Question: {question} \\nContext: {context} \\nAnswer:";
- llm: `ChatOpenAI(model="gpt-4")` -> `ChatOpenAI` on the test vLLM server (`base_url`,
  `api_key="EMPTY"`, the served model), `temperature=0`, small `max_tokens`.
"""

from __future__ import annotations

from langchain_community.document_loaders import TextLoader
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_huggingface import HuggingFaceEmbeddings
from langchain_openai import ChatOpenAI
from langchain_postgres import PGVector
from langchain_text_splitters import RecursiveCharacterTextSplitter

# hub.pull("rlm/rag-prompt"), as the tutorial prints it (`prompt.invoke(...).to_messages()`)
RAG_PROMPT_TEXT = (
    "You are an assistant for question-answering tasks. Use the following pieces of retrieved context "
    "to answer the question. If you don't know the answer, just say that you don't know. Use three "
    "sentences maximum and keep the answer concise.\nQuestion: {question} \nContext: {context} \nAnswer:"
)


def hub_rag_prompt() -> ChatPromptTemplate:
    return ChatPromptTemplate.from_messages([("human", RAG_PROMPT_TEXT)])


def sqlalchemy_url(dsn: str) -> str:
    """The test Postgres (a psycopg URI) as the SQLAlchemy URL `PGVector(connection=...)` takes."""
    return dsn.replace("postgresql://", "postgresql+psycopg://", 1)


def format_docs(docs):
    return "\n\n".join(doc.page_content for doc in docs)


def index(paths: list[str], connection: str, collection_name: str, embed_model_path: str):
    """Load, chunk and index the contents of the documents; the retriever the tutorial uses."""
    docs = [doc for path in paths for doc in TextLoader(path).load()]

    text_splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
    splits = text_splitter.split_documents(docs)
    vectorstore = PGVector.from_documents(
        documents=splits,
        embedding=HuggingFaceEmbeddings(model_name=embed_model_path),
        connection=connection,
        collection_name=collection_name,
        use_jsonb=True,
    )
    return vectorstore


def chat_model(base_url: str, model: str, max_tokens: int = 16) -> ChatOpenAI:
    return ChatOpenAI(model=model, base_url=base_url, api_key="EMPTY", temperature=0, max_tokens=max_tokens)


def build(vectorstore, llm):
    # Retrieve and generate using the relevant snippets of the blog.
    retriever = vectorstore.as_retriever()
    prompt = hub_rag_prompt()

    rag_chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )
    return rag_chain
