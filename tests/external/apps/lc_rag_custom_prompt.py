"""LangChain tutorial "Build a Retrieval Augmented Generation (RAG) App", section "Customizing
the prompt" (v0.2 docs, https://python.langchain.com/v0.2/docs/tutorials/rag/#customizing-the-prompt,
source langchain-ai/langchain docs/docs/tutorials/rag.ipynb):

    template = \"\"\"Use the following pieces of context to answer the question at the end. ...
    Helpful Answer:\"\"\"
    custom_rag_prompt = PromptTemplate.from_template(template)
    rag_chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | custom_rag_prompt | llm | StrOutputParser()

The notebook reuses the `retriever`, `llm` and `format_docs` of its earlier cells; here they
come from `lc_rag_tutorial` (the same page), with the changes listed there (pydoc text files,
PGVector + MiniLM instead of Chroma + OpenAI embeddings, ChatOpenAI on the test vLLM server
with temperature=0 and small max_tokens). The template text and the chain are as written.
"""

from __future__ import annotations

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnablePassthrough

from .lc_rag_tutorial import format_docs

template = """Use the following pieces of context to answer the question at the end.
If you don't know the answer, just say that you don't know, don't try to make up an answer.
Use three sentences maximum and keep the answer as concise as possible.
Always say "thanks for asking!" at the end of the answer.

{context}

Question: {question}

Helpful Answer:"""


def build(retriever, llm):
    custom_rag_prompt = PromptTemplate.from_template(template)

    rag_chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | custom_rag_prompt
        | llm
        | StrOutputParser()
    )
    return rag_chain
