"""LangChain how-to "How to use the MultiQueryRetriever", section "Supplying your own prompt"
(v0.2/v0.3 docs, https://python.langchain.com/docs/how_to/MultiQueryRetriever/#supplying-your-own-prompt,
source langchain-ai/langchain docs/docs/how_to/MultiQueryRetriever.ipynb):

    class LineListOutputParser(BaseOutputParser[List[str]]):
        def parse(self, text: str) -> List[str]:
            lines = text.strip().split("\\n")
            return list(filter(None, lines))  # Remove empty lines
    output_parser = LineListOutputParser()
    QUERY_PROMPT = PromptTemplate(input_variables=["question"], template=\"\"\"You are an AI language
        model assistant. Your task is to generate five ... Original question: {question}\"\"\")
    llm = ChatOpenAI(temperature=0)
    llm_chain = QUERY_PROMPT | llm | output_parser
    retriever = MultiQueryRetriever(retriever=vectordb.as_retriever(), llm_chain=llm_chain, parser_key="lines")

The app's own output parser class, prompt text and chain are as written. Changes:
- the `vectordb` of the page's first cell comes from `lc_multi_query` (the same page), with
  the changes listed there (pydoc text files, PGVector + MiniLM instead of Chroma + OpenAI);
- `from langchain.retrievers.multi_query import ...` -> `langchain_classic.retrievers.multi_query`;
- llm: `ChatOpenAI(temperature=0)` -> the same on the test vLLM server with a small `max_tokens`.
"""

from __future__ import annotations

from typing import List

from langchain_classic.retrievers.multi_query import MultiQueryRetriever
from langchain_core.output_parsers import BaseOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_openai import ChatOpenAI


# Output parser will split the LLM result into a list of queries
class LineListOutputParser(BaseOutputParser[List[str]]):
    """Output parser for a list of lines."""

    def parse(self, text: str) -> List[str]:
        lines = text.strip().split("\n")
        return list(filter(None, lines))  # Remove empty lines


output_parser = LineListOutputParser()

QUERY_PROMPT = PromptTemplate(
    input_variables=["question"],
    template="""You are an AI language model assistant. Your task is to generate five 
    different versions of the given user question to retrieve relevant documents from a vector 
    database. By generating multiple perspectives on the user question, your goal is to help
    the user overcome some of the limitations of the distance-based similarity search. 
    Provide these alternative questions separated by newlines.
    Original question: {question}""",
)


def build(vectordb, base_url: str, model: str, max_tokens: int = 48):
    llm = ChatOpenAI(temperature=0, model=model, base_url=base_url, api_key="EMPTY", max_tokens=max_tokens)

    # Chain
    llm_chain = QUERY_PROMPT | llm | output_parser

    # Run
    retriever = MultiQueryRetriever(
        retriever=vectordb.as_retriever(), llm_chain=llm_chain, parser_key="lines"
    )  # "lines" is the key (attribute name) of the parsed output
    return retriever
