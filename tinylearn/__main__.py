"""python -m tinylearn: build the engine's and the paper's pieces yourself, graded offline.

    python -m tinylearn list                 the exercises in reading order: ✓ passes, ✗ not yet, or not started
    python -m tinylearn start 6              write 06_softmax.py into this folder (or: start softmax)
    python -m tinylearn check 6              grade it: the first input it fails on, and the mistake's name
    python -m tinylearn hint 6               one more hint each time
    python -m tinylearn solution 6           the project's own code, and why it is written that way
    python -m tinylearn reset 6              the exercise file afresh (yours kept as .bak)
    python -m tinylearn draw 6 --out s.svg   your op in the backward graph of a small step, after a pass

Every command takes the number or the name. The files and tinylearn-progress.json live in the working
folder (--folder DIR for another); nothing is written into the installed package.
"""
from __future__ import annotations

import sys

from tinygrad_lite.cli import OneLineParser, common_flags, run_command
from tinylearn import commands


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="python -m tinylearn", description=__doc__.splitlines()[0])
    common = common_flags(p, threads=False)
    common.add_argument("--folder", default=".", help="where your exercise files and progress are (default: here)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", parents=[common], help="the exercises and your progress").set_defaults(run=cmd_list)
    for name, run, says in (("start", cmd_start, "write the exercise file here"),
                            ("check", cmd_check, "grade your function"), ("hint", cmd_hint, "one more hint"),
                            ("solution", cmd_solution, "the project's own code, and why"),
                            ("reset", cmd_reset, "write the exercise file afresh"),
                            ("draw", cmd_draw, "your op in the backward graph (after a pass)")):
        command = sub.add_parser(name, parents=[common], help=says)
        command.add_argument("exercise", help="its number or name (6 or softmax)")
        command.set_defaults(run=run)
        if name == "draw":
            command.add_argument("--out", help="the picture to write (.svg, .png, .pdf; default NN_name.svg)")
    return p


def cmd_list(args) -> int:
    print(commands.listing(args.folder))
    return 0


def cmd_start(args) -> int:
    print(commands.start(args.exercise, args.folder))
    return 0


def cmd_check(args) -> int:
    report = commands.check(args.exercise, folder=args.folder)
    print(report)
    return 0 if report.passed else 1


def cmd_hint(args) -> int:
    print(commands.hint(args.exercise, args.folder))
    return 0


def cmd_solution(args) -> int:
    print(commands.solution(args.exercise))
    return 0


def cmd_reset(args) -> int:
    print(commands.reset(args.exercise, args.folder))
    return 0


def cmd_draw(args) -> int:
    print(f"wrote {commands.draw(args.exercise, args.out, folder=args.folder)}")
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    args.threads = None
    return run_command(args, args.run)


if __name__ == "__main__":
    sys.exit(main())
