"""Self-RAG, as LangGraph's tutorial writes it
(https://langchain-ai.github.io/langgraph/tutorials/rag/langgraph_self_rag/): retrieve, grade
each document for relevance one after another, generate from the kept ones, then grade the
generation for hallucinations and usefulness, looping back to rewrite the question or generate
again. Seven LLM calls per run on the usual path (four grades, the answer, two graders).

    python -m accel.examples.langgraph.self_rag "How do I decode a JSON document?"

Node functions, prompts and state are the tutorial's (the generation prompt,
`hub.pull("rlm/rag-prompt")`, is given the list of documents itself, as there). Changes: the
store is PGVector on the example stack; the three graders are `prompt | llm | StrOutputParser()`
read as "no" when the text starts with "no", instead of `llm.with_structured_output(Grade...)`
(guided JSON never closes on the random offline model, and with its text an exact "yes" would
never come, so every run would loop to the recursion limit: reading anything but "no" as "yes"
keeps the tutorial's flow and ends it). Regenerations are bounded as LangGraph's local adaptive
RAG tutorial bounds them (`loop_step` against `max_retries`, 3): at temperature 0 an answer the
hallucination grader rejects comes back identical every time, so the tutorial's "not supported"
edge looped until LangGraph's recursion limit (10,007 steps in this version), minutes of one
request after another on the `h100-8b` twins.
"""

from __future__ import annotations

import argparse
from typing import Any, TypedDict

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langgraph.graph import END, START, StateGraph

from ..corpus import pydoc_documents
from ..langchain.models import build_index, chat_model
from ..stack import StackConfig, add_arguments, config_from_args

# hub.pull("rlm/rag-prompt"), as the tutorial prints it (`prompt.invoke(...).to_messages()`)
RAG_PROMPT_TEXT = (
    "You are an assistant for question-answering tasks. Use the following pieces of retrieved context "
    "to answer the question. If you don't know the answer, just say that you don't know. Use three "
    "sentences maximum and keep the answer concise.\nQuestion: {question} \nContext: {context} \nAnswer:"
)


GRADE_SYSTEM = """You are a grader assessing relevance of a retrieved document to a user question. \n 
    It does not need to be a stringent test. The goal is to filter out erroneous retrievals. \n
    If the document contains keyword(s) or semantic meaning related to the user question, grade it as relevant. \n
    Give a binary score 'yes' or 'no' score to indicate whether the document is relevant to the question."""
HALLUCINATION_SYSTEM = """You are a grader assessing whether an LLM generation is grounded in / supported by a set of retrieved facts. \n 
     Give a binary score 'yes' or 'no'. 'Yes' means that the answer is grounded in / supported by the set of facts."""
ANSWER_SYSTEM = """You are a grader assessing whether an answer addresses / resolves a question \n 
     Give a binary score 'yes' or 'no'. Yes' means that the answer resolves the question."""
REWRITE_SYSTEM = """You a question re-writer that converts an input question to a better version that is optimized \n 
     for vectorstore retrieval. Look at the input and formulate an improved question."""


MAX_RETRIES = 3


class GraphState(TypedDict, total=False):
    question: str
    generation: str
    documents: list
    loop_step: int


def binary_score(text: str) -> str:
    return "no" if text.strip().lower().startswith("no") else "yes"


def build(vectorstore, llm):
    """The tutorial's compiled graph: `app.invoke({"question": q})["generation"]`."""
    retriever = vectorstore.as_retriever()
    grade_prompt = ChatPromptTemplate.from_messages(
        [("system", GRADE_SYSTEM), ("human", "Retrieved document: \n\n {document} \n\n User question: {question}")])
    retrieval_grader = grade_prompt | llm | StrOutputParser()
    rag_chain = ChatPromptTemplate.from_messages([("human", RAG_PROMPT_TEXT)]) | llm | StrOutputParser()
    hallucination_prompt = ChatPromptTemplate.from_messages(
        [("system", HALLUCINATION_SYSTEM), ("human", "Set of facts: \n\n {documents} \n\n LLM generation: {generation}")])
    hallucination_grader = hallucination_prompt | llm | StrOutputParser()
    answer_prompt = ChatPromptTemplate.from_messages(
        [("system", ANSWER_SYSTEM), ("human", "User question: \n\n {question} \n\n LLM generation: {generation}")])
    answer_grader = answer_prompt | llm | StrOutputParser()
    re_write_prompt = ChatPromptTemplate.from_messages(
        [("system", REWRITE_SYSTEM), ("human", "Here is the initial question: \n\n {question} \n Formulate an improved question.")])
    question_rewriter = re_write_prompt | llm | StrOutputParser()

    def retrieve(state):
        question = state["question"]
        documents = retriever.invoke(question)
        return {"documents": documents, "question": question}

    def generate(state):
        question = state["question"]
        documents = state["documents"]
        generation = rag_chain.invoke({"context": documents, "question": question})
        return {"documents": documents, "question": question, "generation": generation,
                "loop_step": state.get("loop_step", 0) + 1}

    def grade_documents(state):
        question = state["question"]
        documents = state["documents"]
        filtered_docs = []
        for d in documents:
            grade = binary_score(retrieval_grader.invoke({"question": question, "document": d.page_content}))
            if grade == "yes":
                filtered_docs.append(d)
        return {"documents": filtered_docs, "question": question}

    def transform_query(state):
        question = state["question"]
        documents = state["documents"]
        better_question = question_rewriter.invoke({"question": question})
        return {"documents": documents, "question": better_question}

    def decide_to_generate(state):
        return "transform_query" if not state["documents"] else "generate"

    def grade_generation_v_documents_and_question(state):
        question = state["question"]
        documents = state["documents"]
        generation = state["generation"]
        retry = state.get("loop_step", 0) <= MAX_RETRIES
        grade = binary_score(hallucination_grader.invoke({"documents": documents, "generation": generation}))
        if grade == "yes":
            grade = binary_score(answer_grader.invoke({"question": question, "generation": generation}))
            if grade == "yes":
                return "useful"
            return "not useful" if retry else "max retries"
        return "not supported" if retry else "max retries"

    workflow = StateGraph(GraphState)
    workflow.add_node("retrieve", retrieve)
    workflow.add_node("grade_documents", grade_documents)
    workflow.add_node("generate", generate)
    workflow.add_node("transform_query", transform_query)
    workflow.add_edge(START, "retrieve")
    workflow.add_edge("retrieve", "grade_documents")
    workflow.add_conditional_edges("grade_documents", decide_to_generate,
                                   {"transform_query": "transform_query", "generate": "generate"})
    workflow.add_edge("transform_query", "retrieve")
    workflow.add_conditional_edges("generate", grade_generation_v_documents_and_question,
                                   {"not supported": "generate", "useful": END, "not useful": "transform_query",
                                    "max retries": END})
    return workflow.compile()


def build_app(config: StackConfig, store: Any, *, parallel: bool = False) -> Any:
    """The harness's entry (`accel bench self-rag`): the tutorial's graph on the example stack.
    Nothing in it runs side by side, so `parallel` changes nothing."""
    return build(store, chat_model(config))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="+")
    parser.add_argument("--modules", default="json,heapq,textwrap")
    add_arguments(parser)
    args = parser.parse_args()
    config = config_from_args(args)
    store = build_index(config, pydoc_documents(args.modules.split(",")), "example_self_rag")
    app = build(store, chat_model(config))
    for question in args.questions:
        print(f"Q: {question}\nA: {app.invoke({'question': question})['generation']}\n")


if __name__ == "__main__":
    main()
