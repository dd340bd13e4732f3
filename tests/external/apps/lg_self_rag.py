"""LangGraph tutorial "Self-RAG" (https://langchain-ai.github.io/langgraph/tutorials/rag/langgraph_self_rag/):
retrieve, grade each document for relevance, generate from the kept ones, then grade the
generation for hallucinations and usefulness; a graph with conditional edges and loops.

The graph is the example app's (`accel.examples.langgraph.self_rag`, which says what it
changes): node functions, prompts and state as written. Here the documents, store, embeddings
and model are those of `lc_rag_tutorial`. In the example, the three graders are
`prompt | llm | StrOutputParser()` read as "no" when the text starts with "no", instead of
`llm.with_structured_output(Grade...)` (guided JSON never closes on the random offline model,
and with its text an exact "yes" would never come, so every run would loop to the recursion
limit: reading anything but "no" as "yes" keeps the tutorial's flow and ends it).
"""

from accel.examples.langgraph.self_rag import build

__all__ = ["build"]
