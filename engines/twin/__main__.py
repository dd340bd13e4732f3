"""`python -m accel.engines.twin`: serve an LLM twin and its encoder twins from one process.

Prints one JSON line on stdout once every twin listens (their base URLs and the profile's
label), then serves until SIGTERM or SIGINT. An LLM twin told to die ends the process with
status 1, as a crashed engine would.
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
    profile = load_profile(args.profile)
    llm = TwinLLMServer(profile, build_llm(args.model_size or profile.tokenizer), served_model_name=args.served_model_name,
                        priority=args.scheduling_policy == "priority")
    embed = TwinEncoderServer(profile, "embed")
    rerank = TwinEncoderServer(profile, "rerank")
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
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        urls = {"openai_base_url": await llm.start(args.host, args.port) + "/v1",
                "embed_base_url": await embed.start(args.host, args.embed_port) + "/v1",
                "rerank_base_url": await rerank.start(args.host, args.rerank_port),
                "model": llm.model, "embed_model_name": embed.model, "rerank_model_name": rerank.model,
                "profile": profile.name, "label": profile.label}
        freeze_startup_heap()
        sys.stdout.write(json.dumps(urls) + "\n")
        sys.stdout.flush()
        await stop.wait()
    finally:
        for server in (llm, embed, rerank):
            await server.close()
    return 1 if died else 0


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
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    sys.exit(asyncio.run(serve(args)))


if __name__ == "__main__":
    main()
