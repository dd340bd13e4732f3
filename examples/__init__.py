"""Stock LangChain and LlamaIndex apps of the seed papers' workflows (no accel import).

Each module exposes `build_app(...)` for the benchmark harness and runs as a script against
the `accel up` stack or any OpenAI-compatible vLLM server + Postgres with pgvector.
"""
