"""LangChain integration page "vLLM" (LLMs) (https://python.langchain.com/docs/integrations/llms/vllm/,
source langchain-ai/langchain docs/docs/integrations/llms/vllm.ipynb), sections "Integrate the
model in an LLMChain" and "OpenAI-Compatible Completion":

    template = \"\"\"Question: {question}

    Answer: Let's think step by step.\"\"\"
    prompt = PromptTemplate(template=template, input_variables=["question"])
    llm_chain = LLMChain(prompt=prompt, llm=llm)
    print(llm_chain.run(question))

    llm = VLLMOpenAI(openai_api_key="EMPTY", openai_api_base="http://localhost:8000/v1",
                     model_name="tiiuae/falcon-7b", model_kwargs={"stop": ["."]})
    print(llm("Rome is"))

Changes from the documented code:
- `openai_api_base` / `model_name`: the test vLLM server and its served model; `temperature=0`
  and a small `max_tokens` added (greedy, short);
- the LLMChain section's `llm` is the in-process `VLLM(model="mosaicml/mpt-7b", ...)` class,
  which loads a model into the app's process; here it is the page's `VLLMOpenAI` client;
- `from langchain.chains import LLMChain` / `from langchain.prompts import PromptTemplate` ->
  `langchain_classic.chains` / `langchain_core.prompts` (LangChain 1.0 locations); `llm(...)` and
  `llm_chain.run(...)` (removed / deprecated call styles) -> `invoke`.
"""

from __future__ import annotations

from langchain_classic.chains import LLMChain
from langchain_community.llms import VLLMOpenAI
from langchain_core.prompts import PromptTemplate

template = """Question: {question}

Answer: Let's think step by step."""


def completion_llm(base_url: str, model: str, max_tokens: int = 16) -> VLLMOpenAI:
    llm = VLLMOpenAI(
        openai_api_key="EMPTY",
        openai_api_base=base_url,
        model_name=model,
        model_kwargs={"stop": ["."]},
        temperature=0,
        max_tokens=max_tokens,
    )
    return llm


def llm_chain(llm):
    prompt = PromptTemplate(template=template, input_variables=["question"])

    llm_chain = LLMChain(prompt=prompt, llm=llm)
    return llm_chain
