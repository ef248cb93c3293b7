"""python -m transformer.gpt {train, sample, eval}: the GPT's commands alone (transformer/gpt/cli.py), the
same as `python -m transformer gpt ...`. Errors print one line and exit 2; --debug shows the traceback."""
from __future__ import annotations

import sys

from tinygrad_lite.cli import OneLineParser, common_flags, run_command
from transformer.gpt.cli import DESCRIPTION, add_commands, nanogpt_spelling


def load_watch():
    """viz.watch, the live training page of --explore (transformer.gpt.cli may not import viz)."""
    import viz.watch
    return viz.watch


def load_plots():
    """viz.plots, for OUT/loss.png: a CLI may import both packages, transformer.gpt.cli may not import viz."""
    import viz.plots
    return viz.plots


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="python -m transformer gpt", description=DESCRIPTION, spell=nanogpt_spelling)
    add_commands(parser, common_flags(parser), load_plots, load_watch)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(args, args.run)


if __name__ == "__main__":
    sys.exit(main())
