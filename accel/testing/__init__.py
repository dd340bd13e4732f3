"""Test doubles and fidelity tooling, for accel's own tests and for users checking their apps.

- `fakes`: engines with known latencies for scheduler unit tests and scheduler-overhead
  benchmarks (never a stand-in for a real engine in an end-to-end test);
- `proxy`: a recording HTTP proxy in front of an OpenAI-compatible server (the exact request
  bodies a stock app and its accelerated twin send);
- `recording`: records embeddings, searches and rerank pairs at the boundaries stock and
  accel share, to compare the engine requests of both;
- `templates`: Teola's hand-written module templates (GraphTransform), for building p-graphs
  the way the paper does;
- `runtrees`: LangChain callback run trees recorded and normalised, to compare a wrapped
  chain's trace with the stock chain's.

Nothing in the library imports this package.
"""
