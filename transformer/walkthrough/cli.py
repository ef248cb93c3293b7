"""The walkthrough's command line: `python -m transformer explain [--section NAME] [--figures DIR]
[--checkpoint PATH]` and examples/walkthrough.py run the sections and print the ✓/✗ tally."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from transformer.walkthrough.end_to_end import DEFAULT_CHECKPOINT
from transformer.walkthrough.printing import Figures, Tally
from transformer.walkthrough.sections import SECTIONS, run

DESCRIPTION = ("The article, runnable: the claims of a Chinese beginner's guide to "
               '"Attention Is All You Need", computed.')


def main(argv=None, load_plots=None) -> int:
    """The command line. `load_plots()` returns the plotting module (viz.plots); it is called only
    for --figures, so the caller decides whether and how the plotting layer is imported."""
    parser = argparse.ArgumentParser(prog="python -m transformer explain",
                                     description=DESCRIPTION)
    parser.add_argument("--section", metavar="NAME",
                        help=f"run one section: {', '.join(SECTIONS)} (or 1–15)")
    parser.add_argument("--figures", metavar="DIR", help="write the figures into DIR")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help=f"translator checkpoint for §15 "
                             f"(default {DEFAULT_CHECKPOINT} if it exists)")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--"]:  # `python -m transformer explain -- --section pe` passes `--` on
        argv = argv[1:]
    args = parser.parse_args(argv)
    encoding = (sys.stdout.encoding or "").lower().replace("-", "")
    if hasattr(sys.stdout, "reconfigure") and encoding != "utf8":
        sys.stdout.reconfigure(errors="backslashreplace")
    names = list(SECTIONS)
    if args.section is not None:
        chosen = args.section.strip().lower()
        if chosen.isdigit() and 1 <= int(chosen) <= len(names):
            chosen = names[int(chosen) - 1]
        if chosen not in SECTIONS:
            print(f"walkthrough: unknown section {args.section!r}; "
                  f"valid names: {', '.join(SECTIONS)}", file=sys.stderr)
            return 2
        names = [chosen]
    if args.checkpoint is not None and not Path(args.checkpoint).is_file():
        print(f"walkthrough: checkpoint {args.checkpoint} does not exist "
              "(train one with `python -m transformer train`)", file=sys.stderr)
        return 2
    if args.figures is not None and load_plots is None:
        print("walkthrough: --figures needs a plotting module; run `python -m transformer explain "
              "--figures DIR`, which passes viz.plots in", file=sys.stderr)
        return 2
    figures = None if args.figures is None else Figures(args.figures, load_plots())
    Tally.passed = Tally.failed = 0
    try:
        run(names, figures=figures, checkpoint=args.checkpoint)
        where = "" if args.figures is None else f"; figures in {args.figures}"
        print(f"\n{Tally.passed} ✓, {Tally.failed} ✗{where}")
    except BrokenPipeError:
        stop_writing()
    return 0


def stop_writing() -> None:
    """The reader closed the pipe (`... | head -50`): it has what it wanted, so this is not an
    error. Standard output goes to os.devnull so Python's last flush at exit has nowhere to fail."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
