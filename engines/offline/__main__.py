"""`python -m accel.engines.offline build-llm --size tiny|bench`: build the offline LLM."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from accel.engines.offline.llm import SPECS, build_llm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m accel.engines.offline")
    commands = parser.add_subparsers(dest="command", required=True)
    llm = commands.add_parser("build-llm", help="build the offline Llama-architecture model")
    llm.add_argument("--size", choices=sorted(SPECS), default="bench")
    llm.add_argument("--out", type=Path, default=None, help="target directory")
    llm.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    print(build_llm(args.size, args.out, force=args.force))
    return 0


if __name__ == "__main__":
    sys.exit(main())
