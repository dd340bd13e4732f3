import time, statistics
import accel
import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnablePassthrough
from accel.adapters.langchain import runs as runs_mod
from .test_run_tree import Recorder, RAG_PROMPT, format_docs
pytestmark = [pytest.mark.engines, pytest.mark.slow]

def test_cost(vectorstore, chat_model, questions):
    retriever = vectorstore.as_retriever(search_kwargs={"k": 3})
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | RAG_PROMPT | chat_model | StrOutputParser()
    fast = accel.wrap(chain)
    spent = []
    calls = [0]
    orig_f, orig_g, orig_fin = runs_mod.RunTree.finished, runs_mod.RunTree.generated, runs_mod.RunTree.finish
    def timed(fn):
        def w(self, *a, **k):
            t = time.perf_counter(); calls[0] += 1
            try: return fn(self, *a, **k)
            finally: spent.append(time.perf_counter() - t)
        return w
    runs_mod.RunTree.finished, runs_mod.RunTree.generated, runs_mod.RunTree.finish = timed(orig_f), timed(orig_g), timed(orig_fin)
    lat = {"none": [], "tracer": []}
    stock_lat = {"none": [], "tracer": []}
    for i in range(12):
        q = questions[i % 4]
        for mode in ("none", "tracer"):
            cfg = {"callbacks": [Recorder()]} if mode == "tracer" else {}
            t = time.perf_counter(); fast.invoke(q, config=cfg); lat[mode].append(time.perf_counter() - t)
            t = time.perf_counter(); chain.invoke(q, config=cfg); stock_lat[mode].append(time.perf_counter() - t)
    per_query = sum(spent) / 12
    print(f"\nRunTree work per traced query: {per_query*1000:.2f} ms over {calls[0]/12:.0f} watcher calls")
    for mode in lat:
        print(f"accel {mode}: median {statistics.median(lat[mode])*1000:.0f} ms; stock {mode}: median {statistics.median(stock_lat[mode])*1000:.0f} ms")
