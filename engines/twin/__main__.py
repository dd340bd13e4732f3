"""`python -m accel.engines.twin`: serve an LLM twin, and its encoder twins from a child process.

Prints one JSON line on stdout once every twin listens (their base URLs and the profile's
label), then serves until SIGTERM or SIGINT. An LLM twin told to die ends the process with
status 1, as a crashed engine would, and takes its encoder twins with it.

The encoder twins run in a process of their own (`--encoders-only`, in the LLM twin's process
group, so `accel down` stops both), as the real servers do: on one loop, a system that sends
many encoder calls (stock LlamaIndex: 69 embedding and 32 rerank requests a batch against
accel's 9-13 each) held up the loop that ends the LLM's modelled steps, and the LLM fell up to
0.31 s behind its model in that system's window only (2026-12-06).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import signal
import sys

from accel.engines.offline.llm import build_llm
from accel.engines.twin.encoder_server import TwinEncoderServer
from accel.engines.twin.llm_server import TwinLLMServer
from accel.engines.twin.profile import load_profile

log = logging.getLogger("accel.engines.twin")


async def serve(args: argparse.Namespace) -> int:
    if args.encoders_only:
        return await serve_encoders(args)
    encoders = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "accel.engines.twin", "--encoders-only", "--profile", args.profile, "--host", args.host,
        "--embed-port", str(args.embed_port), "--rerank-port", str(args.rerank_port),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)  # its stdin closes when this process ends
    try:
        return await serve_llm(args, encoders)
    finally:
        if encoders.returncode is None:
            encoders.terminate()
        await encoders.wait()


async def serve_llm(args: argparse.Namespace, encoders: asyncio.subprocess.Process) -> int:
    """The LLM twin here; the encoder twins' URLs from the line their process prints. The
    process ends when they do (a stack is whole or gone: `accel up --twin` restarts it whole)."""
    profile = load_profile(args.profile)
    llm = TwinLLMServer(profile, build_llm(args.model_size or profile.tokenizer), served_model_name=args.served_model_name,
                        priority=args.scheduling_policy == "priority")
    assert encoders.stdout is not None
    line = await encoders.stdout.readline()
    if not line:
        log.error("twin: the encoder twins' process exited (%s) before listening", await encoders.wait())
        return 1
    stop = asyncio.Event()
    died = False
    bury = llm.engine.on_death

    def on_death() -> None:
        nonlocal died
        died = True
        if bury is not None:
            bury()
        stop.set()

    llm.engine.on_death = on_death
    watcher = asyncio.create_task(_end_with(encoders, stop), name="twin-encoders-watch")
    _stop_on_signals(stop)
    try:
        urls = {"openai_base_url": await llm.start(args.host, args.port) + "/v1", **json.loads(line),
                "model": llm.model, "profile": profile.name, "label": profile.label}
        freeze_startup_heap()
        _say(urls)
        await stop.wait()
    finally:
        watcher.cancel()
        await llm.close()
    return 1 if died or encoders.returncode not in (None, 0) else 0


async def serve_encoders(args: argparse.Namespace) -> int:
    """The embedding and rerank twins; prints their URLs and model names as one JSON line."""
    profile = load_profile(args.profile)
    embed = TwinEncoderServer(profile, "embed")
    rerank = TwinEncoderServer(profile, "rerank")
    stop = asyncio.Event()
    _stop_on_signals(stop)
    orphaned = asyncio.create_task(_end_at_eof(stop), name="twin-parent-watch")
    try:
        urls = {"embed_base_url": await embed.start(args.host, args.embed_port) + "/v1",
                "rerank_base_url": await rerank.start(args.host, args.rerank_port),
                "embed_model_name": embed.model, "rerank_model_name": rerank.model}
        freeze_startup_heap()
        _say(urls)
        await stop.wait()
    finally:
        orphaned.cancel()
        for server in (embed, rerank):
            await server.close()
    return 0


async def _end_at_eof(stop: asyncio.Event) -> None:
    """Stop once stdin closes: the LLM twin's process, which holds its other end, has ended
    (killed included), so these twins never outlive it."""
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()
    stop.set()


async def _end_with(encoders: asyncio.subprocess.Process, stop: asyncio.Event) -> None:
    code = await encoders.wait()
    if not stop.is_set():
        log.error("twin: the encoder twins' process ended (%s); the LLM twin ends with it", code)
        stop.set()


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)


def _say(urls: dict[str, str]) -> None:
    sys.stdout.write(json.dumps(urls) + "\n")
    sys.stdout.flush()


def freeze_startup_heap() -> int:
    """Move every object alive now (modules, the tokenizer, the profile: ~415,000 here) out of
    the collector's reach, and return how many. A full collection over them took 0.19 s, during
    which the twins' loop ran no step and ended no call: 0.2-0.3 s of lag in whichever bench
    window it fell (2026-12-04, one batch window in four of the suite's). Objects made while
    serving are still collected, young and cheap."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("twin: %d start-up objects frozen out of the collector's scans", frozen)
    return frozen


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m accel.engines.twin", description=__doc__)
    parser.add_argument("--profile", default="h100-8b", help="a shipped profile's name or a profile file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="the LLM twin's port (0: any free one)")
    parser.add_argument("--embed-port", type=int, default=0)
    parser.add_argument("--rerank-port", type=int, default=0)
    parser.add_argument("--served-model-name", default="tiny")
    parser.add_argument("--model-size", default=None,
                        help="the offline model whose tokenizer counts tokens (default: the profile's)")
    parser.add_argument("--scheduling-policy", choices=("fcfs", "priority"), default="fcfs")
    parser.add_argument("--encoders-only", action="store_true",
                        help="serve the encoder twins alone (the LLM twin's process starts one such child)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    sys.exit(asyncio.run(serve(args)))


if __name__ == "__main__":
    main()
