"""LlamaIndex "Sub Question Query Engine" guide (docs/examples/query_engine/sub_question_query_engine.ipynb):

    vector_query_engine = VectorStoreIndex.from_documents(pg_essay, use_async=True).as_query_engine()
    query_engine_tools = [QueryEngineTool(query_engine=vector_query_engine,
        metadata=ToolMetadata(name="pg_essay", description="Paul Graham essay on What I Worked On"))]
    query_engine = SubQuestionQueryEngine.from_defaults(query_engine_tools=query_engine_tools, use_async=True)
    response = query_engine.query("How was Paul Grahams life different before, during, and after YC?")

Changes: the starter tutorial's documents and `Settings`; two tools (one index per half of the
files), as the guide's multi-document variants do. The guide's question generator (the LLM
writing sub-questions as JSON, `LLMQuestionGenerator` for an LLM without function calling)
(`LLMQuestionGenerator`, passed explicitly: for an `OpenAI`-class LLM the default is the
function-calling generator of a package not installed here) cannot parse the offline model's
text, so that engine fails as stock fails; a fixed generator (the same documented
`question_gen=` argument) runs the sub-questions.
"""

from __future__ import annotations

from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.query_engine import SubQuestionQueryEngine
from llama_index.core.question_gen import LLMQuestionGenerator
from llama_index.core.question_gen.types import BaseQuestionGenerator, SubQuestion
from llama_index.core.tools import QueryEngineTool, ToolMetadata


class FixedQuestions(BaseQuestionGenerator):
    """Two sub-questions per tool, as the guide's generator would write them."""

    def _get_prompts(self):
        return {}

    def _update_prompts(self, prompts) -> None:
        pass

    def generate(self, tools, query):
        return [SubQuestion(sub_question=f"{query.query_str} ({aspect})", tool_name=tool.name)
                for tool in tools for aspect in ("what it does", "how to call it")]

    async def agenerate(self, tools, query):
        return self.generate(tools, query)


def build(files: list[str], *, fixed_questions: bool, use_async: bool = True):
    half = len(files) // 2
    tools = []
    for name, part in (("first_modules", files[:half]), ("other_modules", files[half:])):
        documents = SimpleDirectoryReader(input_files=part).load_data()
        vector_query_engine = VectorStoreIndex.from_documents(documents, use_async=True).as_query_engine()
        tools.append(QueryEngineTool(query_engine=vector_query_engine,
                                     metadata=ToolMetadata(name=name, description=f"Python documentation of {len(part)} modules")))
    return SubQuestionQueryEngine.from_defaults(
        query_engine_tools=tools,
        use_async=use_async,
        question_gen=FixedQuestions() if fixed_questions else LLMQuestionGenerator.from_defaults(),
    )
