"""LangChain how-to "How to create a custom Retriever" (https://python.langchain.com/docs/how_to/custom_retriever/,
source langchain-ai/langchain docs/docs/how_to/custom_retriever.ipynb): a `BaseRetriever` with
the sync `_get_relevant_documents` only, over five documents:

    class ToyRetriever(BaseRetriever):
        documents: List[Document]
        k: int

        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> List[Document]:
            matching_documents = []
            for document in documents:
                if len(matching_documents) > self.k:
                    return matching_documents
                if query.lower() in document.page_content.lower():
                    matching_documents.append(document)
            return matching_documents

    retriever = ToyRetriever(documents=documents, k=3)

The page notes that a retriever doing file or network access "could benefit from a native async
implementation"; without one, stock's `ainvoke` runs it in the event loop's default executor.
Changes: the loop reads `self.documents` (the page's body reads the notebook's global
`documents`, the same list); the retriever feeds the RAG tutorial's custom-prompt chain
(`lc_rag_custom_prompt`), with queries the page's documents contain.
"""

from __future__ import annotations

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from . import lc_rag_custom_prompt


class ToyRetriever(BaseRetriever):
    """A toy retriever that contains the top k documents that contain the user query.

    This retriever only implements the sync method _get_relevant_documents.
    """

    documents: list[Document]
    """List of documents to retrieve from."""
    k: int
    """Number of top results to return"""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        """Sync implementations for retriever."""
        matching_documents = []
        for document in self.documents:
            if len(matching_documents) > self.k:
                return matching_documents
            if query.lower() in document.page_content.lower():
                matching_documents.append(document)
        return matching_documents


documents = [
    Document(page_content="Dogs are great companions, known for their loyalty and friendliness.",
             metadata={"type": "dog", "trait": "loyalty"}),
    Document(page_content="Cats are independent pets that often enjoy their own space.",
             metadata={"type": "cat", "trait": "independence"}),
    Document(page_content="Goldfish are popular pets for beginners, requiring relatively simple care.",
             metadata={"type": "fish", "trait": "low maintenance"}),
    Document(page_content="Parrots are intelligent birds capable of mimicking human speech.",
             metadata={"type": "bird", "trait": "intelligence"}),
    Document(page_content="Rabbits are social animals that need plenty of space to hop around.",
             metadata={"type": "rabbit", "trait": "social"}),
]

QUERIES = ["dogs", "cats", "pets", "birds", "space", "social"]


def build(llm):
    retriever = ToyRetriever(documents=documents, k=3)
    return lc_rag_custom_prompt.build(retriever, llm)
