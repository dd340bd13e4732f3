"""LangChain how-to "How to get your RAG application to return sources", section "Using LCEL"
(v0.2/v0.3 docs, https://python.langchain.com/docs/how_to/qa_sources/, source
langchain-ai/langchain docs/docs/how_to/qa_sources.ipynb):

    rag_chain_from_docs = (
        {
            "input": lambda x: x["input"],  # input query
            "context": lambda x: format_docs(x["context"]),  # context
        }
        | prompt  # format query and context into prompt
        | llm  # generate response
        | StrOutputParser()  # coerce to string
    )
    retrieve_docs = (lambda x: x["input"]) | retriever
    chain = RunnablePassthrough.assign(context=retrieve_docs).assign(answer=rag_chain_from_docs)
    chain.invoke({"input": "What is Task Decomposition"})

`prompt` is the page's (the RAG tutorial's `system_prompt` + ("human", "{input}")), as written.
The `retriever` and `llm` of the page's setup come from `lc_rag_tutorial` with the changes
listed there (pydoc text files, PGVector + MiniLM instead of Chroma + OpenAI embeddings,
ChatOpenAI on the test vLLM server with temperature=0 and small max_tokens).
"""

from __future__ import annotations

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from .lc_rag_builtin_chains import system_prompt


def format_docs(docs):
    return "\n\n".join(doc.page_content for doc in docs)


def build(retriever, llm):
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", system_prompt),
            ("human", "{input}"),
        ]
    )

    # This Runnable takes a dict with keys 'input' and 'context',
    # formats them into a prompt, and generates a response.
    rag_chain_from_docs = (
        {
            "input": lambda x: x["input"],  # input query
            "context": lambda x: format_docs(x["context"]),  # context
        }
        | prompt  # format query and context into prompt
        | llm  # generate response
        | StrOutputParser()  # coerce to string
    )

    # Pass input query to retriever
    retrieve_docs = (lambda x: x["input"]) | retriever

    # Below, we chain `.assign` calls. This takes a dict and successively
    # adds keys-- "context" and "answer"-- where the value for each key
    # is determined by a Runnable. The Runnable operates on all existing
    # keys in the dict.
    chain = RunnablePassthrough.assign(context=retrieve_docs).assign(
        answer=rag_chain_from_docs
    )
    return chain
