"""Engine-call capture, the floor every wrapped app gets: framework components that talk to
engines send their requests through the shared session's engine schedulers, from wherever they
are called (LangGraph nodes, `RunnableLambda`s, custom query engines, tools).

During a wrapped run (`accel.scope.current_run()` is not None), and process-wide under
`ACCEL_AUTO=1` (`route.set_auto(True)`), a patched component method builds the engine requests
its own code would make and reports them as an `EngineCall` to the run's session
(`Session.call` and its async and streaming twins), which makes them one task of the run's
program (`accel.runtime.programs`), so concurrent runs batch their embeddings, reranking and
searches, and LLM requests carry the program's priority. The floor builds no task and sees no
scheduler. Requests and results are the component's own: the plug-in
reproduces exactly what the stock method sends and returns, below the callback layer, so
callbacks and instrumentation fire as stock's. Outside a wrapped run, inside `stock_call()`,
or for options a plug-in does not map, the original method runs. `uninstall()` restores
everything.

How a component plugs in (framework plug-ins live beside their adapter, e.g.
`accel.adapters.langchain.floor`; a plug-in module only registers, it imports no framework):

    from accel.adapters.common import bindings
    from accel.adapters.common.floor import Plugin, arouted, register, routed
    from accel.engines.embeddings import EmbedRequest
    from accel.types import EngineCall

    def embed_plan(self, texts):                      # same arguments as the method
        if self.device != "cpu":
            return "a GPU model in the app's own process"    # -> stock, counted and logged once
        return EngineCall(bindings.embedder(self.model_path),  # the shared engine (kind, key)
                          [EmbedRequest(t, normalize=True) for t in texts],
                          "HuggingFaceEmbedding",             # counters, logs, the task's name
                          shape=lambda vectors: vectors)      # results -> the method's return value

    register(Plugin("llamaindex:HuggingFaceEmbedding",       # label for counters and logs
                    "llama_index.embeddings.huggingface.base",   # module, patched when imported
                    "HuggingFaceEmbedding",                  # class (dotted path in the module)
                    {"_get_text_embeddings": routed("HuggingFaceEmbedding", embed_plan),
                     "_aget_text_embeddings": arouted("HuggingFaceEmbedding", embed_plan)}))

- `routed(component, plan)` / `arouted(component, plan)` make the replacement for a sync /
  async method. `plan(self, *args, **kwargs)` returns an `EngineCall(engine_spec, requests,
  component, shape)` or a string (why this call stays stock); for `arouted` it may be a coroutine (e.g. to run
  the store's own lazy async initialisation first). A plan that raises, or an `EngineError`
  before results arrive, runs the original: the caller gets stock's result or exception.
- Requests are those the engines in `accel.engines` take: `EmbedRequest` (embedder),
  `(query, passage)` pairs (reranker), `VectorQuery` with a `"langchain:<name>"` /
  `"llamaindex:<table>"` collection (pgvector); engines come from `adapters.common.bindings`
  so every framework's calls to one model or database share one engine and batch together.
- For shapes `routed` does not fit (streams, HTTP), a `Plugin` maps method names to any
  `wrap(original) -> replacement` and calls `route.session_of(run).call/acall/stream_call/
  astream_call(run, engine_call)` itself, as `openai_sdk` does for every framework's OpenAI
  client (so LLMs on OpenAI-compatible servers need no per-framework plug-in).
- Register plug-in packages in `PLUGIN_PACKAGES` (framework root module -> package) so that
  `install()` imports them; `install()` is called by each adapter package on import and by
  `ACCEL_AUTO` (`accel.patches.floor`). `stats.snapshot()` counts routed / stock / fallback calls.
"""

from __future__ import annotations

import functools
import importlib
import threading

from accel.adapters.common.floor.plugins import Plugin, arouted, install as _install_plugins
from accel.adapters.common.floor.plugins import installed, is_patched, plugins, register, routed, uninstall
from accel.adapters.common.floor.route import active_run, set_auto, stats

PLUGIN_PACKAGES: dict[str, str] = {
    "openai": "accel.adapters.common.floor.openai_sdk",
    "cohere": "accel.adapters.common.floor.cohere_sdk",
    "langchain_core": "accel.adapters.langchain.floor",
    "llama_index.core": "accel.adapters.llamaindex.floor",
}
"""Framework root module (installed or not) -> the accel package registering its plug-ins."""


def install() -> None:
    """Patch the plug-ins' classes as their frameworks are imported (now, if they already are):
    a framework's plug-in package is imported only once the app imports that framework.
    Idempotent; `uninstall()` restores the originals."""
    import wrapt

    _install_plugins()
    with _lock:
        if _hooked["done"]:
            return
        _hooked["done"] = True
    for framework, package in PLUGIN_PACKAGES.items():
        wrapt.register_post_import_hook(functools.partial(_load, package), framework)


def _load(package: str, _module: object) -> None:
    if not installed():
        return  # uninstalled before the framework was imported
    try:
        importlib.import_module(package)  # its plug-ins register, and are patched, on import
    except ModuleNotFoundError as err:
        if err.name != package:  # the plug-in package exists but something it needs is missing
            raise


_lock = threading.Lock()
_hooked = {"done": False}


__all__ = [
    "PLUGIN_PACKAGES", "Plugin", "active_run", "arouted", "install", "installed", "is_patched",
    "plugins", "register", "routed", "set_auto", "stats", "uninstall",
]
