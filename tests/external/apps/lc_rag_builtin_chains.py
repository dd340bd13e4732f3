"""LangChain tutorial "Build a Retrieval Augmented Generation (RAG) App", section "Built-in
chains" (v0.2 docs, https://python.langchain.com/v0.2/docs/tutorials/rag/#built-in-chains,
source langchain-ai/langchain docs/docs/tutorials/rag.ipynb):

    system_prompt = ("You are an assistant for question-answering tasks. ... \\n\\n{context}")
    prompt = ChatPromptTemplate.from_messages([("system", system_prompt), ("human", "{input}")])
    question_answer_chain = create_stuff_documents_chain(llm, prompt)
    rag_chain = create_retrieval_chain(retriever, question_answer_chain)
    response = rag_chain.invoke({"input": "What is Task Decomposition?"})

Changes from the documented code:
- `from langchain.chains import ...` -> `from langchain_classic.chains import ...`: the same
  functions, moved to langchain-classic in LangChain 1.0 (the installed version);
- the `retriever` and `llm` of the notebook's earlier cells come from `lc_rag_tutorial` (the
  same page), with the changes listed there (pydoc text files, PGVector + MiniLM, ChatOpenAI on
  the test vLLM server with temperature=0 and small max_tokens).
"""

from __future__ import annotations

from langchain_classic.chains import create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_core.prompts import ChatPromptTemplate

system_prompt = (
    "You are an assistant for question-answering tasks. "
    "Use the following pieces of retrieved context to answer "
    "the question. If you don't know the answer, say that you "
    "don't know. Use three sentences maximum and keep the "
    "answer concise."
    "\n\n"
    "{context}"
)


def build(retriever, llm):
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", system_prompt),
            ("human", "{input}"),
        ]
    )

    question_answer_chain = create_stuff_documents_chain(llm, prompt)
    rag_chain = create_retrieval_chain(retriever, question_answer_chain)
    return rag_chain
