"""The `accel` command line."""

import typer

app = typer.Typer(help="accel: drop-in acceleration for LangChain and LlamaIndex apps", no_args_is_help=True)


def main() -> None:
    app()
